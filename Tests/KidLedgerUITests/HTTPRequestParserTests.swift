import Testing
@testable import KidLedgerUI

@Suite struct HTTPRequestParserTests {
    func parse(_ text: String) -> HTTPParseResult { HTTPRequestParser.parse(Array(text.utf8)) }

    func status(_ text: String) -> Int? {
        if case .refused(let status, _) = parse(text) { return status }
        return nil
    }

    @Test func aWholeGetWithQueryAndHeaders() throws {
        let text = "GET /api/history?child=Ava%20B&limit=5 HTTP/1.1\r\nHost: 127.0.0.1:4718\r\nCookie: a=b\r\n\r\n"
        guard case .complete(let r, let consumed) = parse(text) else { Issue.record("\(parse(text))"); return }
        #expect(consumed == text.utf8.count)
        #expect(r.method == "GET")
        #expect(r.path == "/api/history")
        #expect(r.query == ["child": "Ava B", "limit": "5"])
        #expect(r.header("HOST") == "127.0.0.1:4718")
        #expect(r.body.isEmpty)
    }

    @Test func aPostWaitsForItsWholeBody() {
        let head = "POST /api/give HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n"
        #expect(parse(head + "child=") == .incomplete)
        guard case .complete(let r, _) = parse(head + "child=Ava&") else { Issue.record("not complete"); return }
        #expect(String(decoding: r.body, as: UTF8.self) == "child=Ava&")
    }

    @Test func aPartialHeaderIsIncomplete() {
        #expect(parse("GET / HTTP/1.1\r\nHost: x\r\n") == .incomplete)
        #expect(parse("") == .incomplete)
    }

    @Test(arguments: [
        ("GET /\r\n\r\n", 400),                                         // no version
        ("GET  / HTTP/1.1\r\n\r\n", 400),                                // two spaces
        ("GET http://x/ HTTP/1.1\r\n\r\n", 400),                         // absolute form
        ("G@T / HTTP/1.1\r\n\r\n", 400),                                 // bad method
        ("GET / HTTP/2.0\r\n\r\n", 505),
        ("GET / FTP/1.1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\n: empty\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nA: x\nB: y\r\n\r\n", 400),                   // bare LF
        ("GET / HTTP/1.1\r\nA: \u{7}\r\n\r\n", 400),                     // control byte
        ("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
        ("POST / HTTP/1.1\r\nContent-Length: 99999\r\n\r\n", 413),
        ("GET /?a=%zz HTTP/1.1\r\n\r\n", 400),
        ("GET /?a=%ff HTTP/1.1\r\n\r\n", 400),                           // not UTF-8
    ])
    func refusals(text: String, expected: Int) {
        #expect(status(text) == expected, "\(text.debugDescription)")
    }

    @Test func aHeaderOverTheLimitIs431EvenBeforeItEnds() {
        let long = "GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: HTTPRequestParser.headerBytesMax)
        #expect(status(long) == 431)
        #expect(status(long + "\r\n\r\n") == 431)
        let many = "GET / HTTP/1.1\r\n" + (0...HTTPRequestParser.headerFieldsMax).map { "X\($0): y\r\n" }.joined() + "\r\n"
        #expect(status(many) == 431)
    }

    @Test func formDecoding() {
        #expect(FormDecoding.fields("a=1&b=x+y%21&a=2") == ["a": "1", "b": "x y!"])
        #expect(FormDecoding.fields("name=%C3%89lise") == ["name": "Élise"])
        #expect(FormDecoding.fields("flag") == ["flag": ""])
        #expect(FormDecoding.fields("a=%2") == nil)
        #expect(FormDecoding.fields(Array(repeating: "a=1", count: FormDecoding.fieldsMax + 1).joined(separator: "&")) == nil)
        #expect(FormDecoding.decode(Substring(FormDecoding.encode("Ava & Ben=?é"))) == "Ava & Ben=?é")
    }
}

import KidLedgerDomain
import KidLedgerUI

// The family page's request parser (docs/UI.md): any bytes give incomplete, a request, or a
// refusal with one of the documented statuses; a request's parts stay inside the limits, and the
// gate answers every parsed request without trapping.

@Sendable func fuzzHTTP(_ data: [UInt8]) {
    // The page key, a fixed clock (codes are judged by it) and a sign-out of every browser that
    // hands back another key.
    let gate = UIGate(key: String(repeating: "ab", count: 32), port: 4718, clock: FixedClock(millis: 1_800_000_000_000)) {
        String(repeating: "cd", count: 32)
    }
    switch HTTPRequestParser.parse(data) {
    case .incomplete:
        check(data.count <= HTTPRequestParser.headerBytesMax + HTTPRequestParser.bodyBytesMax + 4,
              "\(data.count) bytes still incomplete")
    case .refused(let status, let reason):
        check([400, 413, 431, 501, 505].contains(status), "undocumented status \(status)")
        check(!reason.isEmpty, "a refusal without a reason")
    case .complete(let request, let consumed):
        check(consumed <= data.count, "consumed \(consumed) of \(data.count) bytes")
        check(request.body.count <= HTTPRequestParser.bodyBytesMax, "a body of \(request.body.count) bytes")
        check(request.path.hasPrefix("/"), "a path without a slash: \(request.path.debugDescription)")
        check(request.headers.count <= HTTPRequestParser.headerFieldsMax, "\(request.headers.count) header fields")
        // Parsing the same bytes again gives the same request (the parser is pure).
        check(HTTPRequestParser.parse(Array(data.prefix(consumed))) == .complete(request, consumed: consumed), "not deterministic")
        let decision = gate.check(request)
        if case .allow = decision {
            check(request.header("host").map { gate.hosts.contains($0.lowercased()) } == true, "allowed without a loopback Host")
        }
    }
    _ = FormDecoding.fields(String(decoding: data, as: UTF8.self))
}

@Sendable func httpSeeds() -> [[UInt8]] {
    let token = String(repeating: "ab", count: 32)
    return [
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:4718\r\n\r\n",
        "GET /?token=\(token) HTTP/1.1\r\nHost: localhost:4718\r\n\r\n",
        "GET /api/state HTTP/1.1\r\nHost: 127.0.0.1:4718\r\nCookie: kidledger_token_4718=\(token)\r\nIf-None-Match: \"00\"\r\n\r\n",
        "POST /api/give HTTP/1.1\r\nHost: 127.0.0.1:4718\r\nOrigin: http://127.0.0.1:4718\r\nX-KidLedger-Token: \(token)\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 27\r\n\r\nchild=Ava&amount=1.25&note=",
        "POST /api/quick HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello",
        "GET /api/history?child=%C3%89lise&limit=5 HTTP/1.0\r\n\r\n",
        "BREW /pot HTTP/2\r\n\r\n",
    ].map { Array($0.utf8) }
}

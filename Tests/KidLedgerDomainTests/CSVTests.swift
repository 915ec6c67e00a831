import KidLedgerDomain
import Testing

struct CSVRowEncoding: Sendable, CustomTestStringConvertible {
    let fields: [String]
    let encoded: String
    var testDescription: String { "\(fields) -> \(encoded.debugDescription)" }
}

@Test(arguments: [
    CSVRowEncoding(fields: [], encoded: ""),
    CSVRowEncoding(fields: ["a"], encoded: "a"),
    CSVRowEncoding(fields: ["a", "b", "c"], encoded: "a,b,c"),
    CSVRowEncoding(fields: [""], encoded: "\"\""),
    CSVRowEncoding(fields: ["", ""], encoded: ","),
    CSVRowEncoding(fields: ["a", "", "b"], encoded: "a,,b"),
    CSVRowEncoding(fields: [" padded ", "tab\there"], encoded: " padded ,tab\there"),
    CSVRowEncoding(fields: ["a,b"], encoded: "\"a,b\""),
    CSVRowEncoding(fields: ["say \"hi\""], encoded: "\"say \"\"hi\"\"\""),
    CSVRowEncoding(fields: ["\""], encoded: "\"\"\"\""),
    CSVRowEncoding(fields: ["two\nlines", "cr\rhere", "crlf\r\nhere"],
                   encoded: "\"two\nlines\",\"cr\rhere\",\"crlf\r\nhere\""),
    CSVRowEncoding(fields: ["café", "😀", "中文"], encoded: "café,😀,中文"),
    CSVRowEncoding(fields: ["\u{FEFF}bom", "x\u{FEFF}"], encoded: "\"\u{FEFF}bom\",x\u{FEFF}"),
    CSVRowEncoding(fields: ["$1.25", "Chores, weekly", "Grandma's \"gift\""],
                   encoded: "$1.25,\"Chores, weekly\",\"Grandma's \"\"gift\"\"\""),
])
func csvEncodeRowExact(_ c: CSVRowEncoding) throws {
    #expect(CSV.encodeRow(c.fields) == c.encoded)
    if !c.fields.isEmpty {
        #expect(try CSV.parse(c.encoded).map(\.fields) == [c.fields])
    }
}

@Test func csvEncodeTableExact() {
    let text = CSV.encode(header: ["when", "amount", "note"], rows: [
        ["2026-11-29", "$1.25", "allowance"],
        ["2026-11-30", "-$0.50", "candy, gum"],
        [""],
    ])
    #expect(text == "when,amount,note\r\n2026-11-29,$1.25,allowance\r\n2026-11-30,-$0.50,\"candy, gum\"\r\n\"\"\r\n")
    #expect(CSV.encode(header: ["a"], rows: []) == "a\r\n")
}

/// A random field built from characters that exercise quoting, line breaks and multi-byte UTF-8.
func randomCSVField(using rng: inout SplitMix64) -> String {
    let pieces = ["a", "Z", "0", " ", ",", "\"", "\r", "\n", "\r\n", "é", "😀", "中", "\u{FEFF}", "\t", "''", "x,y"]
    let length = Int.random(in: 0...8, using: &rng)
    var field = ""
    for _ in 0..<length { field += pieces.randomElement(using: &rng)! }
    return field
}

@Test func csvRandomRoundTrip() throws {
    var rng = SplitMix64(seed: 0xC5F0_2026)
    for round in 0..<200 {
        let header = (0..<Int.random(in: 1...4, using: &rng)).map { _ in randomCSVField(using: &rng) }
        let rows = (0..<Int.random(in: 0...30, using: &rng)).map { _ in
            (0..<Int.random(in: 1...6, using: &rng)).map { _ in randomCSVField(using: &rng) }
        }
        let text = CSV.encode(header: header, rows: rows)
        let records = try CSV.parse(text)
        #expect(records.map(\.fields) == [header] + rows, "round \(round)")

        // Each record starts one line after the previous record's LFs (its own plus the terminator).
        var expectedLine = 1
        var expectedLines: [Int] = []
        for row in [header] + rows {
            expectedLines.append(expectedLine)
            expectedLine += CSV.encodeRow(row).utf8.filter { $0 == 0x0A }.count + 1
        }
        #expect(records.map(\.line) == expectedLines, "round \(round)")

        // The same document with LF terminators and no final terminator parses the same way.
        let lfText = ([header] + rows).map(CSV.encodeRow).joined(separator: "\n")
        #expect(try CSV.parse(lfText).map(\.fields) == [header] + rows, "round \(round)")
    }
}

@Test func csvCRLFAndLFInput() throws {
    let expected = [CSVRecord(line: 1, fields: ["a", "b"]), CSVRecord(line: 2, fields: ["c", "d"])]
    #expect(try CSV.parse("a,b\r\nc,d\r\n") == expected)
    #expect(try CSV.parse("a,b\nc,d\n") == expected)
    #expect(try CSV.parse("a,b\nc,d") == expected)
    #expect(try CSV.parse("a,b\r\nc,d") == expected)
    #expect(try CSV.parse("a,b\nc,d\r\n") == expected)
}

@Test func csvByteOrderMark() throws {
    #expect(try CSV.parse("\u{FEFF}a,b\r\n1,2\r\n") == [
        CSVRecord(line: 1, fields: ["a", "b"]), CSVRecord(line: 2, fields: ["1", "2"]),
    ])
    #expect(try CSV.parse("\u{FEFF}\"q\",b") == [CSVRecord(line: 1, fields: ["q", "b"])])
    #expect(try CSV.parse("\u{FEFF}") == [])
    // Only one BOM, and only at the very start, is skipped.
    #expect(try CSV.parse("\u{FEFF}\u{FEFF}a").map(\.fields) == [["\u{FEFF}a"]])
    #expect(try CSV.parse("a\n\u{FEFF}b").map(\.fields) == [["a"], ["\u{FEFF}b"]])
}

@Test func csvBlankLinesAndEmptyFields() throws {
    #expect(try CSV.parse("") == [])
    #expect(try CSV.parse("\n\r\n\n") == [])
    #expect(try CSV.parse("a\n\n\r\nb\n\n") == [CSVRecord(line: 1, fields: ["a"]), CSVRecord(line: 4, fields: ["b"])])
    // A quoted empty field is a record, not a blank line; so are separators and whitespace.
    #expect(try CSV.parse("\"\"\n,\n \n") == [
        CSVRecord(line: 1, fields: [""]), CSVRecord(line: 2, fields: ["", ""]), CSVRecord(line: 3, fields: [" "]),
    ])
    #expect(try CSV.parse("a,").map(\.fields) == [["a", ""]])
    #expect(try CSV.parse(",a").map(\.fields) == [["", "a"]])
}

@Test func csvQuotedFieldsAcrossLines() throws {
    let text = "id,note\r\n1,\"line one\r\nline two\nline three\"\r\n2,\"a \"\"b\"\", c\"\r\n3,x\r\n"
    #expect(try CSV.parse(text) == [
        CSVRecord(line: 1, fields: ["id", "note"]),
        CSVRecord(line: 2, fields: ["1", "line one\r\nline two\nline three"]),
        CSVRecord(line: 5, fields: ["2", "a \"b\", c"]),
        CSVRecord(line: 6, fields: ["3", "x"]),
    ])
    // A bare CR inside quotes is data and does not start a line.
    #expect(try CSV.parse("\"a\rb\"\nc") == [CSVRecord(line: 1, fields: ["a\rb"]), CSVRecord(line: 2, fields: ["c"])])
}

struct CSVFailure: Sendable, CustomTestStringConvertible {
    let text: String
    let fieldBytesMax: Int
    let rowsMax: Int
    let error: CSVError
    init(_ text: String, fieldBytesMax: Int = 4096, rowsMax: Int = 5_000_000, _ error: CSVError) {
        (self.text, self.fieldBytesMax, self.rowsMax, self.error) = (text, fieldBytesMax, rowsMax, error)
    }
    var testDescription: String { "\(text.prefix(40).debugDescription) -> \(error)" }
}

let quoteInUnquoted = "quote inside an unquoted field"
let textAfterQuote = "text after a closing quote"
let unterminated = "unterminated quoted field"
let bareCR = "carriage return not followed by line feed outside quotes"

@Test(arguments: [
    CSVFailure("a,b\nc\"d,e\n", .malformed(line: 2, reason: quoteInUnquoted)),
    CSVFailure("ab\"", .malformed(line: 1, reason: quoteInUnquoted)),
    CSVFailure("x\n\n\"multi\nline\",b\"c", .malformed(line: 4, reason: quoteInUnquoted)),
    CSVFailure("\"ab\"c,d", .malformed(line: 1, reason: textAfterQuote)),
    CSVFailure("a\r\n\"ab\" ,d", .malformed(line: 2, reason: textAfterQuote)),
    CSVFailure("a\n\"x\ny\"z", .malformed(line: 3, reason: textAfterQuote)),
    CSVFailure("\"", .malformed(line: 1, reason: unterminated)),
    CSVFailure("a\n\"abc\ndef\nghi", .malformed(line: 2, reason: unterminated)),
    CSVFailure("a,\"b\"\"", .malformed(line: 1, reason: unterminated)),
    CSVFailure("a\rb", .malformed(line: 1, reason: bareCR)),
    CSVFailure("a\nb\r", .malformed(line: 2, reason: bareCR)),
    CSVFailure("\"a\"\rb", .malformed(line: 1, reason: bareCR)),
    CSVFailure("abcde", fieldBytesMax: 4, .tooLarge(line: 1, reason: "field longer than 4 bytes")),
    CSVFailure("a\n\"ab\ncd\"", fieldBytesMax: 4, .tooLarge(line: 2, reason: "field longer than 4 bytes")),
    CSVFailure("ok\n\n" + String(repeating: "x", count: 4097), .tooLarge(line: 3, reason: "field longer than 4096 bytes")),
    CSVFailure("a,ééé", fieldBytesMax: 5, .tooLarge(line: 1, reason: "field longer than 5 bytes")),
    CSVFailure("a\nb\n\nc\n", rowsMax: 2, .tooLarge(line: 4, reason: "more than 2 records")),
    CSVFailure("a", rowsMax: 0, .tooLarge(line: 1, reason: "more than 0 records")),
])
func csvParseErrors(_ c: CSVFailure) {
    #expect(throws: c.error) { try CSV.parse(c.text, fieldBytesMax: c.fieldBytesMax, rowsMax: c.rowsMax) }
}

@Test func csvLimitsAreInclusive() throws {
    #expect(try CSV.parse("abcd", fieldBytesMax: 4).map(\.fields) == [["abcd"]])
    #expect(try CSV.parse("\"a\"\"b\"", fieldBytesMax: 3).map(\.fields) == [["a\"b"]])
    #expect(try CSV.parse(String(repeating: "x", count: 4096)).first?.fields.first?.utf8.count == 4096)
    #expect(try CSV.parse("a\nb\n\n", rowsMax: 2).count == 2)
    #expect(try CSV.parse("", rowsMax: 0) == [])
}

@Test func csvErrorDescriptions() {
    #expect(CSVError.malformed(line: 7, reason: "unterminated quoted field").description
        == "line 7: unterminated quoted field")
    #expect(CSVError.tooLarge(line: 3, reason: "more than 2 records").description == "line 3: more than 2 records")
    #expect(CSVError.tooLarge(line: 3, reason: "x").line == 3)
    #expect(throws: CSVError.malformed(line: 1, reason: unterminated)) {
        let _: [CSVRecord] = try CSV.parse("\"")
    }
}

@Test func csvParsesOneHundredThousandRows() throws {
    var rows: [[String]] = []
    rows.reserveCapacity(100_000)
    for i in 0..<100_000 {
        rows.append([String(i), "2026-11-29T22:10:32.123Z", "$\(i % 1000).25", i % 7 == 0 ? "note, with \"quotes\"" : "chores"])
    }
    let text = CSV.encode(header: ["id", "when", "amount", "note"], rows: rows)
    let records = try CSV.parse(text)
    #expect(records.count == 100_001)
    #expect(records.last == CSVRecord(line: 100_001, fields: ["99999", "2026-11-29T22:10:32.123Z", "$999.25", "chores"]))
    #expect(records[8].fields == ["7", "2026-11-29T22:10:32.123Z", "$7.25", "note, with \"quotes\""])
}

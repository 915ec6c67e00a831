/// RFC 4180 CSV: fields separated by commas, records by CRLF (LF accepted on input), fields
/// quoted when they contain a comma, quote, CR or LF, quotes doubled inside quotes.
///
/// Encoding also quotes two fields that would otherwise not survive a round trip: the only field of a
/// one-field record when it is empty (an empty line is a skipped blank line), and a field starting with
/// U+FEFF (a byte order mark at the start of a document is skipped).
///
/// Parsing works on UTF-8 bytes. Line numbers are 1-based physical lines: one plus the number of LF
/// bytes before the point in question, so a quoted field spanning lines advances them. A CR outside
/// quotes must be followed by LF; inside quotes CR, LF and CRLF are kept verbatim as field data.
public enum CSV {
    /// Encodes one record (no line terminator).
    public static func encodeRow(_ fields: [String]) -> String {
        var out: [UInt8] = []
        appendRow(fields, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Encodes a whole table: header then rows, each terminated by "\r\n".
    public static func encode(header: [String], rows: [[String]]) -> String {
        var out: [UInt8] = []
        appendRow(header, to: &out)
        out.append(cr)
        out.append(lf)
        for row in rows {
            appendRow(row, to: &out)
            out.append(cr)
            out.append(lf)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses a whole document into records. A UTF-8 BOM at the start is skipped. A final line
    /// terminator is optional. Blank lines (a record that is a single empty field from an empty line)
    /// are skipped; a line holding only `""` is a record with one empty field.
    ///
    /// Throws ``CSVError`` with the 1-based line number on: a quote inside an unquoted field, text after
    /// a closing quote before the separator, a CR not followed by LF outside quotes (all at the offending
    /// line), an unterminated quoted field (at the line of its opening quote), a field longer than
    /// `fieldBytesMax` UTF-8 bytes after unquoting (at the line the field starts on), or more than
    /// `rowsMax` records (at the line the first extra record starts on).
    public static func parse(
        _ text: String, fieldBytesMax: Int = 4096, rowsMax: Int = 5_000_000
    ) throws(CSVError) -> [CSVRecord] {
        var text = text
        let result = text.withUTF8 { bytes -> Result<[CSVRecord], CSVError> in
            do throws(CSVError) {
                return .success(try parse(bytes: bytes, fieldBytesMax: fieldBytesMax, rowsMax: rowsMax))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    // MARK: - Private helpers

    private static let comma = UInt8(ascii: ",")
    private static let quote = UInt8(ascii: "\"")
    private static let cr = UInt8(ascii: "\r")
    private static let lf = UInt8(ascii: "\n")

    private static func appendRow(_ fields: [String], to out: inout [UInt8]) {
        for (index, field) in fields.enumerated() {
            if index > 0 { out.append(comma) }
            let utf8 = field.utf8
            let startsWithBOM = utf8.starts(with: [0xEF, 0xBB, 0xBF])
            let loneEmpty = fields.count == 1 && utf8.isEmpty
            let special = utf8.contains { $0 == comma || $0 == quote || $0 == cr || $0 == lf }
            guard special || startsWithBOM || loneEmpty else {
                out.append(contentsOf: utf8)
                continue
            }
            out.append(quote)
            for byte in utf8 {
                if byte == quote { out.append(quote) }
                out.append(byte)
            }
            out.append(quote)
        }
    }

    // long-function: one character-by-character state machine (RFC 4180's states); split, its states would be shared mutable fields.
    private static func parse(
        bytes: UnsafeBufferPointer<UInt8>, fieldBytesMax: Int, rowsMax: Int
    ) throws(CSVError) -> [CSVRecord] {
        let n = bytes.count
        var i = 0
        if n >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { i = 3 }
        var line = 1
        var records: [CSVRecord] = []
        var fields: [String] = []
        var scratch: [UInt8] = []

        /// Consumes the separator or terminator at `i` after a field; returns true at the end of a record.
        func endOfField() throws(CSVError) -> Bool {
            if i == n { return true }
            switch bytes[i] {
            case comma:
                i += 1
                return false
            case lf:
                i += 1
                line += 1
                return true
            case cr:
                guard i + 1 < n, bytes[i + 1] == lf else {
                    throw .malformed(line: line, reason: "carriage return not followed by line feed outside quotes")
                }
                i += 2
                line += 1
                return true
            default:
                throw .malformed(line: line, reason: "text after a closing quote")
            }
        }

        func tooLong(_ fieldLine: Int) -> CSVError {
            .tooLarge(line: fieldLine, reason: "field longer than \(fieldBytesMax) bytes")
        }

        while i < n {
            // Blank line: skip it.
            if bytes[i] == lf {
                i += 1
                line += 1
                continue
            }
            if bytes[i] == cr, i + 1 < n, bytes[i + 1] == lf {
                i += 2
                line += 1
                continue
            }
            let recordLine = line
            if records.count >= rowsMax {
                throw .tooLarge(line: recordLine, reason: "more than \(rowsMax) records")
            }
            fields.removeAll(keepingCapacity: true)
            var atEnd = false
            while !atEnd {
                let fieldLine = line
                if i < n, bytes[i] == quote {
                    i += 1
                    scratch.removeAll(keepingCapacity: true)
                    var segment = i
                    while true {
                        guard i < n else {
                            throw .malformed(line: fieldLine, reason: "unterminated quoted field")
                        }
                        let byte = bytes[i]
                        if byte == quote {
                            scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[segment..<i]))
                            if i + 1 < n, bytes[i + 1] == quote {
                                scratch.append(quote)
                                i += 2
                                segment = i
                                continue
                            }
                            i += 1
                            break
                        }
                        if byte == lf { line += 1 }
                        i += 1
                    }
                    if scratch.count > fieldBytesMax { throw tooLong(fieldLine) }
                    fields.append(String(decoding: scratch, as: UTF8.self))
                } else {
                    let start = i
                    while i < n {
                        let byte = bytes[i]
                        if byte == comma || byte == lf || byte == cr || byte == quote { break }
                        i += 1
                    }
                    if i < n, bytes[i] == quote {
                        throw .malformed(line: line, reason: "quote inside an unquoted field")
                    }
                    if i - start > fieldBytesMax { throw tooLong(fieldLine) }
                    fields.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self))
                }
                atEnd = try endOfField()
            }
            records.append(CSVRecord(line: recordLine, fields: fields))
        }
        return records
    }
}

/// One parsed record with the line it started on.
public struct CSVRecord: Equatable, Sendable {
    /// The 1-based line on which the record starts.
    public var line: Int
    /// The record's fields, unquoted.
    public var fields: [String]

    /// Creates a record.
    public init(line: Int, fields: [String]) {
        self.line = line
        self.fields = fields
    }
}

/// Why a CSV document could not be parsed.
public enum CSVError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text is not valid CSV at `line`.
    case malformed(line: Int, reason: String)
    /// The document exceeds a field-size or record-count limit at `line`.
    case tooLarge(line: Int, reason: String)

    /// The line number where parsing failed.
    public var line: Int {
        switch self {
        case .malformed(let line, _), .tooLarge(let line, _): line
        }
    }

    /// A readable sentence, e.g. `line 7: unterminated quoted field`.
    public var description: String {
        switch self {
        case .malformed(let line, let reason), .tooLarge(let line, let reason): "line \(line): \(reason)"
        }
    }
}

/// One parsed HTTP/1.1 request: the method, the path and query, the headers and the body.
public struct HTTPRequest: Equatable, Sendable {
    /// "GET", "POST", ... (as sent; methods are case-sensitive).
    public var method: String
    /// The path without the query, percent-decoding not applied ("/api/give").
    public var path: String
    /// The query's fields, decoded (`a=1&b=x%20y`).
    public var query: [String: String]
    /// Header fields by lower-case name; a repeated field keeps its first value.
    public var headers: [String: String]
    /// The body (`Content-Length` bytes).
    public var body: [UInt8]

    /// A header's value by name (any case).
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// What ``HTTPRequestParser/parse(_:)`` found in the bytes received so far.
public enum HTTPParseResult: Equatable, Sendable {
    /// Not a whole request yet: read more (the limits are already checked).
    case incomplete
    /// A whole request, and how many bytes it took.
    case complete(HTTPRequest, consumed: Int)
    /// Not a request we serve: the status to answer (400, 413, 431, 501, 505) and why.
    case refused(status: Int, reason: String)
}

/// A pure parser of HTTP/1.1 requests with hard limits. No chunked bodies, no continuation lines,
/// no absolute-form targets: the page never sends them, so they are refused rather than half supported.
public enum HTTPRequestParser {
    /// The longest request line and header block, with the blank line.
    public static let headerBytesMax = 8 << 10
    /// The largest body (the page's forms are small).
    public static let bodyBytesMax = 16 << 10
    /// The most header fields.
    public static let headerFieldsMax = 64

    /// Parses the start of `bytes`.
    public static func parse(_ bytes: [UInt8]) -> HTTPParseResult {
        guard let end = headerEnd(bytes) else {
            return bytes.count > headerBytesMax ? .refused(status: 431, reason: "request header too large") : .incomplete
        }
        guard end <= headerBytesMax else { return .refused(status: 431, reason: "request header too large") }
        // Header bytes must be visible ASCII, space, tab, CR or LF.
        guard bytes[0..<end].allSatisfy({ ($0 >= 0x20 && $0 < 0x7F) || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }) else {
            return .refused(status: 400, reason: "bad bytes in the request header")
        }
        let text = String(decoding: bytes[0..<(end - 4)], as: UTF8.self)
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard !lines.contains(where: { $0.contains("\n") || $0.contains("\r") }) else {
            return .refused(status: 400, reason: "bare CR or LF in the request header")
        }
        let requestLine = lines[0].split(separator: " ", omittingEmptySubsequences: false)
        guard requestLine.count == 3 else { return .refused(status: 400, reason: "malformed request line") }
        let method = String(requestLine[0])
        let target = String(requestLine[1])
        let version = requestLine[2]
        guard !method.isEmpty, method.utf8.allSatisfy(isTokenByte) else { return .refused(status: 400, reason: "malformed method") }
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return version.hasPrefix("HTTP/") ? .refused(status: 505, reason: "only HTTP/1.1 is served")
                                              : .refused(status: 400, reason: "malformed request line")
        }
        guard target.hasPrefix("/") else { return .refused(status: 400, reason: "the request target must be a path") }
        var headers: [String: String] = [:]
        guard lines.count - 1 <= headerFieldsMax else { return .refused(status: 431, reason: "too many header fields") }
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { return .refused(status: 400, reason: "malformed header field") }
            let name = line[..<colon]
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else { return .refused(status: 400, reason: "malformed header field name") }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t")
            let key = name.lowercased()
            if key == "content-length" || key == "host", let previous = headers[key], previous != value {
                return .refused(status: 400, reason: "conflicting \(key) fields")
            }
            if headers[key] == nil { headers[key] = value }
        }
        if headers["transfer-encoding"] != nil { return .refused(status: 501, reason: "transfer encodings are not supported") }
        var length = 0
        if let raw = headers["content-length"] {
            guard !raw.isEmpty, raw.count <= 9, raw.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(raw) else {
                return .refused(status: 400, reason: "malformed Content-Length")
            }
            length = n
        }
        guard length <= bodyBytesMax else { return .refused(status: 413, reason: "request body too large") }
        guard bytes.count >= end + length else { return .incomplete }
        let (path, rawQuery) = splitTarget(target)
        guard let query = FormDecoding.fields(rawQuery) else { return .refused(status: 400, reason: "malformed query") }
        let request = HTTPRequest(method: method, path: path, query: query, headers: headers, body: Array(bytes[end..<(end + length)]))
        return .complete(request, consumed: end + length)
    }

    /// The index just past "\r\n\r\n", if present.
    static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var i = 0
        let limit = min(bytes.count, headerBytesMax + 4) - 3
        while i < limit {
            if bytes[i] == 0x0D && bytes[i + 1] == 0x0A && bytes[i + 2] == 0x0D && bytes[i + 3] == 0x0A { return i + 4 }
            i += 1
        }
        return nil
    }

    static func splitTarget(_ target: String) -> (String, String) {
        guard let q = target.firstIndex(of: "?") else { return (target, "") }
        return (String(target[..<q]), String(target[target.index(after: q)...]))
    }

    /// RFC 9110 token characters.
    static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return Array("!#$%&'*+-.^_`|~".utf8).contains(b)
        }
    }
}

/// `application/x-www-form-urlencoded` and query strings.
public enum FormDecoding {
    /// The most fields in one form.
    public static let fieldsMax = 32

    /// The fields of `text` ("a=1&b=x+y%21"), or nil when malformed (bad escape, invalid UTF-8,
    /// too many fields). A repeated name keeps its first value.
    public static func fields(_ text: String) -> [String: String]? {
        var result: [String: String] = [:]
        guard !text.isEmpty else { return result }
        let pairs = text.split(separator: "&", omittingEmptySubsequences: true)
        guard pairs.count <= fieldsMax else { return nil }
        for pair in pairs {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : "") else { return nil }
            if result[name] == nil { result[name] = value }
        }
        return result
    }

    /// Percent-decodes one component ("+" is a space); nil on a bad escape or invalid UTF-8.
    public static func decode(_ part: Substring) -> String? {
        var out: [UInt8] = []
        let bytes = Array(part.utf8)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == 0x25 {
                guard i + 2 < bytes.count, let hi = hex(bytes[i + 1]), let lo = hex(bytes[i + 2]) else { return nil }
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(b == 0x2B ? 0x20 : b)
                i += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// Percent-encodes `text` for a form or query.
    public static func encode(_ text: String) -> String {
        var out = ""
        for b in text.utf8 {
            switch b {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E: out.unicodeScalars.append(Unicode.Scalar(b))
            default: out += "%" + String(b, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    static func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x41 + 10
        case 0x61...0x66: return b - 0x61 + 10
        default: return nil
        }
    }
}

extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return String(s)
    }
}

extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

import KidLedgerDomain

/// An HTTP response: status, header fields in order, body. Every response closes the connection.
public struct HTTPResponse: Equatable, Sendable {
    /// The status code.
    public var status: Int
    /// Header fields in order (Content-Length, Connection and the security headers are added by ``bytes()``).
    public var headers: [(String, String)]
    /// The body.
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Compares structurally.
    public static func == (a: HTTPResponse, b: HTTPResponse) -> Bool { a.bytes() == b.bytes() }

    /// A header's first value by name (any case).
    public func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }

    /// A JSON body.
    public static func json(_ status: Int, _ text: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-store")] + headers,
                     body: Array(text.utf8))
    }

    /// A small HTML page saying what went wrong (for a person who opened a bad address).
    public static func page(_ status: Int, title: String, message: String) -> HTTPResponse {
        let html = """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">\
        <title>\(escapeHTML(title))</title></head>\
        <body><h1>\(escapeHTML(title))</h1><p>\(escapeHTML(message))</p></body></html>
        """
        return HTTPResponse(status: status, headers: [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")], body: Array(html.utf8))
    }

    /// The reason phrase of the statuses this server sends.
    public static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 303: "See Other"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 423: "Locked"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: "Status"
        }
    }

    /// The bytes on the wire, with Content-Length, `Connection: close` and the headers that keep the
    /// page out of frames and other sites' reach.
    public func bytes() -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "Content-Length: \(body.count)\r\nConnection: close\r\n"
        text += "X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"
        text += "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'\r\n\r\n"
        return Array(text.utf8) + body
    }

    /// `text` with `&`, `<`, `>`, `"` and `'` escaped.
    public static func escapeHTML(_ text: String) -> String { TextEscaping.xml(text) }
}

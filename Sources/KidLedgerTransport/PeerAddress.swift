/// A peer's TCP address: a host (name, IPv4 or IPv6 literal) and a port.
///
/// The text form is `HOST:PORT`, with IPv6 literals in brackets: `[::1]:4000`.
/// ``description`` produces that form, and ``init(parsing:)`` reads it back.
public struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    /// The host name or IP literal (IPv6 without brackets).
    public var host: String
    /// The TCP port (0 only for a listener asking for any free port).
    public var port: UInt16

    /// Creates an address from its parts; nothing is validated or resolved.
    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT` or `[IPv6]:PORT`.
    ///
    /// - Throws: ``TransportError/badAddress(_:)`` when the host is empty, the port is missing,
    ///   not a number, zero or above 65535, or an IPv6 literal lacks brackets.
    public init(parsing text: String) throws(TransportError) {
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty else { throw .badAddress("the address is empty; expected HOST:PORT, e.g. 192.168.1.20:4000") }
        let host: Substring
        let portText: Substring
        if trimmed.hasPrefix("[") {
            guard let close = trimmed.firstIndex(of: "]") else {
                throw .badAddress("\"\(trimmed)\" has no closing ']' after the IPv6 address")
            }
            host = trimmed[trimmed.index(after: trimmed.startIndex)..<close]
            let rest = trimmed[trimmed.index(after: close)...]
            guard rest.hasPrefix(":") else {
                throw .badAddress("\"\(trimmed)\" has no port; expected [IPv6]:PORT, e.g. [::1]:4000")
            }
            portText = rest.dropFirst()
            guard !host.isEmpty else { throw .badAddress("\"\(trimmed)\" has an empty host between the brackets") }
        } else {
            guard let colon = trimmed.lastIndex(of: ":") else {
                throw .badAddress("\"\(trimmed)\" has no port; expected HOST:PORT, e.g. \(trimmed):4000")
            }
            host = trimmed[..<colon]
            portText = trimmed[trimmed.index(after: colon)...]
            guard !host.contains(":") else {
                throw .badAddress("\"\(trimmed)\": put an IPv6 address in brackets, e.g. [::1]:4000")
            }
            guard !host.isEmpty else { throw .badAddress("\"\(trimmed)\" has an empty host; expected HOST:PORT") }
        }
        guard !portText.isEmpty else { throw .badAddress("\"\(trimmed)\" has an empty port; expected a number 1...65535") }
        guard portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(portText) else {
            throw .badAddress("port \"\(portText)\" is not a number 1...65535")
        }
        guard value >= 1 && value <= 65535 else { throw .badAddress("port \(value) is out of range 1...65535") }
        self.host = String(host)
        self.port = UInt16(value)
    }

    /// `HOST:PORT`, or `[HOST]:PORT` when the host contains a colon (IPv6).
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

extension String {
    func trimmingWhitespace() -> Substring {
        var s = self[...]
        while let c = s.first, c.isWhitespace { s.removeFirst() }
        while let c = s.last, c.isWhitespace { s.removeLast() }
        return s
    }
}

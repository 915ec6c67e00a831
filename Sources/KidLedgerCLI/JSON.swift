import KidLedgerDomain

/// A JSON value with ordered object keys, so output is stable for scripts and golden tests.
public indirect enum JSON: Equatable, Sendable {
    /// A string.
    case string(String)
    /// An integer (wide enough for any balance).
    case integer(Int128)
    /// true / false.
    case bool(Bool)
    /// null.
    case null
    /// An array.
    case array([JSON])
    /// An object with keys in the given order.
    case object([(String, JSON)])

    /// Compares structurally.
    public static func == (a: JSON, b: JSON) -> Bool { a.rendered() == b.rendered() }

    /// An integer from any fixed-width integer.
    public static func int<I: BinaryInteger>(_ value: I) -> JSON { .integer(Int128(value)) }

    /// Compact, single-line text.
    public func rendered() -> String {
        var out = ""
        render(into: &out)
        return out
    }

    private func render(into out: inout String) {
        switch self {
        case .string(let s): Self.quote(s, into: &out)
        case .integer(let i): out += String(i)
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.render(into: &out)
            }
            out += "]"
        case .object(let pairs):
            out += "{"
            for (i, (key, value)) in pairs.enumerated() {
                if i > 0 { out += "," }
                Self.quote(key, into: &out)
                out += ":"
                value.render(into: &out)
            }
            out += "}"
        }
    }

    private static func quote(_ s: String, into out: inout String) {
        out += TextEscaping.jsonString(s)
    }
}

/// Escaping text for the formats kidledger writes by hand: JSON strings (the CLI's `--json`, the
/// page's API), XML/HTML text and attribute values (the simulator's SVG, the page's HTML), and
/// terminal text (tables, messages and logs that show what another member wrote).
public enum TextEscaping {
    /// Whether `scalar` must not reach a terminal as it is: C0 and C1 control characters and DEL
    /// (escape sequences, carriage returns, new lines), the line and paragraph separators, and
    /// the bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A to U+202E,
    /// U+2066 to U+2069), which reorder what follows them on the line, the deprecated format
    /// controls U+206A to U+206F (symmetric swapping, shaping) and the interlinear annotation
    /// marks U+FFF9 to U+FFFB, which can hide text. Joiners (U+200C, U+200D) are kept: emoji and
    /// scripts need them.
    public static func isUnsafeForTerminal(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x206F,
             0xFFF9...0xFFFB: true
        default: false
        }
    }

    /// Text someone else wrote (a child's, the household's or a member's name, a note, a
    /// transaction's source, a peer's error, an address learned from the network), for a
    /// terminal: each unsafe scalar (``isUnsafeForTerminal(_:)``) shown as an escape, `\n`, `\r`,
    /// `\t`, or `\u{1b}`, so it can neither move the cursor, recolour, rewrite nor reorder the
    /// line, nor start a line of its own. The one way the CLI prints such text: every table cell,
    /// message, warning, error and daemon log line passes it through here (`--json` keeps it
    /// exact instead: ``jsonString(_:)``). Idempotent: an escape is plain text.
    public static func terminal(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafeForTerminal) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard isUnsafeForTerminal(scalar) else { out.append(scalar); continue }
            let escape: String
            switch scalar {
            case "\n": escape = "\\n"
            case "\r": escape = "\\r"
            case "\t": escape = "\\t"
            default: escape = "\\u{" + String(scalar.value, radix: 16) + "}"
            }
            out.append(contentsOf: escape.unicodeScalars)
        }
        return String(out)
    }

    /// kidledger's own text of several lines (a table, a message with a usage line), each line
    /// through ``terminal(_:)``: the last guard of the CLI's output. It keeps the new lines
    /// kidledger put there, so text from anyone else must already have passed ``terminal(_:)``
    /// where it was put into the message.
    public static func terminalLines(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafeForTerminal) else { return text }
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { terminal(String($0)) }.joined(separator: "\n")
    }

    /// `s` as a JSON string literal, quotes included: `"`, `\` and control characters escaped;
    /// so are DEL, the C1 controls, U+2028, U+2029 and the bidirectional formatting characters
    /// (as `\uXXXX`: the same string to a JSON reader, and safe when printed to a terminal).
    public static func jsonString(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if isUnsafeForTerminal(scalar) {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// `text` with `&`, `<`, `>`, `"` and `'` escaped, for XML or HTML text and attribute values.
    public static func xml(_ text: String) -> String {
        var out = ""
        for ch in text {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(ch)
            }
        }
        return out
    }
}

/// Escaping text for the formats kidledger writes by hand: JSON strings (the CLI's `--json`, the
/// page's API) and XML/HTML text and attribute values (the simulator's SVG, the page's HTML).
public enum TextEscaping {
    /// `s` as a JSON string literal, quotes included: `"`, `\` and control characters escaped.
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
                if scalar.value < 0x20 {
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

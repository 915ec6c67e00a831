/// How many terminal columns text takes, by grapheme cluster (what a reader sees as one
/// character): 2 for East Asian Wide and Fullwidth characters and for emoji shown as emoji
/// (emoji presentation, or an emoji followed by U+FE0F, flags and ZWJ sequences as one cluster),
/// 0 for a cluster of only zero-width characters, 1 for everything else (accents combine into
/// their letter's cluster).
enum DisplayWidth {
    /// The columns `text` takes.
    static func of(_ text: String) -> Int { text.reduce(0) { $0 + of($1) } }

    /// The columns one grapheme cluster takes.
    static func of(_ character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        if character.isASCII { return 1 }
        if scalars.allSatisfy(isZeroWidth) { return 0 }
        if isWide(first.value) { return 2 }
        if scalars.contains(where: { $0.properties.isEmojiPresentation }) { return 2 }
        if first.properties.isEmoji && scalars.contains(where: { $0.value == 0xFE0F }) { return 2 }
        if scalars.contains(where: { (0x1F1E6...0x1F1FF).contains($0.value) }) { return 2 }
        return 1
    }

    /// `text` cut to at most `columns` columns: unchanged when it fits, else as many whole
    /// clusters as fit before a final "…".
    static func truncate(_ text: String, to columns: Int) -> String {
        guard of(text) > columns, columns > 0 else { return text }
        var out = ""
        var used = 0
        for c in text {
            let w = of(c)
            if used + w > columns - 1 { break }
            out.append(c)
            used += w
        }
        return out + "…"
    }

    static func isZeroWidth(_ s: Unicode.Scalar) -> Bool {
        switch s.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return true
        default: return s.value == 0x200B
        }
    }

    /// East Asian Wide (W) and Fullwidth (F) blocks, simplified to their main ranges.
    static func isWide(_ v: UInt32) -> Bool {
        switch v {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
             0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
             0xFFE0...0xFFE6, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return true
        default:
            return false
        }
    }
}

/// "did you mean …?" for a mistyped command, option or child name: the candidate closest by edit
/// distance.
public enum Suggestions {
    /// The Levenshtein distance between `a` and `b` (by Unicode scalars, case-insensitive).
    public static func distance(_ a: String, _ b: String) -> Int {
        let x = Array(a.lowercased().unicodeScalars), y = Array(b.lowercased().unicodeScalars)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var previous = Array(0...y.count)
        var current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            for j in 1...y.count {
                let substitution = previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1)
                current[j] = min(substitution, previous[j] + 1, current[j - 1] + 1)
            }
            swap(&previous, &current)
        }
        return previous[y.count]
    }

    /// The candidate nearest to `word`, if it is near enough to be a typo: at most 2 edits (1 for
    /// words of up to 3 characters), or `word` is a prefix of exactly one candidate. Ties go to the
    /// earlier candidate, so the answer is stable.
    public static func nearest(_ word: String, in candidates: [String]) -> String? {
        guard !word.isEmpty else { return nil }
        let limit = word.count <= 3 ? 1 : 2
        var best: (candidate: String, distance: Int)?
        for candidate in candidates where candidate != word {
            let d = distance(word, candidate)
            if d <= limit && (best == nil || d < best!.distance) { best = (candidate, d) }
        }
        if let best { return best.candidate }
        let prefixed = candidates.filter { $0.lowercased().hasPrefix(word.lowercased()) }
        return prefixed.count == 1 ? prefixed[0] : nil
    }

    /// "; did you mean `give`?", or "" when nothing is near.
    public static func didYouMean(_ word: String, in candidates: [String], quoted: Bool = true) -> String {
        guard let near = nearest(word, in: candidates) else { return "" }
        return quoted ? "; did you mean `\(near)`?" : "; did you mean \(near)?"
    }
}

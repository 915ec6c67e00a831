import Foundation

extension Text {
    /// `s` folded for comparing child names: case and accents ignored, so "Émile", "emile" and
    /// "EMILE" fold alike (Foundation's case- and diacritic-insensitive folding, locale-free, so
    /// every laptop folds alike). ASCII is only lowercased, without Foundation.
    public static func folded(_ s: String) -> String {
        if s.utf8.allSatisfy({ $0 < 0x80 }) { return s.lowercased() }
        return s.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
    }
}

import KidLedgerDomain

/// What two laptops that share no sync protocol version tell each other (docs/PROTOCOL.md,
/// "Versions"): the side that finds no common version (the responder on a `hello`, the
/// initiator on a `welcome`) sends an `error` frame of code 3 whose text names its kidledger
/// version and the protocol versions it speaks; the other side reads them back with ``parse(_:)``
/// (also from the text kidledger 0.1.0, which names no product version, sends), so both can say
/// which laptop to update.
public enum VersionRefusal {
    /// The text of the `error` frame a side sends when it speaks `mine` and the peer `peer`.
    public static func text(product: String, mine: ClosedRange<UInt16>, peer: ClosedRange<UInt16>) -> String {
        "kidledger \(product) speaks sync protocol versions \(mine.lowerBound)...\(mine.upperBound), "
            + "the other laptop \(peer.lowerBound)...\(peer.upperBound); the one with the older kidledger must be updated"
    }

    /// The refusing side's kidledger version (when its text names one) and protocol versions,
    /// from the text of its `error` frame; nil when the text says neither.
    public static func parse(_ text: String) -> (product: String?, versions: ClosedRange<UInt16>)? {
        if let rest = after("kidledger ", in: text), let space = rest.firstIndex(of: " "),
           let range = after(" speaks sync protocol versions ", in: String(rest[space...])).flatMap(range) {
            return (String(rest[..<space]), range)
        }
        // kidledger 0.1.0 (6255152 and before): "peer speaks protocol versions 4...5, this kidledger speaks 3...3; ..."
        if let range = after("this kidledger speaks ", in: text).flatMap(range) {
            return (KnownReleases.name(speaking: range), range)
        }
        return nil
    }

    /// The text after the first `marker` in `text`.
    private static func after(_ marker: String, in text: String) -> String? {
        text.firstRange(of: marker).map { String(text[$0.upperBound...]) }
    }

    /// `LO...HI` at the start of `text`.
    private static func range(_ text: String) -> ClosedRange<UInt16>? {
        let digits = text.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        let parts = digits.split(separator: "...", omittingEmptySubsequences: false)
        guard parts.count == 2, let lo = UInt16(parts[0]), let hi = UInt16(parts[1].prefix { $0.isNumber }), lo <= hi else { return nil }
        return lo...hi
    }
}

/// The releases by the protocol versions they speak, for naming a laptop whose `hello` or
/// `welcome` (which carry no product version) shows it speaks an older protocol, or whose refusal
/// (kidledger 0.1.0) names none. A release that keeps the previous release's range extends that
/// entry's name.
public enum KnownReleases {
    /// The releases that speak exactly `versions`, when known: 3...3 is 0.1.0, 3...4 is 0.2.0
    /// (0.3.0 speaks 3...5).
    public static func name(speaking versions: ClosedRange<UInt16>) -> String? {
        switch versions {
        case 3...3: "0.1.0"
        case 3...4: "0.2.0"
        default: nil
        }
    }

    /// The releases whose highest protocol version is `version`, when known.
    public static func name(highest version: UInt16) -> String? {
        switch version {
        case 3: "0.1.0"
        case 4: "0.2.0"
        case 5: "0.3.0"
        default: nil
        }
    }
}

import KidLedgerDomain

/// A set of changes found by their (origin, sequence) first: ``contains(_:)`` answers exactly as
/// `Set<Change>.contains` (equal changes have equal origins and sequences, and the changes at one
/// position are compared whole), but hashes two integers instead of every operation of a change.
struct ChangeIndex {
    private struct Position: Hashable {
        let origin: ReplicaID
        let sequence: UInt64
    }

    /// The changes at each position: one, or every version of a forked sequence.
    private var byPosition: [Position: [Change]] = [:]

    init() {}

    init(_ changes: some Sequence<Change>) {
        for change in changes { insert(change) }
    }

    mutating func insert(_ change: Change) {
        let position = Position(origin: change.origin, sequence: change.sequence)
        if let known = byPosition[position] {
            if !known.contains(change) { byPosition[position]!.append(change) }
        } else {
            byPosition[position] = [change]
        }
    }

    func contains(_ change: Change) -> Bool {
        byPosition[Position(origin: change.origin, sequence: change.sequence)]?.contains(change) ?? false
    }
}

extension RecordID {
    /// `String(hex.prefix(count))` for `count` up to 16 (the `high` half), without building the
    /// whole hex string: the short ids of trace lines and of a drawn operation's target.
    func hexPrefix(_ count: Int) -> String {
        precondition(count >= 0 && count <= 16, "at most the 16 digits of the high half")
        return String(unsafeUninitializedCapacity: count) { buffer in
            let digits: StaticString = "0123456789abcdef"
            digits.withUTF8Buffer { digits in
                for i in 0..<count {
                    buffer[i] = digits[Int((high >> UInt64(60 - 4 * i)) & 0xF)]
                }
            }
            return count
        }
    }
}

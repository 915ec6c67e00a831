import KidLedgerDomain
import KidLedgerReplica

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

    /// Adds `change`; returns whether it was not held yet.
    @discardableResult
    mutating func insert(_ change: Change) -> Bool {
        let position = Position(origin: change.origin, sequence: change.sequence)
        if let known = byPosition[position] {
            if known.contains(change) { return false }
            byPosition[position]!.append(change)
        } else {
            byPosition[position] = [change]
        }
        return true
    }

    func contains(_ change: Change) -> Bool {
        byPosition[Position(origin: change.origin, sequence: change.sequence)]?.contains(change) ?? false
    }
}

/// Every replica's whole change log (`changes(notCoveredBy: [:])`, in the replicas' order), read
/// encoded and decoded once per distinct log: converged replicas usually hold equal logs, and
/// equal encodings decode to equal changes. Each distinct log is indexed once, and so is the
/// union of all of them.
struct ChangeLogs {
    /// The distinct logs, decoded, each with its index.
    private var distinct: [(log: [Change], set: ChangeIndex)] = []
    /// For each replica, the index of its log in `distinct`.
    private var which: [Int] = []
    /// Every change any log holds, once, in the order first read.
    private(set) var union: [Change] = []
    /// The changes of ``union``.
    private(set) var held = ChangeIndex()

    init(_ replicas: [Replica]) throws {
        var encoded: [[EncodedChange]] = []
        for replica in replicas {
            let log = try replica.encodedChanges(notCoveredBy: [:])
            if let known = encoded.firstIndex(of: log) {
                which.append(known)
                continue
            }
            which.append(encoded.count)
            encoded.append(log)
            let changes = try log.map { entry in
                do { return try RecordCodec.decodeChange(entry.bytes) } catch {
                    throw LedgerError.corrupted("change log entry: \(error)")
                }
            }
            distinct.append((changes, ChangeIndex(changes)))
            if distinct.count == 1 {
                held = distinct[0].set
                union = changes
            } else {
                for change in changes where held.insert(change) { union.append(change) }
            }
        }
    }

    /// The log of the replica at `index`.
    func log(_ index: Int) -> [Change] { distinct[which[index]].log }

    /// The changes of the log of the replica at `index`.
    func set(_ index: Int) -> ChangeIndex { distinct[which[index]].set }
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

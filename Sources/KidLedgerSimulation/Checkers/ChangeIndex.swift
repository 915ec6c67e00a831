import KidLedgerDomain
import KidLedgerReplica

/// A change as a replica's log holds it: its origin and sequence, and the log entry's bytes, its
/// canonical encoding (`RecordCodec.encode(change)`: a change and its encoding determine each
/// other). Not decoded: what the simulator compares changes by.
struct LoggedChange {
    let origin: ReplicaID
    let sequence: UInt64
    let encoded: [UInt8]

    /// A log entry, as ``Replica/encodedChanges(notCoveredBy:limit:)`` reads it.
    init(_ entry: EncodedChange) {
        origin = entry.origin
        sequence = entry.sequence
        encoded = entry.bytes
    }

    init(_ change: Change) {
        origin = change.origin
        sequence = change.sequence
        encoded = RecordCodec.encode(change)
    }
}

/// A set of changes, kept as their encodings and found by their (origin, sequence) first:
/// ``contains(_:)`` answers exactly as `Set<Change>.contains` on the decoded changes (equal changes
/// have equal origins, sequences and encodings), but hashes two integers and compares bytes
/// instead of decoding a log and comparing every operation of a change.
struct ChangeIndex {
    private struct Position: Hashable {
        let origin: ReplicaID
        let sequence: UInt64
    }

    /// The encodings at each position: one, or every version of a forked sequence.
    private var byPosition: [Position: [[UInt8]]] = [:]

    init() {}

    /// The changes of a log, as ``Replica/encodedChanges(notCoveredBy:limit:)`` reads them.
    init(_ log: [EncodedChange]) {
        byPosition.reserveCapacity(log.count)  // one position a change, but for forks: no rehashing
        for entry in log { insert(entry) }
    }

    /// Adds the change of a log entry; returns whether it was not held yet.
    @discardableResult
    mutating func insert(_ entry: EncodedChange) -> Bool {
        insert(LoggedChange(entry))
    }

    /// Adds `logged`; returns whether it was not held yet.
    @discardableResult
    mutating func insert(_ logged: LoggedChange) -> Bool {
        let position = Position(origin: logged.origin, sequence: logged.sequence)
        if let known = byPosition[position] {
            if known.contains(logged.encoded) { return false }
            byPosition[position]!.append(logged.encoded)
        } else {
            byPosition[position] = [logged.encoded]
        }
        return true
    }

    func contains(_ logged: LoggedChange) -> Bool {
        byPosition[Position(origin: logged.origin, sequence: logged.sequence)]?.contains(logged.encoded) ?? false
    }
}

/// Every replica's whole change log (`encodedChanges(notCoveredBy: [:])`, in the replicas' order),
/// indexed once per distinct log: converged replicas usually hold equal logs. Only the union of
/// the logs is decoded, each change once.
struct ChangeLogs {
    /// The distinct logs, each with its index.
    private var distinct: [(log: [EncodedChange], set: ChangeIndex)] = []
    /// For each replica, the index of its log in `distinct`.
    private var which: [Int] = []
    /// The first replica's log, decoded.
    private(set) var first: [Change] = []
    /// Every change any log holds, once, decoded, in the order first read (the first log first).
    private(set) var union: [Change] = []
    /// The changes of ``union``.
    private(set) var held = ChangeIndex()

    init(_ replicas: [Replica]) throws {
        for replica in replicas {
            let log = try replica.encodedChanges(notCoveredBy: [:])
            if let known = distinct.firstIndex(where: { $0.log == log }) {
                which.append(known)
                continue
            }
            which.append(distinct.count)
            distinct.append((log, ChangeIndex(log)))
            if distinct.count == 1 {
                first = try log.map(Self.decode)
                union = first
                held = distinct[0].set
            } else {
                for entry in log where held.insert(entry) { union.append(try Self.decode(entry)) }
            }
        }
    }

    /// The change of a log entry, decoded as ``Replica/changes(notCoveredBy:limit:)`` decodes it.
    static func decode(_ entry: EncodedChange) throws -> Change {
        do { return try RecordCodec.decodeChange(entry.bytes) } catch {
            throw LedgerError.corrupted("change log entry: \(error)")
        }
    }

    /// The changes of the log of the replica at `index`.
    func set(_ index: Int) -> ChangeIndex { distinct[which[index]].set }

    /// Whether the replica at `index` holds the same log as the first.
    func holdsFirst(_ index: Int) -> Bool { which[index] == 0 }

    /// The log of the replica at `index`, decoded.
    func decoded(_ index: Int) throws -> [Change] {
        holdsFirst(index) ? first : try distinct[which[index]].log.map(Self.decode)
    }
}

extension RecordID {
    /// `String(hex.prefix(count))` for `count` up to 16 (the `high` half), without building the
    /// whole hex string: the short ids of trace lines and of a drawn operation's target.
    /// The last 8 hex digits (`String(hex.suffix(8))`): a transaction id's random tail. Its first
    /// digits are the time it was made (version 7), alike for every transaction of a short run,
    /// so traces and timelines name transactions by the tail.
    var tail: String {
        let digits = String(low & 0xFFFF_FFFF, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }

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

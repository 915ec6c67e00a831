@testable import KidLedgerReplica
import KidLedgerInMemory
import KidLedgerDomain
import Synchronization
import Testing

// Replicas for the tests of the replica, the protocol and the simulator's caches: on a fresh
// `MemoryStore`, a fixed or hand-moved clock and a seeded generator. `receive` applies changes
// through the replica's internal apply path, one transaction each, as no public call does.

/// A wall clock the test moves by hand (an atomic reading, so it is Sendable as `WallClock` asks).
public final class TestClock: WallClock, Sendable {
    private let reading: Atomic<Int64>
    public init(_ millis: Int64) { reading = Atomic(millis) }
    public var millis: Int64 {
        get { reading.load(ordering: .relaxed) }
        set { reading.store(newValue, ordering: .relaxed) }
    }
    public func nowMillis() -> Int64 { millis }
}

/// A replica on a fresh in-memory store.
public func makeReplica(seed: UInt64, clock: any WallClock = FixedClock(millis: 1_000_000),
                 store: MemoryStore = MemoryStore()) throws -> Replica {
    try Replica(store: store, clock: clock, random: SplitMix64(seed: seed))
}

/// Offers each replica the other's whole log (both directions, each from before the other's).
public func exchange(_ a: Replica, _ b: Replica) throws {
    let fromA = try a.changeLog(), fromB = try b.changeLog()
    try b.receive(fromA)
    try a.receive(fromB)
}

/// Everything a user (or a sync peer) can observe of a replica's merged ledger.
public struct LedgerView: Equatable, CustomStringConvertible {
    public var digest: Digest256
    public var household: HouseholdSummary?
    public var children: [ChildSummary]
    public var history: [HistoryEntry]
    public var transactions: [LedgerTransaction]
    public var counts: ReplicaCounts

    public var description: String {
        "digest \(digest) children \(children.map { "\($0.name)=\($0.balanceCents)" }) counts \(counts)"
    }
}

extension Replica {
    /// The change log, in (origin, sequence) order.
    public func changeLog() throws -> [Change] {
        try store.read { r in
            var result: [Change] = []
            try r.scan(Tables.changes) { _, value in
                result.append(try RecordCodec.decodeChange(value))
                return true
            }
            return result
        }
    }

    /// The changes this replica made itself.
    public func ownChanges() throws -> [Change] {
        try changeLog().filter { $0.origin == replicaID }
    }

    /// Offers one change, as the sync layer would.
    @discardableResult
    public func receive(_ change: Change, now: Int64 = 0) throws -> ApplyOutcome {
        try store.write { w in
            try Replica.withApplyContext(w, now: now, verifier: verifier, preparer: PlainPreparer()) { context in
                try Replica.apply(change, PlainPreparer().prepare(change, encoded: RecordCodec.encode(change)), in: context)
            }
        }
    }

    /// Offers changes in the given order and returns the outcomes.
    @discardableResult
    public func receive(_ changes: [Change], now: Int64 = 0) throws -> [ApplyOutcome] {
        try changes.map { try receive($0, now: now) }
    }

    /// Offers `changes` in a random order, retrying those refused with `.gap` until none is left.
    /// Returns how many were applied and how many were duplicates.
    @discardableResult
    public func receiveShuffledWithRetry<G: RandomNumberGenerator>(_ changes: [Change], using rng: inout G,
                                                            now: Int64 = 0) throws -> (applied: Int, duplicate: Int) {
        var pending = changes
        var applied = 0, duplicate = 0
        while !pending.isEmpty {
            pending.shuffle(using: &rng)
            var refused: [Change] = []
            for change in pending {
                switch try receive(change, now: now) {
                case .applied: applied += 1
                case .duplicate: duplicate += 1
                case .gap: refused.append(change)
                case .forkedVersion: Issue.record("unexpected forked version of \(change.origin)/\(change.sequence)")
                case .notAdmitted: Issue.record("unexpected refusal of \(change.origin)/\(change.sequence)")
                }
            }
            // Every round applies at least the next change of some origin, or the input is broken.
            guard refused.count < pending.count else {
                Issue.record("no progress: \(refused.count) changes refused forever")
                break
            }
            pending = refused
        }
        return (applied, duplicate)
    }

    /// A snapshot of everything observable.
    public func view() throws -> LedgerView {
        LedgerView(digest: try digest(), household: try household(),
                   children: try children(includeArchived: true), history: try history(),
                   transactions: try allTransactions(), counts: try counts())
    }

    /// The child named `name` (must exist).
    public func child(named name: String) throws -> ChildSummary {
        try resolveChild(name)
    }

    /// Number of entries in a table.
    public func count(_ table: Table) throws -> Int {
        try store.read { r in try r.count(table) }
    }
}

/// A random order of `changes` that keeps each origin's changes in sequence order.
public func causalShuffle<G: RandomNumberGenerator>(_ changes: [Change], using rng: inout G) -> [Change] {
    var queues: [ReplicaID: [Change]] = [:]
    for c in changes { queues[c.origin, default: []].append(c) }
    for key in queues.keys { queues[key]!.sort { $0.sequence < $1.sequence } }
    var origins = queues.keys.sorted()
    var heads = [ReplicaID: Int]()
    var result: [Change] = []
    while !origins.isEmpty {
        let i = Int(rng.next() % UInt64(origins.count))
        let origin = origins[i]
        let head = heads[origin, default: 0]
        result.append(queues[origin]![head])
        if head + 1 == queues[origin]!.count {
            origins.remove(at: i)
        } else {
            heads[origin] = head + 1
        }
    }
    return result
}

/// A hand-made change.
public func change(_ origin: UInt64, _ sequence: UInt64, millis: Int64, counter: UInt32 = 0,
            _ operations: [Operation]) -> Change {
    Change(origin: ReplicaID(origin), sequence: sequence, hlc: HLC(millis: millis, counter: counter),
           operations: operations)
}

/// A hand-made transaction.
public func transaction(_ id: RecordID, child: RecordID, cents: Int64, at millis: Int64, note: String = "",
                 source: String = "give", reverses: RecordID? = nil) -> LedgerTransaction {
    LedgerTransaction(id: id, childID: child, amountCents: cents, createdAtMillis: millis, note: note,
                      source: source, reverses: reverses)
}

/// A replica holding a household and the named children, made on a fixed clock.
public func householdWithChildren(_ names: [String], seed: UInt64 = 7,
                           clock: any WallClock = FixedClock(millis: 1_000_000)) throws -> Replica {
    let r = try makeReplica(seed: seed, clock: clock)
    try r.createHousehold(name: "Home")
    for name in names { try r.addChild(name: name) }
    return r
}

@testable import KidLedgerReplica
import KidLedgerDomain
import KidLedgerTestSupport
import Testing

/// Prepares every item before consuming any: the most run-ahead a splitter can do (the CLI's
/// threaded splitter sits between this and ``SequentialWork``).
struct RunAheadWork: WorkSplitter {
    func pipeline(_ count: Int, produce: @escaping @Sendable (Int) -> Void, consume: (Int) throws -> Void,
                  discard: @escaping @Sendable (Int) -> Void) throws {
        for i in 0..<count { produce(i) }
        defer { for i in 0..<count { discard(i) } }
        for i in 0..<count { try consume(i) }
    }
}

/// Applying a received batch in one write transaction (the apply context, which holds the
/// children, chain links and revocation horizons, and the changes prepared ahead) must give
/// exactly what applying the same changes one transaction each gives.
@Suite("Batched application")
struct BatchApplyTests {
    @Test("one batch, prepared ahead or not, equals one change per transaction", arguments: [UInt64(3), 11, 29])
    func batchEqualsSingles(seed: UInt64) throws {
        let log = try history(seed: seed)
        var rng = SplitMix64(seed: seed &* 7)
        // Transactions before their child's creation, origins interleaved.
        let order = causalShuffle(log, using: &rng)
        #expect(order.count > 250)

        let single = try makeReplica(seed: 100)
        let outcomes = try single.receive(order)
        #expect(!outcomes.contains(.gap))
        #expect(outcomes.filter { $0 == .forkedVersion }.count == 2)

        for splitter in [SequentialWork() as any WorkSplitter, RunAheadWork()] {
            let batched = try makeReplica(seed: 101)
            batched.workSplitter = splitter
            // In batches of 64, then whatever a gap held back.
            var pending = order
            var rounds = 0
            var forked = 0
            while !pending.isEmpty && rounds < 20 {
                rounds += 1
                for start in stride(from: 0, to: pending.count, by: 64) {
                    forked += try batched.applyRemote(Array(pending[start..<min(start + 64, pending.count)])).forkedVersions
                }
                // A change at or below the vector was applied, a duplicate or a forked version.
                let vector = try batched.versionVector()
                pending = pending.filter { $0.sequence > vector[$0.origin] ?? 0 }
            }
            #expect(forked == 2)
            #expect(pending.isEmpty)
            #expect(try batched.view() == single.view(), "\(type(of: splitter))")
            #expect(try batched.verify().problems == [])
            #expect(try batched.aggregates() == single.aggregates())
            #expect(try batched.fieldConflicts().count == single.fieldConflicts().count)
        }
        #expect(try single.verify().problems == [])
    }

    @Test("every table has its own name hash (the stores look tables up by it)")
    func distinctNameHashes() {
        #expect(Set(Tables.all.map(\.nameHash)).count == Tables.all.count)
    }

    @Test("a failing change in a prepared batch leaves nothing of the batch behind")
    func failureRollsBack() throws {
        let a = try householdWithChildren(["Ava"], seed: 5)
        for i in 0..<100 { _ = try a.post("Ava", signedCents: Int64(i + 1), note: "", source: "give") }
        let log = try a.changeLog()
        let b = try makeReplica(seed: 6)
        b.workSplitter = RunAheadWork()
        // A change built in memory that breaks a domain rule, at the end of the batch.
        let bad = change(0xBAD, 1, millis: 2_000_000, [.addTransaction(transaction(
            RecordID(high: 1, low: 2), child: try a.child(named: "Ava").id, cents: 0, at: 2_000_000))])
        #expect(throws: LedgerError.self) { try b.applyRemote(log + [bad]) }
        #expect(try b.versionVector().isEmpty)
        #expect(try b.count(Tables.transactions) == 0)
        try b.applyRemote(log)
        #expect(try b.view() == a.view())
    }
}

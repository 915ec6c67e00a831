@testable import KidLedgerReplica
import KidLedgerDomain
import KidLedgerSimulation
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
    /// A history with everything a batch can meet: children created after transactions that name
    /// them (deferred, then released), renames, archives, undo entries made twice on two replicas
    /// (same-id merges), give-to-all changes with several operations, and a forked origin.
    func history(seed: UInt64) throws -> [Change] {
        let clock = TestClock(1_000_000)
        let a = try makeReplica(seed: seed, clock: clock)
        try a.createHousehold(name: "Home")
        try a.addChild(name: "Ava")
        try a.addChild(name: "Ben")
        let b = try makeReplica(seed: seed + 1, clock: clock)
        try b.applyRemote(try a.changeLog())
        var rng = SplitMix64(seed: seed)
        for step in 0..<300 {
            clock.millis += Int64(rng.next() % 5_000)
            let r = rng.next() % 2 == 0 ? a : b
            switch rng.next() % 10 {
            case 0: _ = try r.postAll(signedCents: 25, note: "all \(step)", source: "give")
            case 1: _ = try? r.undo()
            case 2: _ = try? r.renameChild(rng.next() % 2 == 0 ? "Ava" : "Ben", to: "Kid\(step)")
            case 3 where step % 50 == 3:
                // The same undo on both replicas before they hear of each other: a same-id merge.
                try b.applyRemote(try a.batch(notCoveredBy: try b.versionVector()))
                try a.applyRemote(try b.batch(notCoveredBy: try a.versionVector()))
                _ = try? a.undo()
                _ = try? b.undo()
            default:
                let children = try r.children()
                let child = children[Int(rng.next() % UInt64(children.count))]
                _ = try r.post(child.name, signedCents: Int64(rng.next() % 2_000) - 700, note: "n\(step)", source: "give")
            }
            if step == 150 {
                // A child made late on b whose transactions can reach others before it.
                try b.addChild(name: "Cy")
                _ = try b.post("Cy", signedCents: 99, note: "first", source: "give")
            }
            if step % 37 == 0 {
                try b.applyRemote(try a.batch(notCoveredBy: try b.versionVector()))
                try a.applyRemote(try b.batch(notCoveredBy: try a.versionVector()))
            }
        }
        // A fork: b's last two changes again with other stamps, as a copy of b restored from
        // stale files would have made them under the same origin and sequences.
        var log = try a.changeLog() + (try b.changeLog())
        let forkOrigin = try b.ownChanges().last!.origin
        let forked = try b.ownChanges().suffix(2).map { c in
            Change(origin: c.origin, sequence: c.sequence, hlc: HLC(millis: c.hlc.millis + 1, counter: c.hlc.counter),
                   operations: c.operations)
        }
        #expect(forked.allSatisfy { $0.origin == forkOrigin })
        log += forked
        // Unique by (origin, sequence, encoding).
        var seen = Set<[UInt8]>()
        return log.filter { seen.insert(RecordCodec.encode($0)).inserted }
    }

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

    @Test("replicas sharing a preparation cache end exactly like replicas preparing afresh", arguments: [UInt64(3), 29])
    func sharedPreparations(seed: UInt64) throws {
        let log = try history(seed: seed)
        var rng = SplitMix64(seed: seed &* 13)
        let order = causalShuffle(log, using: &rng)
        let plain = try makeReplica(seed: 100)
        _ = try plain.receive(order)

        let cache = PreparationCache()
        var ends: [Replica] = []
        for copy in 0..<2 {
            let cached = try makeReplica(seed: 200 + UInt64(copy))
            cached.preparer = cache
            var pending = order
            var rounds = 0
            while !pending.isEmpty && rounds < 20 {
                rounds += 1
                for start in stride(from: 0, to: pending.count, by: 50) {
                    try cached.applyRemote(Array(pending[start..<min(start + 50, pending.count)]))
                }
                let vector = try cached.versionVector()
                pending = pending.filter { $0.sequence > vector[$0.origin] ?? 0 }
            }
            #expect(pending.isEmpty)
            #expect(try cached.view() == plain.view())
            #expect(try cached.verify().problems == [])
            #expect(try cached.aggregates() == plain.aggregates())
            ends.append(cached)
        }
        // The second replica found every change already prepared.
        #expect(cache.misses > 0 && cache.hits >= order.count)
        // Local changes go through the cache too, and apply the same.
        let before = cache.misses
        try ends[0].post(try ends[0].children(includeArchived: false)[0].name, signedCents: 5, note: "n", source: "give")
        #expect(cache.misses == before + 1)
        let change = try #require(try ends[0].ownChanges().last)
        #expect(try ends[1].applyRemote([change]).applied == 1 && cache.misses == before + 1)
        #expect(try ends[1].view() == ends[0].view())
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

@testable import KidLedgerReplica
import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerSimulation
import KidLedgerTestSupport
import Testing

/// The simulator's ``PreparationCache`` (moved here from the replica's and the protocol's tests):
/// replicas sharing it end exactly like replicas preparing afresh, directly, through a
/// revocation's rebuild and through sync sessions.
@Suite("Preparation cache")
struct PreparationCacheTests {
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

    @Test("a revocation's rebuild from the log gives the same state with a shared preparation cache")
    func rebuildWithSharedPreparations() throws {
        let h = OwnedHousehold(), owner = h.origin(h.ownerKey), spouse = h.origin(h.spouseKey)
        let spouseLater = [h.change(spouse, 2, millis: 6, [h.give(2, 200)]),
                           h.change(spouse, 3, millis: 7, [h.give(3, 300), h.give(4, 400)])]
        let revocation = h.change(owner, 3, millis: 8, [h.revoke(h.spouseKey, seen: [owner: 2, spouse: 2])])
        let plain = try h.replica(100)
        try plain.applySigned(h.founding() + spouseLater)
        try plain.applySigned([revocation])  // the rebuild
        let cache = PreparationCache()
        for seed in [UInt64(101), 102] {
            let cached = try h.replica(seed)
            cached.preparer = cache
            try cached.applySigned(h.founding() + spouseLater)
            try cached.applySigned([revocation])
            #expect(try cached.digest() == plain.digest())
            #expect(try cached.balance(of: OwnedHousehold.ava) == 300 && cached.membershipCounts().rejected == 1)
            #expect(try cached.verify().isIntact)
        }
        #expect(cache.hits > 0)
    }

    @Test func replicasSharingAPreparationCacheFindReceivedChangesByTheirEncoding() throws {
        let cache = PreparationCache()
        let a = try Fixture.replica(1), b = try Fixture.replica(2), c = try Fixture.replica(3)
        let h = try Fixture.household([a, b, c])
        for r in [a, b, c] { r.preparer = cache }
        try Fixture.give(a, 20)
        try b.renameChild("Ann", to: "Anna")
        #expect(Fixture.sync(a, b, household: h, maxChunk: 7).bothFinished)
        let misses = cache.misses
        // c receives the same changes from b: found by their canonical encoding, none prepared again.
        #expect(Fixture.sync(b, c, household: h, maxChunk: 5).bothFinished)
        #expect(cache.misses == misses)
        #expect(try a.digest() == b.digest() && b.digest() == c.digest())
        #expect(try c.verify().problems == [])
        #expect(try c.resolveChild("Anna").transactionCount == 20)
    }
}

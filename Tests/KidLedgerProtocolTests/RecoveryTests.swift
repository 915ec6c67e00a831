import KidLedgerSimulation
import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol

@Suite struct RecoveryTests {
    /// Riak KV679: A is restored from an older copy of its files and reuses sequences it had
    /// already sent. After the next sync both hold every transaction from both histories.
    @Test(arguments: [true, false])
    func restoredReplicaLosesNoWrites(restoredInitiates: Bool) throws {
        let storeA = MemoryStore()
        let a = try Fixture.replica(1, store: storeA), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        try Fixture.give(a, 2)
        try Fixture.give(b, 2, cents: 500)
        #expect(Fixture.sync(a, b, household: h).bothFinished)
        let snapshot = storeA.clone()
        let oldID = a.replicaID

        try Fixture.give(a, 3, cents: 7_000)        // sequences s+1...s+3, sent to B
        #expect(Fixture.sync(a, b, household: h).bothFinished)
        #expect(try b.counts().transactions == 7)

        // Restore A from the snapshot: a different random stream, the same replica id.
        let restored = try Replica(store: snapshot, clock: FixedClock(millis: 1_800_000_000_000), random: SplitMix64(seed: 99))
        #expect(restored.replicaID == oldID)
        try Fixture.give(restored, 2, cents: 9_000)  // reuses sequences s+1, s+2 with other contents
        #expect(try restored.versionVector()[oldID]! < b.versionVector()[oldID]!)

        let d = restoredInitiates ? Fixture.sync(restored, b, household: h, maxChunk: 13)
                                  : Fixture.sync(b, restored, household: h, maxChunk: 13)
        #expect(d.bothFinished)
        let summary = restoredInitiates ? d.summaryA : d.summaryB
        #expect(summary?.recoveredFromStaleCopy == true)
        #expect(summary?.bothUpToDate == true)
        #expect(restored.replicaID != oldID)
        #expect(try restored.digest() == b.digest())
        #expect(try restored.counts().transactions == 9)  // 2 + 2 + 3 (lost to A, kept by B) + 2 (new)
        #expect(try b.counts().transactions == 9)
        #expect(try restored.verify().isIntact && b.verify().isIntact)
        let amounts = Set(try b.allTransactions().map(\.amountCents))
        #expect(amounts.isSuperset(of: [7_000, 7_001, 7_002, 9_000, 9_001]))

        // The fresh id keeps working and a later session is a no-op.
        try Fixture.give(restored, 1, cents: 11)
        let again = Fixture.sync(restored, b, household: h)
        #expect(again.bothFinished && again.summaryA?.recoveredFromStaleCopy == false)
        #expect(try restored.digest() == b.digest())
        #expect(try b.counts().transactions == 10)
    }

    @Test func rotationIsANoOpWhenThePeerHoldsNoMore() throws {
        let a = try Fixture.replica(1)
        _ = try a.createHousehold(name: "Home")
        let before = (a.replicaID, try a.digest())
        #expect(try a.rotateIfPeerHoldsMoreOfOwnHistory([a.replicaID: 1]) == false)
        #expect(a.replicaID == before.0)
        #expect(try a.digest() == before.1)
        #expect(try a.rotateIfPeerHoldsMoreOfOwnHistory([a.replicaID: 2]) == true)
        #expect(a.replicaID != before.0)
    }

    /// The blind spot of comparing sequences alone: the restored replica makes MORE new changes
    /// than it lost, so its vector entry is not behind the peer's. The hash chains differ, so
    /// the fork is found, both histories survive and A moves to a fresh id.
    @Test(arguments: [true, false])
    func restoredReplicaThatWroteMoreThanItLost(restoredInitiates: Bool) throws {
        let storeA = MemoryStore()
        let a = try Fixture.replica(1, store: storeA), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        #expect(Fixture.sync(a, b, household: h).bothFinished)
        let snapshot = storeA.clone()
        let oldID = a.replicaID
        try Fixture.give(a, 2, cents: 7_000)
        #expect(Fixture.sync(a, b, household: h).bothFinished)

        let restored = try Replica(store: snapshot, clock: FixedClock(millis: 1_800_000_000_000), random: SplitMix64(seed: 99))
        try Fixture.give(restored, 4, cents: 9_000)   // 4 new > 2 lost: its vector is ahead of B's
        #expect(try restored.versionVector()[oldID]! > b.versionVector()[oldID]!)

        let d = restoredInitiates ? Fixture.sync(restored, b, household: h, maxChunk: 17)
                                  : Fixture.sync(b, restored, household: h, maxChunk: 17)
        #expect(d.bothFinished)
        #expect(restored.replicaID != oldID)
        #expect(try restored.digest() == b.digest())
        #expect(try b.counts().transactions == 6)
        #expect(try restored.verify().isIntact && b.verify().isIntact)
        // A second session finds nothing more to do.
        let again = Fixture.sync(restored, b, household: h)
        #expect(again.bothFinished && again.summaryA?.changesSent == 0 && again.summaryB?.changesSent == 0)
    }

    /// The forked versions reach a third replica before the fork is found: every replica still
    /// ends with every transaction.
    @Test func forkSpreadThroughAThirdReplica() throws {
        let storeA = MemoryStore()
        let a = try Fixture.replica(1, store: storeA), b = try Fixture.replica(2), c = try Fixture.replica(3)
        let h = try Fixture.household([a, b, c])
        #expect(Fixture.sync(a, b, household: h).bothFinished)
        #expect(Fixture.sync(a, c, household: h).bothFinished)
        let snapshot = storeA.clone()
        try Fixture.give(a, 3, cents: 7_000)
        #expect(Fixture.sync(a, b, household: h).bothFinished)   // B holds the real versions

        let restored = try Replica(store: snapshot, clock: FixedClock(millis: 1_800_000_000_000), random: SplitMix64(seed: 99))
        try Fixture.give(restored, 3, cents: 9_000)             // the same sequences, other contents
        #expect(Fixture.sync(restored, c, household: h).bothFinished)   // C takes the forked versions
        #expect(Fixture.sync(c, b, household: h).bothFinished)          // B and C find the fork
        #expect(Fixture.sync(restored, b, household: h).bothFinished)
        #expect(Fixture.sync(c, b, household: h).bothFinished)
        let digests = Set([try restored.digest(), try b.digest(), try c.digest()])
        #expect(digests.count == 1)
        for r in [restored, b, c] {
            #expect(try r.counts().transactions == 6)
            #expect(try r.verify().isIntact)
        }
    }
}

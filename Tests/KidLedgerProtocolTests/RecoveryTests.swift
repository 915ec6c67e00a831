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

    @Test func recoveryIsANoOpWhenThePeerHoldsNoMore() throws {
        let a = try Fixture.replica(1)
        _ = try a.createHousehold(name: "Home")
        let before = (a.replicaID, try a.digest())
        #expect(try a.recoverFromStaleCopy(peerHolds: 1) == false)
        #expect(a.replicaID == before.0)
        #expect(try a.digest() == before.1)
    }

    @Test func confirmationIsClampedToWhatIsHeld() throws {
        let a = try Fixture.replica(1)
        _ = try a.createHousehold(name: "Home")
        try a.confirmOwnChanges(heldByPeerUpTo: 50)
        #expect(try a.confirmedOwnSequence() == 1)
    }
}

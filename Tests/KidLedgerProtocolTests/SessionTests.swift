import KidLedgerDomain
import KidLedgerReplica
import KidLedgerTestSupport
import Testing
@testable import KidLedgerProtocol

@Suite struct SessionTests {
    @Test(arguments: [0, 1, 7, 64])
    func twoReplicasWithOfflineChangesConverge(maxChunk: Int) throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        try Fixture.give(a, 5)
        try Fixture.give(b, 7, cents: -1000)
        try b.renameChild("Ann", to: "Anna")
        let d = Fixture.sync(a, b, household: h, seed: UInt64(maxChunk), maxChunk: maxChunk)
        #expect(d.bothFinished)
        #expect(try a.digest() == b.digest())
        #expect(try a.counts().transactions == 12)
        #expect(d.summaryA?.bothUpToDate == true && d.summaryB?.bothUpToDate == true)
        #expect(d.summaryA?.changesSent == 5 && d.summaryB?.changesSent == 8)
        #expect(try a.resolveChild("Anna").balanceCents == b.resolveChild("Anna").balanceCents)

        // A second session has nothing to do.
        let again = Fixture.sync(b, a, household: h)
        #expect(again.bothFinished && again.summaryA?.changesSent == 0 && again.summaryB?.changesSent == 0)
    }

    @Test func threeReplicasInALineConvergeByForwarding() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2), c = try Fixture.replica(3)
        let h = try Fixture.household([a, b, c])
        try Fixture.give(a, 3)
        try Fixture.give(b, 4)
        try Fixture.give(c, 5)
        #expect(Fixture.sync(a, b, household: h).bothFinished)
        #expect(Fixture.sync(b, c, household: h, maxChunk: 5).bothFinished)
        #expect(Fixture.sync(a, b, household: h).bothFinished)
        #expect(try a.digest() == b.digest())
        #expect(try b.digest() == c.digest())
        #expect(try a.versionVector() == c.versionVector())
        #expect(try c.counts().transactions == 12)
    }

    @Test func largeTransferGoesInBoundedBatches() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        try Fixture.give(a, 3000)
        // Batches of at most 500 here (the default, changesPerBatchMax, would carry all 3000 at once).
        let d = Fixture.sync(a, b, household: h, maxChunk: 40_000, limits: SessionLimits(changesPerBatch: 500))
        #expect(d.bothFinished)
        #expect(try a.digest() == b.digest())
        #expect(try b.counts().transactions == 3000)
        let batches = d.sentByA.compactMap { m -> Int? in
            if case .changes(let cs, _, _) = m { return cs.count }
            return nil
        }
        #expect(batches.count >= 6)
        #expect(batches.allSatisfy { $0 <= 500 })
        #expect(batches.reduce(0, +) == 3000)
        #expect(d.maxInFlight <= 4)
        #expect(d.maxInFlight >= 2)
    }

    @Test func interruptedTransferResumesWithoutDuplicatesOrLoss() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        try Fixture.give(a, 1000)
        try Fixture.give(b, 300, cents: -1000)
        let limits = SessionLimits(changesPerBatch: 50, batchesInFlightMax: 3)
        let cut = Fixture.sync(a, b, household: h, seed: 9, maxChunk: 3000, limits: limits, byteBudget: 40_000)
        #expect(cut.outcomeA == .failed(.connectionClosed) || cut.outcomeB == .failed(.connectionClosed))
        let partial = try b.counts().transactions
        #expect(partial > 300 && partial < 1300)
        #expect(try a.verify().isIntact && b.verify().isIntact)

        let resumed = Fixture.sync(b, a, household: h, seed: 10, maxChunk: 3000, limits: limits)
        #expect(resumed.bothFinished)
        #expect(resumed.summaryA?.duplicatesReceived == 0 && resumed.summaryB?.duplicatesReceived == 0)
        #expect(try a.counts().transactions == 1300 && b.counts().transactions == 1300)
        #expect(try a.counts().changes == b.counts().changes)
        #expect(try a.digest() == b.digest())
    }

    @Test func incompatibleVersionGetsAClearError() throws {
        let b = try Fixture.replica(2)
        let h = try b.createHousehold(name: "Home").id
        let before = try b.digest()
        let responder = SyncSession(role: .responder, replica: b, household: h)
        _ = responder.start()
        let hello = Message.hello(protocolVersionMin: 6, protocolVersionMax: 7, replica: ReplicaID(77), household: h)
        let actions = responder.receive(hello.frame())
        // The refusal names this side's kidledger and versions, readable back by the other side.
        let text = "kidledger \(KidLedgerVersion.current) speaks sync protocol versions 3...5, the other laptop 6...7; the one with the older kidledger must be updated"
        #expect(VersionRefusal.parse(text)?.product == KidLedgerVersion.current && VersionRefusal.parse(text)?.versions == 3...5)
        // kidledger 0.1's sentence is read too, its release named by its versions.
        let old = "peer speaks protocol versions 4...5, this kidledger speaks 3...3; upgrade kidledger"
        #expect(VersionRefusal.parse(old)?.product == "0.1.0" && VersionRefusal.parse(old)?.versions == 3...3)
        #expect(VersionRefusal.parse("something else") == nil)
        #expect(actions.count == 2)
        guard case .send(let bytes) = actions.first else { Issue.record("no error frame"); return }
        var dec = FrameDecoder()
        dec.push(bytes)
        let frame = try #require(try dec.next())
        #expect(try Message.decode(type: frame.type, payload: frame.payload) == .error(code: 3, message: text))
        #expect(actions.last == .failed(.versionMismatch(peerMin: 6, peerMax: 7)))
        #expect(responder.failure == .versionMismatch(peerMin: 6, peerMax: 7))
        #expect(responder.state == .failed)
        #expect(try b.digest() == before)

        // The initiator side reports the peer's sentence.
        let a = try Fixture.replica(1)
        let initiator = SyncSession(role: .initiator, replica: a, household: h)
        _ = initiator.start()
        #expect(initiator.receive(bytes) == [.failed(.peer(code: 3, message: text))])
    }

    @Test func deviceOfAnotherHouseholdIsRefusedAndNothingIsWritten() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let ha = try a.createHousehold(name: "Ours").id
        let hb = try b.createHousehold(name: "Theirs").id
        try Fixture.give(b, 0)
        let (da, db) = (try a.digest(), try b.digest())
        let d = Driver.run(SyncSession(role: .initiator, replica: a, household: ha),
                           SyncSession(role: .responder, replica: b, household: hb))
        #expect(d.outcomeB == .failed(.otherHousehold))
        #expect(d.outcomeA == .failed(.peer(code: 4, message: "device of another household")))
        #expect(d.sentByB == [.error(code: 4, message: "device of another household")])
        #expect(try a.digest() == da && b.digest() == db)
        #expect(try a.versionVector().count == 1 && b.versionVector().count == 1)
    }
}

import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol
import KidLedgerInMemory
import KidLedgerTestSupport

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
        let restored = try Replica(store: snapshot, clock: FixedClock(millis: 1_700_000_001_000), random: SplitMix64(seed: 99))
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

    /// Issue 20, point 9: what a peer says of this replica's own origin in its vector (a higher
    /// entry, another hash chain, a `forked` list naming it) never makes it take a new replica id,
    /// on either role. (On main each of these made it rotate, every session.)
    @Test(arguments: [SyncSession.Role.responder, .initiator])
    func aPeersVectorCannotMakeThisReplicaRotate(role: SyncSession.Role) throws {
        let a = try Fixture.replica(1), m = try Fixture.replica(2)
        let h = try Fixture.household([a, m])
        try Fixture.give(a, 2)
        #expect(Fixture.sync(a, m, household: h).bothFinished)
        let me = a.replicaID
        let held = try #require(try a.versionVector()[me])
        let chain = [UInt8](repeating: 0xEE, count: 16)
        let lies = [VectorSummary(vector: [me: held + 5], chains: [me: chain]),
                    VectorSummary(vector: [me: held], chains: [me: chain]),
                    VectorSummary(vector: try m.versionVector(), chains: try m.chains(at: m.versionVector()), forked: [me])]
        for lie in lies {
            let session = SyncSession(role: role, replica: a, household: h)
            _ = session.start()
            let opening = role == .responder
                ? Message.hello(protocolVersionMin: protocolVersionMin, protocolVersionMax: protocolVersionMax,
                                replica: m.replicaID, household: h).frame()
                : Message.welcome(protocolVersion: protocolVersionMax, replica: m.replicaID).frame()
            _ = session.receive(opening + Message.vector(lie).frame())
            #expect(a.replicaID == me, "\(lie)")
            #expect(!session.summary.recoveredFromStaleCopy)
        }
        #expect(try a.versionVector()[me] == held)
    }

    /// Changes of this replica's own origin that it never made still move it to a fresh id (that is
    /// how a restore from a stale copy is found), but a member forging them every session gets at
    /// most ``Replica/rotationsMax`` fresh ids; after that the batch is refused and nothing is stored.
    @Test func forgedChangesOfTheOwnOriginRotateAtMostRotationsMaxTimes() throws {
        let a = try Fixture.replica(1), m = try Fixture.replica(2)
        let h = try Fixture.household([a, m])
        #expect(Fixture.sync(a, m, household: h).bothFinished)
        var ids: Set<ReplicaID> = [a.replicaID]
        for round in 0...Replica.rotationsMax {
            let victim = a.replicaID
            let next = (try a.versionVector()[victim] ?? 0) + 1
            let forged = Change(origin: victim, sequence: next, hlc: HLC(millis: 5_000 + Int64(round)),
                                operations: [.addTransaction(LedgerTransaction(
                                    id: RecordID(high: 0xF0, low: UInt64(round)), childID: RecordID(high: 0xC0, low: 1),
                                    amountCents: 100, createdAtMillis: 5_000, source: "give"))])
            let digest = try a.digest(), vector = try a.versionVector()
            if round < Replica.rotationsMax {
                let report = try a.applyRemote([forged])
                #expect(report.rotatedReplicaID)
                ids.insert(a.replicaID)
            } else {
                #expect(throws: LedgerError.tooManyRotations) { try a.applyRemote([forged]) }
                #expect(a.replicaID == victim)
                #expect(try a.digest() == digest && a.versionVector() == vector, "a refused batch stores nothing")
            }
        }
        #expect(ids.count == Replica.rotationsMax + 1)
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

        let restored = try Replica(store: snapshot, clock: FixedClock(millis: 1_700_000_001_000), random: SplitMix64(seed: 99))
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

        let restored = try Replica(store: snapshot, clock: FixedClock(millis: 1_700_000_001_000), random: SplitMix64(seed: 99))
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

/// Issue 20, point 9: a session whose peer presents this replica's own id (a connection reflected
/// back, or a replayed hello) is refused with a clear reason on both roles before any change is applied.
@Suite struct ReflectionTests {
    @Test func aReflectedSessionIsRefusedOnBothRolesBeforeAnyChange() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        try Fixture.give(b, 3)
        #expect(Fixture.sync(a, b, household: h).bothFinished)
        try Fixture.give(a, 1)
        let digest = try a.digest(), vector = try a.versionVector()
        // A's own initiator hello, reflected to A's responder, followed by a batch of B's changes.
        let initiator = SyncSession(role: .initiator, replica: a, household: h)
        var hello: [UInt8] = []
        for case .send(let bytes) in initiator.start() { hello += bytes }
        let responder = SyncSession(role: .responder, replica: a, household: h)
        _ = responder.start()
        let batch = Message.changes(try b.changes(notCoveredBy: [:]), isLast: true).frame()
        let refused = responder.receive(hello + batch)
        #expect(refused.contains(.failed(.sameReplica)))
        #expect(ProtocolError.sameReplica.description.contains("reflected"))
        // A's responder welcome, reflected to A's initiator.
        let welcome = Message.welcome(protocolVersion: protocolVersionMax, replica: a.replicaID).frame()
        #expect(initiator.receive(welcome + batch).contains(.failed(.sameReplica)))
        #expect(try a.digest() == digest && a.versionVector() == vector)
    }
}

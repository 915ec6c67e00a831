import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol
import KidLedgerInMemory
import KidLedgerTestSupport

/// Issue 43, point 2: a session at an older protocol version sends only what the older side can
/// read (``RecordVersions``), per origin the prefix of its chain before the first change that needs
/// a newer version, never part of a batch, and says how many changes it held back. Sessions here
/// are the product's own, with the older side's versions narrowed through ``SyncSession/versions``.
@Suite("A peer of an older protocol version")
struct OlderPeerTests {
    /// A session of a laptop that speaks only `versions` (kidledger 0.1.0 speaks 3...3).
    static func session(_ role: SyncSession.Role, _ r: Replica, _ h: RecordID, versions: ClosedRange<UInt16>,
                        limits: SessionLimits) -> SyncSession {
        let s = SyncSession(role: role, replica: r, household: h, limits: limits)
        s.versions = versions
        return s
    }

    @Test("the newer side sends each origin's chain up to its first change the older side can't read, and counts the rest",
          arguments: [(true, 4096), (false, 4096), (true, 1), (false, 2)])
    func withholdsFromTheFirstUnreadableChange(newerStarts: Bool, batch: Int) throws {
        let newer = try Fixture.replica(1), older = try Fixture.replica(2)
        newer.zones = SimZones()
        let h = try Fixture.household([newer, older])
        try Fixture.give(newer, 2)
        try newer.setHouseholdTimeZone("Sim/West")  // field 11: protocol 4
        let zoneAt = try #require(try newer.versionVector()[newer.replicaID])
        try Fixture.give(newer, 3)  // readable alone, but after the zone in the chain
        try Fixture.give(older, 1, cents: -50)
        let limits = SessionLimits(changesPerBatch: batch)
        let a = Self.session(newerStarts ? .initiator : .responder, newer, h, versions: 3...4, limits: limits)
        let b = Self.session(newerStarts ? .responder : .initiator, older, h, versions: 3...3, limits: limits)
        let d = newerStarts ? Driver.run(a, b, maxChunk: 97) : Driver.run(b, a, maxChunk: 97)
        let newerSummary = try #require(newerStarts ? d.summaryA : d.summaryB)
        let olderSummary = try #require(newerStarts ? d.summaryB : d.summaryA)
        #expect(a.negotiatedVersion == 3 && b.negotiatedVersion == 3 && newerSummary.protocolVersion == 3)
        // The older side holds the newer origin's prefix, whole, and nothing of the zone.
        #expect(try older.versionVector()[newer.replicaID] == zoneAt - 1)
        #expect(try older.householdTimeZone().name == nil && newer.householdTimeZone().name == "Sim/West")
        #expect(newerSummary.changesWithheld == 4 && olderSummary.changesWithheld == 0)
        #expect(newerSummary.unauthenticatedReceived == 0 && olderSummary.unauthenticatedReceived == 0)
        #expect(olderSummary.gapsReceived == 0)
        #expect(try older.resolveChild("Ann").transactionCount == 3)  // the newer side's 2 and its own
        #expect(try older.verify().isIntact)
        // The newer side took everything the older one had.
        #expect(try newer.resolveChild("Ann").transactionCount == 6)
        #expect(newerSummary.bothUpToDate == false)

        // Updated (both speak 4): the rest arrives and they converge.
        let again = Fixture.sync(older, newer, household: h, limits: limits)
        #expect(again.bothFinished && again.summaryA?.protocolVersion == protocolVersionMax && again.summaryB?.changesWithheld == 0)
        #expect(try older.digest() == newer.digest())
        #expect(try older.householdTimeZone().name == newer.householdTimeZone().name)
    }

    @Test("a relayed origin is cut the same way; other origins go whole")
    func relayedOriginsAreCutAlone() throws {
        let writer = try Fixture.replica(1), relay = try Fixture.replica(3), older = try Fixture.replica(2)
        writer.zones = SimZones()
        let h = try Fixture.household([writer, relay, older])
        try Fixture.give(writer, 1)
        try writer.setHouseholdTimeZone("Sim/FarEast")
        try Fixture.give(writer, 1)
        #expect(Fixture.sync(writer, relay, household: h).bothFinished)
        try Fixture.give(relay, 2)
        let a = Self.session(.initiator, relay, h, versions: 3...4, limits: SessionLimits())
        let b = Self.session(.responder, older, h, versions: 3...3, limits: SessionLimits())
        let d = Driver.run(a, b)
        #expect(d.bothFinished)
        #expect(d.summaryA?.changesWithheld == 2)
        let held = try older.versionVector()
        #expect(held[writer.replicaID] == (try writer.versionVector()[writer.replicaID] ?? 0) - 2)
        #expect(held[relay.replicaID] == (try relay.versionVector()[relay.replicaID]))
        #expect(try older.verify().isIntact)
    }

    @Test("two laptops of the newest version send everything")
    func newestSendsEverything() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        a.zones = SimZones()
        let h = try Fixture.household([a, b])
        try a.setHouseholdTimeZone("Sim/West")
        let d = Fixture.sync(a, b, household: h)
        #expect(d.bothFinished && d.summaryA?.protocolVersion == protocolVersionMax && d.summaryA?.changesWithheld == 0)
        #expect(try a.digest() == b.digest())
    }

    /// A change of `origin` at `sequence` holding `operation`, encoded as the log holds it.
    static func encoded(_ origin: ReplicaID, _ sequence: UInt64, _ operation: Operation, mayEnd: Bool) -> EncodedChange {
        let change = Change(origin: origin, sequence: sequence, hlc: HLC(millis: 1_000 + Int64(sequence), counter: 0), operations: [operation])
        return EncodedChange(origin: origin, sequence: sequence, bytes: RecordCodec.encode(change), mayEndBatch: mayEnd)
    }

    @Test("the readable part ends where a batch may end (a signed head), never inside an unauthenticated run")
    func readablePartEndsAtAHead() throws {
        let x = ReplicaID(10), y = ReplicaID(20)
        let household = RecordID(high: 1, low: 2), child = RecordID(high: 3, low: 4)
        let plain = Operation.setField(entity: child, field: .childSortOrder, value: .integer(1))
        let zone = Operation.setField(entity: household, field: .householdTimeZone, value: .text("Europe/Paris"))
        let changes = [Self.encoded(x, 1, plain, mayEnd: false), Self.encoded(x, 2, plain, mayEnd: true),
                       Self.encoded(x, 3, plain, mayEnd: false), Self.encoded(x, 4, zone, mayEnd: true),
                       Self.encoded(x, 5, plain, mayEnd: true),
                       Self.encoded(y, 1, plain, mayEnd: true), Self.encoded(y, 2, plain, mayEnd: true)]
        let at3 = RecordVersions.readablePart(of: changes, by: 3)
        #expect(at3.readable.map { "\($0.origin.rawValue):\($0.sequence)" } == ["10:1", "10:2", "20:1", "20:2"])
        #expect(at3.withheld == [x: 3])
        let at4 = RecordVersions.readablePart(of: changes, by: 4)
        #expect(at4.readable == changes && at4.withheld.isEmpty)
        // No head before the first unreadable change: nothing of the origin goes.
        let headless = [Self.encoded(x, 1, plain, mayEnd: false), Self.encoded(x, 2, zone, mayEnd: true)]
        #expect(RecordVersions.readablePart(of: headless, by: 3).readable.isEmpty)
        #expect(RecordVersions.readablePart(of: headless, by: 3).withheld == [x: 1])
    }

    @Test("the minimum version: the household's time zone and limit need 4, so does a transfer naming the changes it saw; every field of 0.1.0 needs 3")
    func minimumVersions() {
        for field in Field.allCases {
            let newIn4: Set<Field> = [.householdTimeZone, .householdConfirmAbove]
            #expect(RecordVersions.minimumProtocol(toRead: field) == (newIn4.contains(field) ? 4 : 3), "\(field)")
        }
        let key = [UInt8](repeating: 7, count: 32), signature = [UInt8](repeating: 1, count: 64)
        let older = OwnerTransfer(newOwner: key, epoch: 2, transferredAtMillis: 7, seen: [ReplicaID(3): 5], signature: signature)
        let named = OwnerTransfer(newOwner: key, epoch: 2, transferredAtMillis: 7, seen: [ReplicaID(3): 5],
                                  seenChanges: [[UInt8](repeating: 2, count: 24)], signature: signature)
        #expect(RecordVersions.minimumProtocol(toRead: .transferOwner(older)) == 3)
        #expect(RecordVersions.minimumProtocol(toRead: .transferOwner(named)) == 4)
        #expect(RecordVersions.newest == protocolVersionMax)
    }
}

/// Issue 44: the relay's membership operations (tags 10 to 13) need protocol 5, and a session at 4
/// holds them back, with what follows them in their origin, as it holds operation 9 back from 3.
@Suite("The relay's operations and a peer speaking 4")
struct RelayVersionTests {
    static let key = [UInt8](repeating: 7, count: 32), signature = [UInt8](repeating: 1, count: 64)
    static let relayOperations: [Operation] = [
        .relayGrant(RelayGrant(relay: key, addresses: ["a:1"], streamKey: key, grantedAtMillis: 1, signature: signature)),
        .relayRevoke(RelayRevocation(relay: key, revokedAtMillis: 1, signature: signature)),
        .relayEpoch(RelayEpoch(record: [1], signature: signature)),
        .relayMemberKey(MemberRelayKey(relay: key, key: key)),
    ]

    @Test(arguments: relayOperations)
    func needsFiveAndIsHeldBackFromFour(op: Operation) {
        #expect(RecordVersions.minimumProtocol(toRead: op) == 5)
        let x = ReplicaID(10), y = ReplicaID(20)
        let plain = Operation.setField(entity: RecordID(high: 3, low: 4), field: .childSortOrder, value: .integer(1))
        let zone = Operation.setField(entity: RecordID(high: 1, low: 2), field: .householdTimeZone, value: .text("Europe/Paris"))
        let changes = [OlderPeerTests.encoded(x, 1, plain, mayEnd: true), OlderPeerTests.encoded(x, 2, zone, mayEnd: true),
                       OlderPeerTests.encoded(x, 3, op, mayEnd: true), OlderPeerTests.encoded(x, 4, plain, mayEnd: true),
                       OlderPeerTests.encoded(y, 1, plain, mayEnd: true)]
        let at4 = RecordVersions.readablePart(of: changes, by: 4)
        #expect(at4.readable.map { "\($0.origin.rawValue):\($0.sequence)" } == ["10:1", "10:2", "20:1"])
        #expect(at4.withheld == [x: 3])
        let at3 = RecordVersions.readablePart(of: changes, by: 3)
        #expect(at3.readable.map { "\($0.origin.rawValue):\($0.sequence)" } == ["10:1", "20:1"] && at3.withheld == [x: 2])
        let at5 = RecordVersions.readablePart(of: changes, by: 5)
        #expect(at5.readable == changes && at5.withheld.isEmpty)
        #expect(protocolVersionMin...protocolVersionMax == 3...5)
    }
}

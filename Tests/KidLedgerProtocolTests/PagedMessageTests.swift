import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol
import KidLedgerTestSupport

/// Issue 21, point 2: nothing a member sends stops other members from syncing. Vectors, acks and
/// per-child checks longer than one message holds go as pages (``Message/part(_:)``); before,
/// 10,001 origins or children ended every session of every replica holding them.
@Suite struct PagedMessageTests {
    /// A household on two replicas, the first also holding `origins` more origins of one change
    /// each (a flood of them, as a member could send).
    static func flooded(origins: Int) throws -> (Replica, Replica, RecordID) {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        let flood = (0..<origins).map { i in
            Change(origin: ReplicaID(0x7000_0000 + UInt64(i)), sequence: 1, hlc: HLC(millis: 1_700_000_000_000),
                   operations: [.setField(entity: h, field: .householdName, value: .text("flood"))])
        }
        #expect(try a.applyRemote(flood).applied == origins)
        return (a, b, h)
    }

    static func contains(_ messages: [Message], partOf type: UInt8) -> Bool {
        messages.contains { if case .part(let page) = $0 { page.type == type } else { false } }
    }

    @Test func aReplicaWithMoreOriginsThanOneVectorHoldsSyncsBothWays() throws {
        let (a, b, h) = try Self.flooded(origins: vectorEntriesMax + 1)
        let first = Fixture.sync(a, b, household: h)
        #expect(first.bothFinished, "\(String(describing: first.outcomeA)) \(String(describing: first.outcomeB))")
        #expect(try b.versionVector() == a.versionVector())
        #expect(Self.contains(first.sentByA, partOf: 3), "the initiator's vector went as pages")
        #expect(Self.contains(first.sentByB, partOf: 5), "the receiver's acks went as pages")
        // Both hold them now; each side's vector is paged, and the next change still syncs.
        try Fixture.give(b, 1)
        let second = Fixture.sync(a, b, household: h, maxChunk: 70_000)
        #expect(second.bothFinished)
        #expect(Self.contains(second.sentByB, partOf: 3))
        #expect(try a.digest() == b.digest())
    }

    @Test func moreChildrenThanOneChecksMessageHoldStillSync() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        var rng = SplitMix64(seed: 9)
        let children = (0..<(checksMax + 1)).map { _ in
            Operation.createChild(ChildRecord(id: RecordID.timeOrdered(millis: 1_700_000_000_000, using: &rng), createdAtMillis: 1_700_000_000_000))
        }
        let origin = ReplicaID(0x7100)
        let flood = [Change(origin: origin, sequence: 1, hlc: HLC(millis: 1_700_000_000_000), operations: Array(children.prefix(checksMax))),
                     Change(origin: origin, sequence: 2, hlc: HLC(millis: 1_700_000_000_001), operations: Array(children.suffix(1)))]
        #expect(try a.applyRemote(flood).applied == 2)
        let sync = Fixture.sync(a, b, household: h)
        #expect(sync.bothFinished, "\(String(describing: sync.outcomeA)) \(String(describing: sync.outcomeB))")
        #expect(sync.summaryA?.childrenAgreeing.count == checksMax + 2)  // Ann and the flood
        #expect(try a.digest() == b.digest())
    }

    @Test func pagesRoundTripThroughTheWireAndJoinToTheMessage() throws {
        var rng = SplitMix64(seed: 3)
        let checks = (0..<(2 * checksMax + 5)).map { i in
            ChildCheck(child: RecordID.timeOrdered(millis: Int64(i), using: &rng), count: UInt64(i), sumCents: Int128(i) - 7, idHash: [UInt8](repeating: UInt8(i & 0xFF), count: 16))
        }
        let vector = Dictionary(uniqueKeysWithValues: (1...UInt64(vectorEntriesMax + 3)).map { (ReplicaID($0), $0) })
        let summary = VectorSummary(vector: vector, chains: vector.mapValues { [UInt8](repeating: UInt8($0 & 0xFF), count: 16) },
                                    forked: [ReplicaID(5), ReplicaID(9)])
        for message in [Message.checks(checks), .ack(vector), .vector(summary)] {
            let pages = SyncSession.paged(message)
            #expect(pages.count >= 2 && pages.dropLast().allSatisfy { if case .part = $0 { true } else { false } })
            var joined: Message?
            for page in pages {
                let decoded = try Message.decode(type: page.type, payload: page.encodePayload())
                #expect(decoded == page)
                let body: Message = if case .part(let inner) = decoded { inner } else { decoded }
                joined = try joined.map { try SyncSession.join($0, body) } ?? body
            }
            #expect(joined == message)
        }
        let forked = SyncSession.paged(.forked(vector.keys.sorted()))
        let forkedOrigins = forked.flatMap { message -> [ReplicaID] in if case .forked(let o) = message { o } else { [] } }
        #expect(forked.count == 2 && Set(forkedOrigins) == Set(vector.keys))
        // Short messages go as they are.
        #expect(SyncSession.paged(.ack([ReplicaID(1): 1])) == [.ack([ReplicaID(1): 1])])
    }

    @Test func malformedPagesEndTheSession() throws {
        // A part of a message that is never paged.
        #expect(throws: ProtocolError.self) { try Message.decode(type: 11, payload: [4] + Message.done.encodePayload()) }
        #expect(throws: ProtocolError.self) { try Message.decode(type: 11, payload: [11, 5, 0]) }
        // Pages of another message, or naming an origin twice, or above the total.
        #expect(throws: ProtocolError.self) { try SyncSession.join(.vector(VectorSummary(vector: [:])), .ack([:])) }
        #expect(throws: ProtocolError.self) { try SyncSession.join(.ack([ReplicaID(1): 1]), .ack([ReplicaID(1): 2])) }
        let half = Dictionary(uniqueKeysWithValues: (1...UInt64(vectorEntriesTotalMax / 2 + 1)).map { (ReplicaID($0), UInt64(1)) })
        let other = Dictionary(uniqueKeysWithValues: half.keys.map { (ReplicaID($0.rawValue + (1 << 40)), UInt64(1)) })
        #expect(throws: ProtocolError.self) { try SyncSession.join(.ack(half), .ack(other)) }
        // Out of child order.
        let late = ChildCheck(child: RecordID(high: 9, low: 9), count: 1, sumCents: 1, idHash: [UInt8](repeating: 0, count: 16))
        let early = ChildCheck(child: RecordID(high: 1, low: 1), count: 1, sumCents: 1, idHash: [UInt8](repeating: 0, count: 16))
        #expect(throws: ProtocolError.self) { try SyncSession.join(.checks([late]), .checks([early])) }

        // Over the wire: a responder given a page of an ack, then a vector, ends the session.
        let (_, actions) = try PeerNumberTests.responder(receivingVector: [])  // the empty payload fails to decode
        #expect(PeerNumberTests.failure(actions) != nil)
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        let session = SyncSession(role: .responder, replica: b, household: h)
        _ = session.start()
        _ = session.receive(Message.hello(protocolVersionMin: protocolVersionMin, protocolVersionMax: protocolVersionMax,
                                          replica: a.replicaID, household: h).frame())
        let ended = session.receive(Message.part(.ack([ReplicaID(1): 1])).frame() + Message.vector(VectorSummary(vector: [:])).frame())
        #expect(PeerNumberTests.failure(ended).map { "\($0)" }?.contains("inside a paged") == true, "\(ended)")
    }
}

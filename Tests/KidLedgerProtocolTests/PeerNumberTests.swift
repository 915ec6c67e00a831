import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol
import KidLedgerTestSupport

/// Issue 21, point 1: every number a peer sends is bounded where it is decoded, and arithmetic on
/// peer numbers is checked or clamped. Each test here trapped the process before the fix.
@Suite struct PeerNumberTests {
    /// A canonical vector payload with the given entries (no bound checks: what a hostile peer sends).
    static func vectorPayload(_ entries: [(UInt64, UInt64)], chains: Bool) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.write(varint: UInt64(entries.count))
        for (origin, sequence) in entries {
            w.write(bigEndian: origin)
            w.write(varint: sequence)
        }
        if chains {
            for _ in entries { w.write(raw: [UInt8](repeating: 0, count: 16)) }
            w.write(varint: 0)  // no forked origins
        }
        return w.bytes
    }

    /// A responder that got a valid hello, then the vector `payload`: what it does.
    static func responder(receivingVector payload: [UInt8]) throws -> (SyncSession, [SessionAction]) {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        try Fixture.give(b, 2)
        let session = SyncSession(role: .responder, replica: b, household: h)
        _ = session.start()
        let hello = Message.hello(protocolVersionMin: protocolVersionMin, protocolVersionMax: protocolVersionMax,
                                  replica: a.replicaID, household: h)
        _ = session.receive(hello.frame())
        return (session, session.receive(Frame.encode(type: 3, payload: payload)))
    }

    static func failure(_ actions: [SessionAction]) -> ProtocolError? {
        for case .failed(let error) in actions { return error }
        return nil
    }

    @Test(arguments: [UInt64(1) << 63, UInt64.max, Limits.sequenceMax + 1])
    func aVectorEntryAboveTheBoundEndsTheSessionWithAProtocolError(sequence: UInt64) throws {
        let (session, actions) = try Self.responder(receivingVector: Self.vectorPayload([(7, sequence)], chains: true))
        #expect(session.state == .failed)
        guard case .malformed(let why) = Self.failure(actions) else { Issue.record("no malformed failure: \(actions)"); return }
        #expect(why.contains("sequence"))
        // One error frame goes back to the peer, and one failure is reported (logged once).
        #expect(actions.filter { if case .failed = $0 { true } else { false } }.count == 1)
    }

    @Test func twoEntriesWhoseSumOverflowsAreCountedClamped() throws {
        // Both within the bound; their sum is above Int.max on no platform, but the counts of
        // four such entries are: the counts saturate instead of trapping.
        let entries = (10...13).map { (UInt64($0), Limits.sequenceMax) }
        let (session, actions) = try Self.responder(receivingVector: Self.vectorPayload(entries, chains: true))
        #expect(Self.failure(actions) == nil)
        #expect(session.summary.changesExpected == Int.max)
    }

    @Test func theBoundIsEnforcedByEveryDecoderOfASequence() throws {
        let big = Limits.sequenceMax + 1
        // ack
        #expect(throws: ProtocolError.self) { try Message.decode(type: 5, payload: Self.vectorPayload([(7, big)], chains: false)) }
        // a change's sequence
        let change = Change(origin: ReplicaID(7), sequence: big, hlc: HLC(millis: 1, counter: 0),
                            operations: [.createChild(ChildRecord(id: RecordID(high: 1, low: 2), createdAtMillis: 1))])
        var w = ByteWriter(capacity: 64)
        w.write(bool: true)
        w.write(varint: 1)
        RecordCodec.encode(change, into: &w)
        w.write(varint: 0)
        #expect(throws: ProtocolError.self) { try Message.decode(type: 4, payload: w.bytes) }
        // At the bound itself: accepted.
        #expect(throws: Never.self) { try Message.decode(type: 5, payload: Self.vectorPayload([(7, Limits.sequenceMax)], chains: false)) }
    }

    @Test func changesMissingSaturates() {
        let huge: VersionVector = [ReplicaID(1): .max, ReplicaID(2): .max, ReplicaID(3): 1 << 63]
        #expect(changesMissing(from: [:], in: huge) == Int.max)
        #expect(changesMissing(from: huge, in: [ReplicaID(1): 5]) == 0)
        #expect(changesMissing(from: [ReplicaID(1): 2], in: [ReplicaID(1): 5, ReplicaID(4): 1]) == 4)
    }
}

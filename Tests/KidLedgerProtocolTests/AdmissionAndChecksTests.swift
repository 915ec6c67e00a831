import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol
import KidLedgerTestSupport

/// The responder's admission hook (invitations) and the per-child checks exchanged before done.
@Suite("Admission and per-child checks")
struct AdmissionAndChecksTests {
    @Test func joinTokenReachesTheResponderAndARefusalSendsNothing() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a])
        try Fixture.give(a, 3)
        let before = try b.digest()
        let refuse: @Sendable (Admission) -> ProtocolError? = { admission in
            admission.joinToken == [1, 2, 3] ? nil : .refused("unknown or expired invitation")
        }
        let wrong = Driver.run(SyncSession(role: .initiator, replica: b, household: h, joinToken: [9, 9]),
                               SyncSession(role: .responder, replica: a, household: h, admit: refuse))
        guard case .failed(.peer(let code, let message)) = wrong.outcomeA else { Issue.record("joiner not refused"); return }
        #expect(code == 9 && message.contains("unknown or expired invitation"))
        #expect(!wrong.sentByB.contains { if case .changes = $0 { true } else { false } })
        #expect(try b.digest() == before)

        let right = Driver.run(SyncSession(role: .initiator, replica: b, household: h, joinToken: [1, 2, 3]),
                               SyncSession(role: .responder, replica: a, household: h, admit: refuse))
        #expect(right.bothFinished)
        #expect(try b.digest() == a.digest())
        #expect(try b.household()?.id == h)
    }

    /// Until a peer's hello admits it, a responder buffers no frame longer than a hello: a longer
    /// length prefix fails the session from its 4 bytes. The largest hello fits; after it, frames
    /// up to frameBytesMax are taken again.
    @Test func aResponderTakesOnlyHelloSizedFramesBeforeTheHello() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a])
        let responder = SyncSession(role: .responder, replica: a, household: h)
        _ = responder.start()
        let actions = responder.receive([0, 0, 0x10, 0])
        #expect(actions.contains(.failed(.frameTooLarge(4096, limit: helloFrameBytesMax))), "\(actions)")
        #expect(responder.state == .failed)

        let longest = Message.hello(protocolVersionMin: protocolVersionMin, protocolVersionMax: protocolVersionMax,
                                    replica: b.replicaID, household: h, joinToken: [UInt8](repeating: 7, count: joinTokenBytesMax)).frame()
        #expect(longest.count - 4 <= helloFrameBytesMax)
        let second = SyncSession(role: .responder, replica: a, household: h)
        _ = second.start()
        _ = second.receive(longest)
        #expect(second.state == .awaitingVector)
        // Past the hello, a frame far above the hello's size is buffered (not refused).
        #expect(second.receive([0, 0x10, 0, 0]).isEmpty && second.state == .awaitingVector)
    }

    @Test func checksAgreeAfterASyncAndCountsAreReported() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        try Fixture.give(a, 5)
        try Fixture.give(b, 2)
        let d = Fixture.sync(a, b, household: h)
        let sa = try #require(d.summaryA), sb = try #require(d.summaryB)
        #expect(sa.changesExpected == 2 && sa.changesToSend == 5)
        #expect(sb.changesExpected == 5 && sb.changesToSend == 2)
        #expect(sa.childrenDiffering.isEmpty && sb.childrenDiffering.isEmpty)
        #expect(sa.childrenAgreeing.count == 1 && sb.childrenAgreeing.count == 1)
        #expect(sa.peerVector == (try b.versionVector()).filter { $0.value > 0 })
    }

    @Test func agreeingChecksTravelAsOneDigest() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        try Fixture.give(a, 4)
        let d = Fixture.sync(a, b, household: h)
        #expect(d.bothFinished)
        for sent in [d.sentByA, d.sentByB] {
            #expect(sent.contains { if case .checksDigest(1, _) = $0 { true } else { false } })
            #expect(!sent.contains { if case .checks = $0 { true } else { false } })
        }
    }

    @Test func differingChecksAreExchangedInFullAndNameTheChild() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        let ann = try #require(try a.children().first).id
        try Fixture.give(a, 2)
        #expect(Fixture.sync(a, b, household: h).bothFinished)
        // Break b's stored total for Ann (count 1, sum 0, empty id hash): the next session must notice.
        try b.store.write { w in try w.put(Tables.aggregates, ann.bytes, [1] + [UInt8](repeating: 0, count: 32)) }
        try Fixture.give(a, 1)
        let d = Fixture.sync(a, b, household: h)
        #expect(d.bothFinished)
        let sa = try #require(d.summaryA), sb = try #require(d.summaryB)
        #expect(sa.childrenDiffering == [ann] && sb.childrenDiffering == [ann])
        #expect(sa.childrenAgreeing.isEmpty && sb.childrenAgreeing.isEmpty)
        for sent in [d.sentByA, d.sentByB] {
            #expect(sent.contains { if case .checks = $0 { true } else { false } })
        }
    }

    @Test func checksDigestRoundTripsAndRejectsAShortDigest() throws {
        let m = Message.checksDigest(children: 3, digest: [UInt8](repeating: 5, count: 16))
        #expect(try Message.decode(type: m.type, payload: m.encodePayload()) == m)
        #expect(throws: ProtocolError.self) { try Message.decode(type: m.type, payload: Array(m.encodePayload().dropLast())) }
    }

    @Test func checksMessageRoundTripsAndRejectsDisorder() throws {
        let checks = [ChildCheck(child: RecordID(high: 1, low: 1), count: 3, sumCents: -5, idHash: [UInt8](repeating: 7, count: 16)),
                      ChildCheck(child: RecordID(high: 2, low: 0), count: 0, sumCents: Int128(Int64.max) * 4, idHash: [UInt8](repeating: 0, count: 16))]
        let m = Message.checks(checks)
        #expect(try Message.decode(type: m.type, payload: m.encodePayload()) == m)
        var payload = m.encodePayload()
        payload.append(0)
        #expect(throws: ProtocolError.self) { try Message.decode(type: m.type, payload: payload) }
    }
}

import KidLedgerDomain
import Testing
@testable import KidLedgerSimulation

/// The reference model on small histories whose outcome is known by hand, so the oracle the
/// simulator checks every run against is itself checked.
@Suite("Reference model")
struct ReferenceModelTests {
    let a = ReplicaID(1), b = ReplicaID(2)
    let ava = RecordID(high: 0xAA, low: 1)

    func tx(_ id: UInt64, _ cents: Int64, note: String = "") -> Operation {
        .addTransaction(LedgerTransaction(id: RecordID(high: id, low: id), childID: ava, amountCents: cents,
                                          createdAtMillis: 10, note: note, source: "give"))
    }

    @Test func lastWriterWinsSameIdSmallestPayloadAndDeferral() {
        let orphan = LedgerTransaction(id: RecordID(high: 9, low: 9), childID: RecordID(high: 0xBB, low: 2),
                                       amountCents: 500, createdAtMillis: 10, source: "give")
        let changes = [
            Change(origin: a, sequence: 1, hlc: HLC(millis: 1), operations: [
                .createChild(ChildRecord(id: ava, createdAtMillis: 1)),
                .setField(entity: ava, field: .childName, value: .text("Ava"))]),
            Change(origin: a, sequence: 2, hlc: HLC(millis: 5), operations: [.setField(entity: ava, field: .childName, value: .text("Eva"))]),
            Change(origin: b, sequence: 1, hlc: HLC(millis: 5), operations: [.setField(entity: ava, field: .childName, value: .text("Ada"))]),
            Change(origin: b, sequence: 2, hlc: HLC(millis: 6), operations: [tx(1, 100, note: "b"), .addTransaction(orphan)]),
            Change(origin: a, sequence: 3, hlc: HLC(millis: 7), operations: [tx(1, 300, note: "a"), tx(2, 25)]),
        ]
        let model = ReferenceModel.expected(from: changes)
        // Equal HLC: the larger replica id (b) wins the rename. Same id 1: the smaller canonical
        // payload wins (the amounts differ first: zigzag(100) < zigzag(300)). The orphan's child
        // never arrived, so it is not in any balance.
        #expect(model[ava] == ReferenceModel.ChildState(name: "Ada", archived: false, balance: 125))
        #expect(model.count == 1)
        // Order does not matter.
        #expect(ReferenceModel.expected(from: changes.reversed()) == model)
    }

    @Test func revokedMembersLaterChangesDoNotCount() {
        let member = [UInt8](repeating: 7, count: 32)
        let changes = [
            Change(origin: a, sequence: 1, hlc: HLC(millis: 1), operations: [.createChild(ChildRecord(id: ava, createdAtMillis: 1))]),
            Change(origin: b, sequence: 1, hlc: HLC(millis: 2), operations: [.claim(OriginClaim(origin: b, member: member, nonce: 0, signature: [])), tx(1, 100)]),
            Change(origin: b, sequence: 2, hlc: HLC(millis: 3), operations: [tx(2, 1_000)]),
            Change(origin: a, sequence: 2, hlc: HLC(millis: 4), operations: [.revoke(MemberRevocation(member: member, revokedAtMillis: 4, seen: [b: 1], signature: []))]),
        ]
        #expect(ReferenceModel.expected(from: changes)[ava]?.balance == 100)
    }
}

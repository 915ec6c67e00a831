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
        let model = ReferenceModel.expected(from: changes, verifier: KeyIsSignature())
        // Equal HLC: the larger replica id (b) wins the rename. Same id 1: the smaller canonical
        // payload wins (the amounts differ first: zigzag(100) < zigzag(300)). The orphan's child
        // never arrived, so it is not in any balance.
        #expect(model[ava] == ReferenceModel.ChildState(name: "Ada", archived: false, balance: 125))
        #expect(model.count == 1)
        // Order does not matter.
        #expect(ReferenceModel.expected(from: changes.reversed(), verifier: KeyIsSignature()) == model)
    }

    /// A test scheme: a signature is valid when it is the signer's key (the model only asks who signed).
    struct KeyIsSignature: SignatureVerifier {
        func isValid(signature: [UInt8], message: [UInt8], key: [UInt8]) -> Bool { signature == key }
    }

    let owner = [UInt8](repeating: 1, count: 32), member = [UInt8](repeating: 7, count: 32)
    let household = RecordID(high: 0x40, low: 0x40)

    /// The owner's origin `a`: the genesis, its claim, the member's grant and the child.
    func genesis() -> Change {
        Change(origin: a, sequence: 1, hlc: HLC(millis: 1), operations: [
            .createHousehold(Household(id: household, createdAtMillis: 1, owner: owner, recovery: [9])),
            .claim(OriginClaim(origin: a, member: owner, nonce: 0, signature: owner)),
            .grant(MemberGrant(member: member, name: "m", grantedAtMillis: 1, signature: owner)),
            .createChild(ChildRecord(id: ava, createdAtMillis: 1))])
    }

    @Test func revokedMembersLaterChangesDoNotCount() {
        let changes = [
            genesis(),
            Change(origin: b, sequence: 1, hlc: HLC(millis: 2), operations: [.claim(OriginClaim(origin: b, member: member, nonce: 0, signature: member)), tx(1, 100)]),
            Change(origin: b, sequence: 2, hlc: HLC(millis: 3), operations: [tx(2, 1_000)]),
            Change(origin: a, sequence: 2, hlc: HLC(millis: 4), operations: [.revoke(MemberRevocation(member: member, revokedAtMillis: 4, seen: [b: 1], signature: owner))]),
        ]
        #expect(ReferenceModel.expected(from: changes, verifier: KeyIsSignature())[ava]?.balance == 100)
        // A revocation nobody who owns signed counts for nothing.
        var forged = changes
        forged[3] = Change(origin: a, sequence: 2, hlc: HLC(millis: 4), operations: [.revoke(MemberRevocation(member: member, revokedAtMillis: 4, seen: [b: 1], signature: member))])
        #expect(ReferenceModel.expected(from: forged, verifier: KeyIsSignature())[ava]?.balance == 1_100)
    }

    /// The stolen-laptop story: the member recovers ownership (a transfer that saw the owner's
    /// origin up to 1), then the old owner key revokes the member. That revocation comes after the
    /// transfer ended the old owner's term, so it is void: the member's changes all count.
    @Test func aFormerOwnersRevocationAfterItsTermCountsForNothing() {
        let transfer = OwnerTransfer(newOwner: member, epoch: 1, transferredAtMillis: 5, seen: [a: 1, b: 1], signature: [9])
        let changes = [
            genesis(),
            Change(origin: b, sequence: 1, hlc: HLC(millis: 2), operations: [.claim(OriginClaim(origin: b, member: member, nonce: 0, signature: member)), tx(1, 100)]),
            Change(origin: b, sequence: 2, hlc: HLC(millis: 5), operations: [.transferOwner(transfer)]),
            Change(origin: b, sequence: 3, hlc: HLC(millis: 6), operations: [tx(2, 1_000)]),
            Change(origin: a, sequence: 2, hlc: HLC(millis: 7), operations: [.revoke(MemberRevocation(member: member, revokedAtMillis: 7, seen: [b: 1], signature: owner))]),
        ]
        #expect(ReferenceModel.expected(from: changes, verifier: KeyIsSignature())[ava]?.balance == 1_100)
        #expect(ReferenceModel.expected(from: changes.reversed(), verifier: KeyIsSignature())[ava]?.balance == 1_100)
        // Without the transfer the old owner still owns, and its revocation cuts the member at b: 1.
        let unrecovered = changes.filter { !$0.operations.contains { if case .transferOwner = $0 { true } else { false } } }
        #expect(ReferenceModel.expected(from: unrecovered, verifier: KeyIsSignature())[ava]?.balance == 100)
    }
}

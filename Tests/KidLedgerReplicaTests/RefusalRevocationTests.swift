import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerTestSupport

/// Issue 20, point 6: a refused device learns its revocation from the refusal
/// (``Replica/learnRevocation(_:of:)``), and a refusal with a forged revocation changes nothing.
@Suite("Revocations that come with a refusal")
struct RefusalRevocationTests {
    let h = OwnedHousehold()
    var owner: ReplicaID { h.origin(h.ownerKey) }
    var spouse: ReplicaID { h.origin(h.spouseKey) }
    let ava = RecordID(high: 0xAA, low: 1)

    /// The spouse's laptop: the owner's genesis, a grant for the spouse, the spouse's claim and one
    /// give, then a give after the (not yet known) revocation's cut.
    func spouseLaptop() throws -> Replica {
        let r = try h.replica(2)
        try r.applySigned([
            h.change(owner, 1, millis: 1, [h.genesis(),
                                           h.claim(owner, key: h.ownerKey),
                                           .createChild(ChildRecord(id: ava, createdAtMillis: 1)),
                                           .setField(entity: ava, field: .childName, value: .text("Ava"))]),
            h.change(owner, 2, millis: 2, [h.grant(h.spouseKey, name: "Dad")]),
            h.change(spouse, 1, millis: 3, [h.claim(spouse, key: h.spouseKey), give(1, 100)]),
            h.change(spouse, 2, millis: 4, [give(2, 200)]),
        ])
        return r
    }

    func give(_ id: UInt64, _ cents: Int64) -> Operation {
        .addTransaction(LedgerTransaction(id: RecordID(high: id, low: id), childID: ava, amountCents: cents,
                                          createdAtMillis: 1_000 + Int64(id), source: "give"))
    }

    func revokedHere(_ r: Replica) throws -> Bool {
        try r.members().contains { $0.key == h.spouseKey && $0.isRevoked }
    }

    @Test func aGenuineRevocationIsRecordedThroughTheApplyPath() throws {
        let r = try spouseLaptop()
        #expect(try r.balance(of: ava) == 300)
        let genuine = RecordCodec.encodeOperation(h.revoke(h.spouseKey, seen: [owner: 2, spouse: 1]))
        #expect(try r.learnRevocation(genuine, of: h.spouseKey) == .recorded)
        #expect(try revokedHere(r))
        // The give after the cut is rejected here too; the one before stays; nothing is deleted.
        #expect(try r.balance(of: ava) == 100)
        #expect(try r.membershipCounts().rejected == 1)
        #expect(try r.revocation(of: h.spouseKey) != nil)
        // Learning it again changes nothing.
        let digest = try r.digest()
        #expect(try r.learnRevocation(genuine, of: h.spouseKey) == .alreadyKnown)
        #expect(try r.digest() == digest)
        #expect(try r.verify().problems.isEmpty)
    }

    @Test func aForgedRevocationInARefusalChangesNothing() throws {
        let r = try spouseLaptop()
        let digest = try r.digest(), vector = try r.versionVector()
        let forgeries: [[UInt8]] = [
            // Signed by the spouse itself, not the owner.
            RecordCodec.encodeOperation(h.revoke(h.spouseKey, seen: [owner: 2], signer: h.spouseKey)),
            // Signed by the owner, but names another member.
            RecordCodec.encodeOperation(h.revoke([UInt8](repeating: 0xC3, count: 32), seen: [owner: 2])),
            // Not a revocation at all, and garbage.
            RecordCodec.encodeOperation(h.grant(h.spouseKey, name: "Dad")),
            [1, 2, 3],
        ]
        for (i, forged) in forgeries.enumerated() {
            guard case .forged = try r.learnRevocation(forged, of: h.spouseKey) else {
                Issue.record("forgery \(i) was not refused")
                continue
            }
        }
        #expect(try !revokedHere(r))
        #expect(try r.digest() == digest)
        #expect(try r.versionVector() == vector)
        #expect(try r.balance(of: ava) == 300)
        #expect(try r.device.setting(Replica.forgedRefusalsSetting) == "4")
    }
}

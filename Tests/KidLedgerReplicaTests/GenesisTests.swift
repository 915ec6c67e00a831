import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerTestSupport

/// Issue 20, point 1: the household is what its owner signed. Only the pinned household's genesis,
/// signed by its owner, is applied; every other household record is forged and counted.
@Suite("Household genesis")
struct GenesisTests {
    let h = OwnedHousehold()
    var owner: ReplicaID { h.origin(h.ownerKey) }
    var spouse: ReplicaID { h.origin(h.spouseKey) }
    let ava = RecordID(high: 0xAA, low: 1)
    let bobKey = [UInt8](repeating: 0xD4, count: 32)

    /// The owner's household with Ava, the spouse ("Dad") granted and writing once.
    func genesis() -> [Change] {
        [h.change(owner, 1, millis: 1, [h.genesis(), h.claim(owner, key: h.ownerKey),
                                        .createChild(ChildRecord(id: ava, createdAtMillis: 1)),
                                        .setField(entity: ava, field: .childName, value: .text("Ava"))]),
         h.change(owner, 2, millis: 2, [h.grant(h.spouseKey, name: "Dad")]),
         h.change(spouse, 1, millis: 3, [h.claim(spouse, key: h.spouseKey)])]
    }

    /// The owner's later grant, which must still count after any attack.
    var laterGrant: Change { h.change(owner, 3, millis: 20, [h.grant(bobKey, name: "Bob")]) }

    @Test("attack (a): a member's unsigned household record with the household's id never replaces the genesis")
    func unsignedHouseholdRecordIsForged() throws {
        let r = try h.replica(1)
        try r.applySigned(genesis())
        try r.applySigned([h.change(spouse, 2, millis: 4, [
            .createHousehold(Household(id: h.id, createdAtMillis: 0)),                                  // no owner
            .createHousehold(Household(id: h.id, createdAtMillis: 0, owner: h.ownerKey, salt: h.salt)),  // createdAt 0, unsigned
        ])])
        try r.applySigned([laterGrant])
        #expect(try r.members().map(\.name) == ["owner", "Bob", "Dad"])
        #expect(try r.members().first?.key == h.ownerKey)
        #expect(try r.household()?.id == h.id)
        #expect(try r.household()?.createdAtMillis == 1)
        #expect(try r.membershipCounts() == MembershipCounts(forged: 2, forgedHouseholds: 2, rejected: 0))
        let report = try r.verify()
        #expect(report.isIntact, "\(report.problems)")
        #expect(report.forged == 2 && report.forgedHouseholds == 2)
    }

    @Test("attack (b): a member's genuine genesis of a household with a smaller id is not adopted")
    func groundSaltHouseholdIsNotAdopted() throws {
        let mallory = h.spouseKey
        // Grind a salt until the id derived from the member's own key sorts below the real one.
        var salt = [UInt8](repeating: 0, count: 16)
        var id = Membership.householdID(owner: mallory, salt: salt)
        while !Keys.id(id).lexicographicallyPrecedes(Keys.id(h.id)) {
            salt[0] &+= 1
            if salt[0] == 0 { salt[1] &+= 1 }
            id = Membership.householdID(owner: mallory, salt: salt)
        }
        var theirs = Household(id: id, createdAtMillis: 4, owner: mallory, salt: salt, name: "Mallory's")
        theirs.signature = TestVerifier.sign(Membership.genesisMessage(theirs), key: mallory)
        var revocation = MemberRevocation(member: h.ownerKey, revokedAtMillis: 5, seen: [owner: 2], signature: [])
        revocation.signature = TestVerifier.sign(Membership.revocationMessage(household: id, revocation), key: mallory)

        let r = try h.replica(2)
        try r.applySigned(genesis())
        try r.applySigned([h.change(spouse, 2, millis: 4, [.createHousehold(theirs), .revoke(revocation)])])
        try r.applySigned([laterGrant])
        #expect(try r.household()?.id == h.id)
        let members = try r.members()
        #expect(members.map(\.name) == ["owner", "Bob", "Dad"])
        #expect(members.first?.key == h.ownerKey && members.allSatisfy { !$0.isRevoked })
        #expect(try r.membershipCounts() == MembershipCounts(forged: 2, forgedHouseholds: 1, rejected: 0))
        let report = try r.verify()
        #expect(report.isIntact, "\(report.problems)")
        #expect(report.forgedHouseholds == 1)
    }

    @Test("a genesis with a bad signature is forged, counted, and reported by verify")
    func badSignatureGenesisIsForged() throws {
        let r = try h.replica(3)
        try r.pinHousehold(h.id, owner: h.ownerKey)  // as `join` does, from the invitation
        let second = h.origin(h.spouseKey, nonce: 1)  // a member's other device, authenticated by its claim
        try r.applySigned([h.change(second, 1, millis: 1, [h.claim(second, key: h.spouseKey), h.genesis(millis: 0, name: "Taken", signer: h.spouseKey)])])
        #expect(try r.household() == nil)
        #expect(try r.membershipCounts().forgedHouseholds == 1)
        var report = try r.verify()
        #expect(report.isIntact, "\(report.problems)")
        #expect(report.forged == 1 && report.forgedHouseholds == 1)
        // The genuine genesis then arrives and is the household.
        try r.applySigned(genesis())
        #expect(try r.household()?.id == h.id && r.household()?.createdAtMillis == 1)
        #expect(try r.members().map(\.name) == ["owner", "Dad"])
        report = try r.verify()
        #expect(report.isIntact && report.forgedHouseholds == 1)
    }

    @Test("a replica pinned to a household refuses a genuine genesis of another, whatever arrives first")
    func pinnedReplicaRefusesAnotherHousehold() throws {
        let other = OwnedHousehold(salt: [UInt8](repeating: 9, count: 16))
        let r = try h.replica(4)
        try r.pinHousehold(h.id, owner: h.ownerKey)
        let second = h.origin(h.spouseKey, nonce: 1)  // a member's other device, authenticated by its claim
        try r.applySigned([other.change(second, 1, millis: 1, [h.claim(second, key: h.spouseKey), other.genesis()])])
        #expect(try r.household() == nil)
        try r.applySigned(genesis())
        #expect(try r.household()?.id == h.id)
        #expect(try r.membershipCounts().forgedHouseholds == 1)
        #expect(throws: LedgerError.self) { try r.pinHousehold(other.id, owner: other.ownerKey) }
        #expect(try r.verify().isIntact)
    }

    @Test("identical logs with forged household records give identical state in every arrival order", arguments: UInt64(0)..<8)
    func forgedGeneses_orderIndependent(seed: UInt64) throws {
        let all = genesis() + [
            h.change(spouse, 2, millis: 4, [.createHousehold(Household(id: h.id, createdAtMillis: 0))]),
            h.change(spouse, 3, millis: 5, [h.genesis(millis: 0, signer: h.spouseKey)]),
            laterGrant,
        ]
        let reference = try h.replica(100)
        try reference.pinHousehold(h.id, owner: h.ownerKey)
        try reference.applySigned(all)
        var rng = SplitMix64(seed: seed)
        let r = try h.replica(seed)
        try r.pinHousehold(h.id, owner: h.ownerKey)
        _ = try r.receiveShuffledWithRetry(all, using: &rng)
        #expect(try r.digest() == reference.digest())
        #expect(try r.membershipCounts() == reference.membershipCounts())
        #expect(try r.membershipCounts().forgedHouseholds == 2)
        #expect(try r.verify().isIntact)
    }

    @Test("an owned household is created signed, and pins its replica")
    func createHouseholdSignsAndPins() throws {
        let r = try h.replica(5)
        #expect(throws: LedgerError.self) {
            try r.createHousehold(name: "Home", owner: h.ownerKey, salt: h.salt) { TestVerifier.sign($0, key: h.ownerKey) }
        }
        r.signer = h.signer(h.ownerKey)
        #expect(throws: LedgerError.self) { try r.createHousehold(name: "Home", owner: h.ownerKey, salt: h.salt) }
        #expect(throws: LedgerError.self) {
            try r.createHousehold(name: "Home", owner: h.ownerKey, salt: h.salt) { TestVerifier.sign($0, key: h.spouseKey) }
        }
        #expect(try r.changes(notCoveredBy: [:]).isEmpty)
        let created = try r.createHousehold(name: "Home", owner: h.ownerKey, salt: h.salt) { TestVerifier.sign($0, key: h.ownerKey) }
        #expect(created.id == h.id)
        #expect(try r.store.read { try Replica.pinnedHousehold($0) }?.id == h.id)
        let copy = try h.replica(6)
        try copy.applyRemote(try r.batch(notCoveredBy: [:]))
        #expect(try copy.household() == r.household() && copy.digest() == r.digest())
    }
}

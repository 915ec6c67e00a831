import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerInMemory
import KidLedgerTestSupport

@Suite("Membership and revocation")
struct MembershipTests {
    let h = OwnedHousehold()
    var owner: ReplicaID { h.origin(h.ownerKey) }
    var spouse: ReplicaID { h.origin(h.spouseKey) }
    let ava = OwnedHousehold.ava

    func give(_ id: UInt64, _ cents: Int64) -> Operation { h.give(id, cents) }

    /// The owner's genesis (household, its claim, Ava, a grant for the spouse) and the spouse's claim.
    func genesis() -> [Change] {
        h.founding()
    }

    @Test func membersListsOwnerAndGrantedSpouse() throws {
        let r = try h.replica(1)
        try r.applySigned(genesis())
        let members = try r.members()
        #expect(members.map(\.name) == ["owner", "Dad"])
        #expect(members.map(\.devices) == [[owner], [spouse]])
        #expect(try r.balance(of: ava) == 100)
    }

    @Test func forgedGrantsAndClaimsAreRejectedAndCounted() throws {
        let r = try h.replica(1)
        let mallory = [UInt8](repeating: 0xCC, count: 32)
        let report = try r.applySigned(genesis() + [
            h.change(owner, 3, millis: 4, [h.grant(mallory, name: "Mallory", signer: mallory)]),       // not the owner's signature
            h.change(ReplicaID(0x30), 1, millis: 5, [h.claim(ReplicaID(0x31), key: mallory)]),          // claims another origin
        ])
        #expect(try r.members().map(\.name) == ["owner", "Dad"])
        // The grant is judged and forged; the claim of another origin opens no origin, so its
        // change is refused (not stored) before it is judged (issue 39).
        #expect(try r.membershipCounts().forged == 1 && report.notAdmitted == 1)
        #expect(try r.verify().isIntact)
    }

    @Test func householdIDMustBeDerivedFromItsOwner() throws {
        let r = try h.replica(1)
        let forged = Household(id: h.id, createdAtMillis: 1, owner: [UInt8](repeating: 0xCC, count: 32), salt: h.salt)
        try r.applySigned([h.change(ReplicaID(0x30), 1, millis: 1, [.createHousehold(forged)])])
        #expect(try r.household() == nil)
        #expect(try r.membershipCounts().forged == 1)
    }

    /// The revocation saw the spouse's first two changes: they stay. The spouse's later offline
    /// edits are rejected on every replica, whichever arrives first.
    @Test(arguments: UInt64(0)..<12)
    func revocationRuleIsOrderIndependent(seed: UInt64) throws {
        let spouseLater = [h.change(spouse, 2, millis: 6, [give(2, 200)]),
                           h.change(spouse, 3, millis: 7, [give(3, 300), .setField(entity: ava, field: .childName, value: .text("Eva"))])]
        let revocation = h.change(owner, 3, millis: 8, [h.revoke(h.spouseKey, seen: [owner: 2, spouse: 2])])
        let all = genesis() + spouseLater + [revocation]
        let reference = try h.replica(100)
        try reference.applySigned(all)
        #expect(try reference.balance(of: ava) == 300)              // 100 and 200 stay; 300 is rejected
        #expect(try reference.children().first?.name == "Ava")       // the rejected rename never applies
        #expect(try reference.membershipCounts().rejected == 1)
        #expect(try reference.members().first { $0.name == "Dad" }?.isRevoked == true)
        #expect(try reference.verify().isIntact)

        var rng = SplitMix64(seed: seed)
        let r = try h.replica(seed)
        _ = try r.receiveShuffledWithRetry(all, using: &rng)
        #expect(try r.digest() == reference.digest())
        #expect(try r.balance(of: ava) == 300)
        #expect(try r.verify().isIntact)
    }

    @Test func aSecondRevocationCanOnlyRejectMore() throws {
        let r = try h.replica(1)
        try r.applySigned(genesis() + [h.change(spouse, 2, millis: 6, [give(2, 200)]),
                                       h.change(owner, 3, millis: 8, [h.revoke(h.spouseKey, seen: [spouse: 2])]),
                                       h.change(owner, 4, millis: 9, [h.revoke(h.spouseKey, seen: [spouse: 1])])])
        #expect(try r.balance(of: ava) == 100)
        #expect(try r.verify().isIntact)
    }
}

/// A member's replica id may sort before the owner's, so its claim can arrive (and, in a rebuild,
/// be replayed) before the household exists: the claim waits for the household instead of being
/// lost, and the revocation rule still holds in every order.
@Suite("Membership with a member origin sorting first")
struct MembershipOriginOrderTests {
    let h = OwnedHousehold()
    var owner: ReplicaID { h.origin(h.ownerKey) }
    /// The spouse's first derived origin that sorts before the owner's.
    var spouse: ReplicaID { (0..<256).lazy.map { h.origin(h.spouseKey, nonce: $0) }.first { $0 < owner }! }
    let ava = OwnedHousehold.ava

    func give(_ id: UInt64, _ cents: Int64) -> Operation { h.give(id, cents) }

    @Test(arguments: UInt64(0)..<12)
    func claimBeforeHouseholdAndRevocation(seed: UInt64) throws {
        let all = [
            h.change(spouse, 1, millis: 3, [h.claim(spouse, key: h.spouseKey), give(1, 100)]),
            h.change(spouse, 2, millis: 6, [give(2, 200)]),
            h.change(owner, 1, millis: 1, [h.genesis(),
                                           h.claim(owner, key: h.ownerKey),
                                           .createChild(ChildRecord(id: ava, createdAtMillis: 1))]),
            h.change(owner, 2, millis: 2, [h.grant(h.spouseKey, name: "Dad")]),
            h.change(owner, 3, millis: 8, [h.revoke(h.spouseKey, seen: [owner: 2, spouse: 1])]),
        ]
        var rng = SplitMix64(seed: seed)
        let r = try h.replica(seed)
        _ = try r.receiveShuffledWithRetry(all, using: &rng)
        #expect(try r.balance(of: ava) == 100)
        #expect(try r.members().first { $0.name == "Dad" }?.devices == [spouse])
        #expect(try r.membershipCounts() == MembershipCounts(forged: 0, forgedHouseholds: 0, rejected: 1))
        #expect(try r.verify().isIntact)
    }
}

/// A stored revocation that can't be decoded is a damaged store, never "not revoked".
@Test func undecodableStoredRevocationIsADamagedStore() throws {
    let store = MemoryStore()
    let member = [UInt8](repeating: 0xC3, count: 32)
    try store.write { w in try w.put(Tables.revocations, member + [0, 1], [0xFF, 0xFF, 0xFF]) }
    #expect(throws: LedgerError.self) {
        try store.read { r in try Replica.revokedSeen(member, r) }
    }
    let other = [UInt8](repeating: 0xD4, count: 32)
    #expect(try store.read { r in try Replica.revokedSeen(other, r) } == nil)
}

/// A stored grant that can't be decoded is a damaged store: `members()` throws instead of listing
/// the household without that member.
@Test func undecodableStoredGrantIsADamagedStore() throws {
    let h = OwnedHousehold()
    let store = MemoryStore()
    let r = try Replica(store: store, clock: FixedClock(millis: 1_000_000), random: SplitMix64(seed: 3), verifier: TestVerifier())
    try r.applySigned(h.founding())
    #expect(try r.members().count == 2)
    try store.write { w in try w.put(Tables.grants, [UInt8](repeating: 0xC3, count: 32) + [0, 1], [0xFF, 0xFF, 0xFF]) }
    #expect(throws: LedgerError.self) { try r.members() }
}

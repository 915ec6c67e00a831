import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerTestSupport

/// Issue 20, points 2 and 3: an origin belongs to the one member key it is derived from, and the
/// membership rule judges a change by that key (its author), whoever relays it. The attacker is a
/// granted member (Mallory, whose key sorts below everyone's) running a modified client: every
/// change below is what such a client can send, built by hand and given to the product's apply
/// path (`applyRemote`).
@Suite("Authorship: origins, claims and revocation by author")
struct AuthorshipTests {
    let h = OwnedHousehold()
    let malloryKey = [UInt8](repeating: 0x01, count: 32)
    let throwawayKey = [UInt8](repeating: 0x02, count: 32)
    let grandmaKey = [UInt8](repeating: 0xC3, count: 32)
    var owner: ReplicaID { h.origin(h.ownerKey) }
    var spouse: ReplicaID { h.origin(h.spouseKey) }
    var mallory: ReplicaID { h.origin(malloryKey) }
    let ava = OwnedHousehold.ava

    func give(_ id: UInt64, _ cents: Int64) -> Operation { h.give(id, cents) }

    /// The owner's genesis (household, claim, Ava) and grants for the spouse and Mallory; the
    /// spouse's and Mallory's first changes (their claims and a give each).
    func household() -> [Change] {
        [h.change(owner, 1, millis: 1, [h.genesis(), h.claim(owner, key: h.ownerKey),
                                        .createChild(ChildRecord(id: ava, createdAtMillis: 1)),
                                        .setField(entity: ava, field: .childName, value: .text("Ava"))]),
         h.change(owner, 2, millis: 2, [h.grant(h.spouseKey, name: "Dad")]),
         h.change(owner, 3, millis: 3, [h.grant(malloryKey, name: "Mallory")]),
         h.change(spouse, 1, millis: 4, [h.claim(spouse, key: h.spouseKey), give(1, 100)]),
         h.change(mallory, 1, millis: 5, [h.claim(mallory, key: malloryKey), give(2, 50)])]
    }

    @Test("a member's claim of another member's origin, or of the owner's, is refused; the honest members' changes stay after the attacker's revocation")
    func claimOfAnotherOriginIsRefused() throws {
        let r = try h.replica(1)
        try r.applySigned(household() + [
            // Mallory's client writes under the spouse's and the owner's origins, claiming them.
            h.change(spouse, 2, millis: 6, [h.claim(spouse, key: malloryKey)]),
            h.change(owner, 4, millis: 7, [h.claim(owner, key: malloryKey)]),
            h.change(owner, 5, millis: 8, [h.revoke(malloryKey, seen: [owner: 4, spouse: 2, mallory: 1])]),
            h.change(owner, 6, millis: 9, [give(3, 7)]),
            h.change(spouse, 3, millis: 10, [give(4, 200)]),
        ])
        #expect(try r.balance(of: ava) == 100 + 50 + 7 + 200)
        let members = try r.members()
        #expect(members.first { $0.isOwner }?.devices == [owner])
        #expect(members.first { $0.key == h.spouseKey }?.devices == [spouse])
        #expect(members.first { $0.key == malloryKey }?.devices == [mallory])
        #expect(try r.membershipCounts() == MembershipCounts(forged: 2, forgedHouseholds: 0, rejected: 0))
        #expect(try r.verify().isIntact)
    }

    @Test("a claim is valid only at its origin's first change, for an origin derived from its key")
    func claimRules() throws {
        let r = try h.replica(1)
        let notDerived = ReplicaID(0x31)
        try r.applySigned(household() + [
            h.change(notDerived, 1, millis: 6, [h.claim(notDerived, key: malloryKey), give(5, 1)]),
            h.change(mallory, 2, millis: 7, [h.claim(mallory, key: malloryKey), give(6, 2)]),
        ])
        // The origin not derived from its claim's key has no valid claim: no key authenticates
        // its changes, so they are refused before they are judged (signed heads).
        #expect(try r.membershipCounts() == MembershipCounts(forged: 1, forgedHouseholds: 0, rejected: 0))
        #expect(try r.balance(of: ava) == 100 + 50 + 2)
        #expect(Membership.origin(household: h.id, member: malloryKey, nonce: 0)
            != Membership.origin(household: h.id, member: malloryKey, nonce: 1))
        #expect(Membership.origin(household: h.id, member: malloryKey, nonce: 0).rawValue & 1 == 1)
    }

    /// After the owner revoked Mallory (cut: her first change), her client keeps writing, and the
    /// spouse's laptop, which has not seen the revocation, relays: under a fresh origin nobody
    /// claimed, under a fresh origin of her own, under a throwaway key's origin, and under her
    /// old origin. Every one is rejected on both replicas, whichever order they learn things in.
    @Test("a revoked member's writes through a member that has not seen the revocation are rejected everywhere, identically")
    func revokedMemberWritesThroughARelay() throws {
        let unclaimed = ReplicaID(0x7777)
        let fresh = h.origin(malloryKey, nonce: 1)
        let throwaway = h.origin(throwawayKey)
        let revocation = h.change(owner, 4, millis: 6, [h.revoke(malloryKey, seen: [owner: 3, spouse: 1, mallory: 1])])
        let afterRevocation = [
            h.change(unclaimed, 1, millis: 7, [give(10, 1_000)]),
            h.change(fresh, 1, millis: 8, [h.claim(fresh, key: malloryKey), give(11, 2_000)]),
            h.change(throwaway, 1, millis: 9, [h.claim(throwaway, key: throwawayKey), give(12, 4_000)]),
            h.change(mallory, 2, millis: 10, [give(13, 8_000)]),
        ]
        // The spouse's laptop holds the household, takes Mallory's writes, then hears of the revocation.
        let spouseLaptop = try h.replica(2)
        try spouseLaptop.applySigned(household())
        try spouseLaptop.applySigned(afterRevocation)
        // Not yet revoked here: her own origins count, the unclaimed and the throwaway one don't.
        #expect(try spouseLaptop.balance(of: ava) == 150 + 2_000 + 8_000)
        try spouseLaptop.applySigned([revocation])
        // The owner's laptop has the revocation first, then everything the spouse's laptop relays.
        let ownerLaptop = try h.replica(3)
        try ownerLaptop.applySigned(household() + [revocation])
        try ownerLaptop.applyRemote(try spouseLaptop.batch(notCoveredBy: try ownerLaptop.versionVector()))
        for r in [spouseLaptop, ownerLaptop] {
            #expect(try r.balance(of: ava) == 150)
            // The unclaimed origin's change and the throwaway key's are refused, never stored
            // (issue 39: only members take space); her own two are stored and rejected.
            #expect(try r.membershipCounts() == MembershipCounts(forged: 0, forgedHouseholds: 0, rejected: 2))
            #expect(try r.versionVector()[throwaway] == nil && r.versionVector()[unclaimed] == nil)
            #expect(try r.verify().isIntact)
        }
        #expect(try spouseLaptop.digest() == ownerLaptop.digest())
        #expect(try spouseLaptop.versionVector() == ownerLaptop.versionVector())
    }

    /// The same log in twelve arrival orders: claims (Mallory's claim of the spouse's origin
    /// among them), grants (grandma's after her changes), and a revocation. On main, whether
    /// Mallory's claim came before or after the revocation decided the spouse's balance.
    @Test("the same changes in any order give the same digest and balances", arguments: UInt64(0)..<12)
    func claimsGrantsAndRevocationsInAnyOrder(seed: UInt64) throws {
        let grandma = h.origin(grandmaKey)
        let all = household() + [
            h.change(spouse, 2, millis: 6, [give(3, 200)]),
            h.change(spouse, 3, millis: 7, [h.claim(spouse, key: malloryKey)]),
            h.change(owner, 4, millis: 8, [h.revoke(malloryKey, seen: [owner: 3, spouse: 1, mallory: 1])]),
            h.change(grandma, 1, millis: 9, [h.claim(grandma, key: grandmaKey), give(4, 1_000)]),
            h.change(owner, 5, millis: 10, [h.grant(grandmaKey, name: "Grandma")]),
        ]
        let reference = try h.replica(100)
        // Grandma's change comes before her grant: refused, then offered again (as the next
        // session would) and taken (issue 39).
        #expect(try reference.applySigned(all).notAdmitted == 1)
        try reference.applySigned(all)
        #expect(try reference.balance(of: ava) == 100 + 50 + 200 + 1_000)
        var rng = SplitMix64(seed: seed)
        let r = try h.replica(seed)
        _ = try r.receiveShuffledWithRetry(all, using: &rng)
        #expect(try r.digest() == reference.digest())
        #expect(try r.balance(of: ava) == reference.balance(of: ava))
        #expect(try r.membershipCounts() == reference.membershipCounts())
        #expect(try r.verify().isIntact)
    }

    @Test("an ungranted key's changes are refused until its grant arrives, then count")
    func ungrantedUntilGranted() throws {
        let grandma = h.origin(grandmaKey)
        let hers = h.change(grandma, 1, millis: 6, [h.claim(grandma, key: grandmaKey), give(4, 1_000)])
        let r = try h.replica(1)
        // Not stored (issue 39: only members take space): her sender offers it again later.
        #expect(try r.applySigned(household() + [hers]).notAdmitted == 1)
        #expect(try r.balance(of: ava) == 150)
        #expect(try r.versionVector()[grandma] == nil)
        #expect(try r.membershipCounts().rejected == 0)
        try r.applySigned([h.change(owner, 4, millis: 7, [h.grant(grandmaKey, name: "Grandma")])])
        #expect(try r.applySigned([hers]).applied == 1)
        #expect(try r.balance(of: ava) == 1_150)
        #expect(try r.membershipCounts().rejected == 0)
        #expect(try r.members().first { $0.key == grandmaKey }?.devices == [grandma])
    }

    /// Through the replica's own local-change path: the device takes an origin derived from its
    /// signer's key before its first change in an owned household, and its claim names it.
    @Test("a device writes in an owned household under an origin derived from its key")
    func localChangesUseADerivedOrigin() throws {
        let r = try h.replica(7)
        r.signer = h.signer(h.spouseKey)
        let before = r.replicaID
        try r.applySigned(Array(household().prefix(2)))
        _ = try r.post("Ava", signedCents: 300, note: "chores", source: "give")
        #expect(r.replicaID != before)
        let claims = try r.changes(notCoveredBy: [:]).filter { $0.origin == r.replicaID }.flatMap(\.operations).compactMap {
            if case .claim(let c) = $0 { c } else { nil }
        }
        #expect(claims.count == 1)
        #expect(claims.first.map { Membership.origin(household: h.id, member: h.spouseKey, nonce: $0.nonce) } == r.replicaID)
        #expect(try r.balance(of: ava) == 300)
        #expect(try r.membershipCounts().rejected == 0)
    }

    /// A replica that joins receives the genesis, grants and revocations before the members'
    /// changes they judge, whatever the origins' order: the owner's origins are sent first.
    @Test("a sync sends the owner's origins first")
    func ownerOriginsFirst() throws {
        let early = (1..<256).lazy.map { h.origin(h.spouseKey, nonce: $0) }.first { $0 < owner && $0 != spouse }!
        let r = try h.replica(1)
        try r.applySigned(household() + [h.change(early, 1, millis: 6, [h.claim(early, key: h.spouseKey), give(7, 5)])])
        let sent = try r.encodedChanges(notCoveredBy: [:], limit: 2)
        #expect(sent.map(\.origin) == [owner, owner])
        let all = try r.encodedChanges(notCoveredBy: [:]).map(\.origin)
        #expect(Array(all.prefix(3)) == [owner, owner, owner] && Set(all.dropFirst(3)) == [early, spouse, mallory])
        let joined = try h.replica(2)
        try joined.applyRemote(try r.batch(notCoveredBy: [:]))
        #expect(try joined.digest() == r.digest() && joined.balance(of: ava) == 155)
    }
}

import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerTestSupport

/// A version vector (a revocation's cut, an owner transfer's `seen`) names sequences, not
/// versions: it covers an origin only below the lowest sequence where the origin forked. Without
/// that, a revoked member's modified client could write a new version of a change its revocation
/// saw, and a former owner's key a grant in a new version of a change the transfer saw, and have
/// them count (found in review, 2026-12-03).
@Suite("Forks below a revocation's cut or a transfer's seen")
struct RevokedForkTests {
    let rh = RecoverableHousehold()
    var h: OwnedHousehold { rh.h }
    var owner: ReplicaID { h.origin(h.ownerKey) }
    var spouse: ReplicaID { h.origin(h.spouseKey) }
    let ava = OwnedHousehold.ava

    /// The founding (the spouse gives 1.00 at sequence 1), the spouse's 0.01 at 2 and 0.02 at 3,
    /// and the owner's revocation of the spouse having seen both.
    func revokedSpouse() -> [Change] {
        h.founding(genesis: rh.genesis()) + [
            h.change(spouse, 2, millis: 20, [h.give(2_000, 1)]),
            h.change(spouse, 3, millis: 21, [h.give(2_001, 2)]),
            h.change(owner, 3, millis: 30, [h.revoke(h.spouseKey, seen: [spouse: 3])]),
        ]
    }

    @Test("a revoked member's new version of a change its revocation saw does not count, nor anything from there on, in either order")
    func aForkBelowTheCutCountsNowhere() throws {
        let r = try h.replica(1)
        try r.applySigned(revokedSpouse())
        #expect(try r.balance(of: ava) == 103)
        // Written after the revocation: another version of sequence 3.
        let fork = h.change(spouse, 3, millis: 40, [h.give(4_000, 1_000_000)])
        try r.applySigned([fork])
        // Sequence 2, below the fork, still counts; both versions of 3 do not.
        #expect(try r.balance(of: ava) == 101)
        #expect(try r.membershipCounts().rejected == 2)
        #expect(try r.verify().isIntact)

        // The fork before the revocation: the revocation's rebuild judges it alike.
        let forkFirst = try h.replica(2)
        for change in Array(revokedSpouse().dropLast()) + [fork, revokedSpouse().last!] { try forkFirst.applySigned([change]) }
        #expect(try forkFirst.digest() == r.digest())
        #expect(try forkFirst.verify().isIntact)
    }

    @Test("a member that is not revoked keeps both versions of a forked change")
    func aForkWithoutARevocationCounts() throws {
        let r = try h.replica(1)
        try r.applySigned(Array(revokedSpouse().dropLast()))
        try r.applySigned([h.change(spouse, 3, millis: 40, [h.give(4_000, 5)])])
        let balance = try r.balance(of: ava)
        #expect(balance == 108, "\(balance)")
        #expect(try r.membershipCounts().rejected == 0)
        #expect(try r.verify().isIntact)
    }

    @Test("a former owner's grant in a new version of a change the transfer saw is forged, in either order")
    func aFormerOwnersForkBelowTheTransferIsForged() throws {
        let mallory = rh.malloryKey, malloryOrigin = h.origin(rh.malloryKey)
        var mc = OriginClaim(origin: malloryOrigin, member: mallory, nonce: 0, signature: [])
        mc.signature = TestVerifier.sign(Membership.claimMessage(household: h.id, mc), key: mallory)
        let log = h.founding(genesis: rh.genesis()) + [
            h.change(owner, 3, millis: 10, [h.give(3_000, 7)]),
            // The recovery saw the owner's origin up to 3; the spouse is the owner from then on.
            h.change(spouse, 2, millis: 20, [rh.transfer(to: h.spouseKey, epoch: 1, seen: [owner: 3, spouse: 1])]),
            h.change(malloryOrigin, 1, millis: 50, [.claim(mc), h.give(5_000, 1_000_000)]),
        ]
        // The stolen old owner key writes another version of its change 3, granting Mallory.
        let fork = h.change(owner, 3, millis: 40, [h.grant(mallory, name: "Mallory")])
        let r = try h.replica(1)
        try r.applySigned(log)
        #expect(try r.balance(of: ava) == 107)
        try r.applySigned([fork])
        #expect(try !r.members().contains { $0.key == mallory })
        #expect(try r.balance(of: ava) < 1_000_000)
        #expect(try r.membershipCounts().forged == 1)
        #expect(try r.verify().isIntact)

        // The fork before the transfer and Mallory's change.
        let forkFirst = try h.replica(2)
        for change in Array(log.prefix(4)) + [fork] + Array(log.dropFirst(4)) { try forkFirst.applySigned([change]) }
        #expect(try forkFirst.digest() == r.digest())
        #expect(try forkFirst.verify().isIntact)
    }

    @Test("a version of a member's first change without its claim, sent before it, is judged again when the claim arrives")
    func aClaimlessFirstVersionIsJudgedAgainWithTheClaim() throws {
        let founding = h.founding(genesis: rh.genesis())
        // A version of the spouse's first change without its claim, whose version hash sorts
        // before the real one's, so a sync from empty sends it first.
        let real = Keys.version(RecordCodec.encode(founding[2]))
        let claimless = (0..<64).lazy.map { self.h.change(self.spouse, 1, millis: 50 + $0, [self.h.give(4_000, 5)]) }
            .first { Keys.version(RecordCodec.encode($0)).lexicographicallyPrecedes(real) }!
        let a = try h.replica(1)
        try a.applySigned(founding)
        let previous = Replica.zeroLink
        let link = Replica.chainLink(after: previous, onlyVersion: Keys.version(RecordCodec.encode(claimless)))
        let message = Membership.headMessage(household: h.id, origin: spouse, sequence: 1, chain: link)
        _ = try a.applyRemote([claimless], heads: [SignedHead(origin: spouse, sequence: 1, signature: TestVerifier.sign(message, key: h.spouseKey))])
        // The spouse is granted and not revoked: both versions count.
        #expect(try a.balance(of: ava) == 105)
        #expect(try a.verify().isIntact)

        let b = try h.replica(2)
        for _ in 0..<100 {
            let batch = try a.batch(notCoveredBy: try b.versionVector())
            if batch.changes.isEmpty { break }
            #expect(try b.applyRemote(batch).unauthenticated == 0)
        }
        // Since issue 39 the claimless version, sent first, is refused at first (no member's claim
        // opens the origin), the real one taken, and the claimless one offered once more after the
        // batch: taken as another version of a claimed origin, in the same batch.
        #expect(try b.chains(at: b.versionVector()) == a.chains(at: a.versionVector()))
        #expect(try b.digest() == a.digest())
        #expect(try b.membershipCounts() == a.membershipCounts())
        #expect(try b.verify().isIntact)
    }
}

import KidLedgerDomain
import KidLedgerSimulation
import Testing
@testable import KidLedgerReplica

/// Issue 21, point 2: a member that claims more than ``Limits/originsPerMemberMax`` origins is
/// refused, not the household: every ledger change it made is rejected on every replica, in any
/// arrival order, and the others' changes count.
@Suite("Origins and children per member")
struct OriginLimitTests {
    let h = OwnedHousehold()
    var owner: ReplicaID { h.origin(h.ownerKey) }

    /// The spouse's first change under its origin with `nonce`: its claim and a give of one cent.
    func spouseOrigin(_ nonce: UInt64) -> Change {
        let origin = h.origin(h.spouseKey, nonce: nonce)
        var c = OriginClaim(origin: origin, member: h.spouseKey, nonce: nonce, signature: [])
        c.signature = TestVerifier.sign(Membership.claimMessage(household: h.id, c), key: h.spouseKey)
        return h.change(origin, 1, millis: 10 + Int64(nonce), [.claim(c), h.give(1_000 + nonce, 1)])
    }

    /// The founding (the spouse's origin with nonce 0 gives 1.00), the spouse's origins with
    /// nonces 1 to `last`, and a give of 5.00 by the owner.
    func log(lastNonce last: UInt64) -> [Change] {
        h.founding() + (1...last).map(spouseOrigin) + [h.change(owner, 3, millis: 5, [h.give(2, 500)])]
    }

    @Test func aMemberAtTheLimitCounts() throws {
        let r = try h.replica(1)
        try r.applySigned(log(lastNonce: UInt64(Limits.originsPerMemberMax) - 1))
        #expect(try r.balance(of: OwnedHousehold.ava) == 500 + 100 + Int128(Limits.originsPerMemberMax - 1))
        #expect(try r.membershipCounts().rejected == 0)
    }

    @Test(arguments: UInt64(0)..<4)
    func aMemberOverTheLimitIsRejectedWholeInEveryOrder(seed: UInt64) throws {
        let all = log(lastNonce: UInt64(Limits.originsPerMemberMax))
        let reference = try h.replica(100)
        try reference.applySigned(all)
        // Only the owner's give counts: the spouse's 257 gives (its first one too) are rejected.
        #expect(try reference.balance(of: OwnedHousehold.ava) == 500)
        #expect(try reference.membershipCounts().rejected == Limits.originsPerMemberMax + 1)
        #expect(try reference.verify().isIntact)
        #expect(try reference.members().first { $0.key == h.spouseKey }?.devices.count == Limits.originsPerMemberMax + 1)

        var rng = SplitMix64(seed: seed)
        let r = try h.replica(seed)
        _ = try r.receiveShuffledWithRetry(all, using: &rng)
        #expect(try r.digest() == reference.digest())
        #expect(try r.balance(of: OwnedHousehold.ava) == 500)
        #expect(try r.verify().isIntact)

        // In two batches, the one over the limit last: what counted before is rejected now.
        let late = try h.replica(200)
        try late.applySigned(Array(all.dropLast(2)) + [all.last!])
        #expect(try late.balance(of: OwnedHousehold.ava) == 500 + 100 + Int128(Limits.originsPerMemberMax - 1))
        try late.applySigned([all[all.count - 2]])
        #expect(try late.digest() == reference.digest())
        #expect(try late.balance(of: OwnedHousehold.ava) == 500)
    }

    /// The spouse's change at `sequence` creating `count` children (ids from `first`).
    func spouseChildren(_ sequence: UInt64, first: UInt64, count: Int) -> Change {
        h.change(h.origin(h.spouseKey), sequence, millis: 20 + Int64(sequence), (0..<UInt64(count)).map { i in
            .createChild(ChildRecord(id: RecordID(high: 0xC0, low: first + i), createdAtMillis: 20))
        })
    }

    @Test(arguments: UInt64(0)..<4)
    func aMemberCreatingMoreChildrenThanTheLimitIsRejectedWhole(seed: UInt64) throws {
        let atLimit = h.founding() + [spouseChildren(2, first: 0, count: Limits.childrenPerMemberMax),
                                      h.change(owner, 3, millis: 5, [h.give(2, 500)])]
        let r = try h.replica(1)
        try r.applySigned(atLimit)
        #expect(try r.children().count == 1 + Limits.childrenPerMemberMax)
        #expect(try r.balance(of: OwnedHousehold.ava) == 600)

        // One more child (an id created before does not count twice): every change of the
        // spouse is rejected, its children and its give with it; the owner's stay.
        let all = atLimit + [spouseChildren(3, first: 5, count: 1), spouseChildren(4, first: UInt64(Limits.childrenPerMemberMax), count: 1)]
        try r.applySigned(Array(all.suffix(2)))
        #expect(try r.children().map(\.id) == [OwnedHousehold.ava])
        #expect(try r.balance(of: OwnedHousehold.ava) == 500)
        #expect(try r.membershipCounts().rejected == 4)
        #expect(try r.verify().isIntact)

        var rng = SplitMix64(seed: seed)
        let shuffled = try h.replica(seed + 10)
        _ = try shuffled.receiveShuffledWithRetry(all, using: &rng)
        #expect(try shuffled.digest() == r.digest())
        #expect(try shuffled.verify().isIntact)
    }
}

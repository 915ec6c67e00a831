import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerTestSupport

/// Hostile seed 302242: a refused laptop records the revocation it learns as a copy in a change of
/// its own origin. A recovery whose transfer saw the owner's revocation, but not that copy, ends
/// the signer's term before the copy: the copy is void there, while every judge holds the owner's
/// change and keeps refusing. The refusal now places the revocation in the owner's log
/// (``RevocationPlacement``) and the laptop judges it there (``Replica/isRevokedHere(_:)``).
@Suite("Revocations a refusal places in the owner's log")
struct PlacedRevocationTests {
    let rh = RecoverableHousehold()
    var h: OwnedHousehold { rh.h }
    var owner: ReplicaID { h.origin(h.ownerKey) }
    var spouse: ReplicaID { h.origin(h.spouseKey) }
    var newLaptop: ReplicaID { h.origin(rh.newKey) }

    func start() -> [Change] { h.founding(genesis: rh.genesis()) }

    /// The owner revokes the spouse in its third change.
    var revocation: Change { h.change(owner, 3, millis: 10, [h.revoke(h.spouseKey, seen: [owner: 2, spouse: 1])]) }

    /// A recovery by a new laptop whose transfer saw the owner's changes through `ownerSeen`.
    func recovery(ownerSeen: UInt64) -> Change {
        h.change(newLaptop, 1, millis: 12, [h.claim(newLaptop, key: rh.newKey),
                                            rh.transfer(to: rh.newKey, epoch: 1, seen: [owner: ownerSeen, spouse: 1])])
    }

    /// `evidence` without its placement (what a refusal without one carries).
    func unplaced(_ evidence: [UInt8]) throws -> [UInt8] {
        guard case .success(let e) = Replica.decodeEvidence(evidence, of: h.spouseKey) else { throw LedgerError.invalid("evidence") }
        #expect(e.placement != nil)
        return e.transfers.flatMap { RecordCodec.encodeOperation(.transferOwner($0)) } + RecordCodec.encodeOperation(.revoke(e.revocation))
    }

    @Test func aPlacementKeptWithTheCopyHoldsAfterARecoveryVoidsTheCopy() throws {
        let judge = try h.replica(1)
        try judge.applySigned(start() + [revocation])
        let evidence = try #require(try judge.revocation(of: h.spouseKey))
        let laptop = try h.replica(2)
        try laptop.applySigned(start())
        #expect(try laptop.learnRevocation(evidence, of: h.spouseKey) == .recorded)
        #expect(try laptop.isRevokedHere(h.spouseKey))
        // A laptop that holds neither revocation brings the recovery: the copy is void here (its
        // change is not one the transfer saw), the owner's change it was placed in is.
        try laptop.applySigned([recovery(ownerSeen: 3)])
        #expect(try laptop.ownership()?.owner == rh.newKey)
        #expect(try laptop.revocation(of: h.spouseKey) == nil)
        #expect(try laptop.isRevokedHere(h.spouseKey))
        #expect(try laptop.verify().isIntact)
    }

    @Test func aRefusalWithAPlacementStopsTheLaptopWhoseCopyARecoveryVoided() throws {
        let judge = try h.replica(1)
        try judge.applySigned(start() + [revocation])
        let laptop = try h.replica(2)
        try laptop.applySigned(start())
        // The first refusal came without a placement (from a judge that could not build one).
        #expect(try laptop.learnRevocation(try unplaced(try #require(try judge.revocation(of: h.spouseKey))), of: h.spouseKey) == .recorded)
        try laptop.applySigned([recovery(ownerSeen: 3)])
        #expect(try !laptop.isRevokedHere(h.spouseKey))
        // The judge hears of the recovery; it still holds the revocation (the transfer saw it).
        try judge.applySigned([recovery(ownerSeen: 3)])
        let evidence = try #require(try judge.revocation(of: h.spouseKey))
        // Before: void here, answered with the transfer the judge holds, for ever.
        #expect(try laptop.learnRevocation(try unplaced(evidence), of: h.spouseKey) == .void)
        #expect(try laptop.transfersVoiding(evidence, of: h.spouseKey) == nil)
        let digest = try laptop.digest()
        #expect(try laptop.learnRevocation(evidence, of: h.spouseKey) == .placed)
        #expect(try laptop.isRevokedHere(h.spouseKey))
        #expect(try laptop.digest() == digest)  // device state only
        #expect(try laptop.learnRevocation(evidence, of: h.spouseKey) == .alreadyKnown)
        #expect(try laptop.device.setting(Replica.forgedRefusalsSetting) == nil)
    }

    /// The judge holds heads only at the end of the owner's batch: the placement names the
    /// versions between the revocation's change and that head.
    @Test func aPlacementReachesAHeadLaterInTheOwnersLog() throws {
        let owner = try h.replica(1)
        try owner.applySigned(start() + [revocation, h.change(self.owner, 4, millis: 11, [h.give(2, 200)]),
                                         h.change(self.owner, 5, millis: 12, [h.give(3, 300)])])
        let judge = try h.replica(3)
        try judge.applyRemote(try owner.batch(notCoveredBy: [:]))
        #expect(try judge.signedHeads(of: self.owner).map(\.sequence) == [5])
        let evidence = try #require(try judge.revocation(of: h.spouseKey))
        guard case .success(let e) = Replica.decodeEvidence(evidence, of: h.spouseKey) else { Issue.record("evidence"); return }
        #expect(e.placement?.laterVersions.count == 2)
        let laptop = try h.replica(2)
        try laptop.applySigned(start() + [recovery(ownerSeen: 5)])
        #expect(try laptop.learnRevocation(evidence, of: h.spouseKey) == .placed)
        #expect(try laptop.isRevokedHere(h.spouseKey))
    }

    /// The placement does not bend the rule: a transfer that had not seen the owner's change
    /// voids the revocation, placed or not, and the laptop answers with it.
    @Test func aPlacementAfterTheTransfersSeenIsVoid() throws {
        let judge = try h.replica(1)
        try judge.applySigned(start() + [revocation])
        let evidence = try #require(try judge.revocation(of: h.spouseKey))
        let laptop = try h.replica(2)
        try laptop.applySigned(start() + [recovery(ownerSeen: 2)])
        #expect(try laptop.learnRevocation(evidence, of: h.spouseKey) == .void)
        #expect(try !laptop.isRevokedHere(h.spouseKey))
        #expect(try laptop.transfersVoiding(evidence, of: h.spouseKey) != nil)
    }

    /// A placement whose head does not verify, or that moves the change to another sequence,
    /// proves nothing.
    @Test func aTamperedPlacementProvesNothing() throws {
        let judge = try h.replica(1)
        try judge.applySigned(start() + [revocation])
        let evidence = try #require(try judge.revocation(of: h.spouseKey))
        guard case .success(let e) = Replica.decodeEvidence(evidence, of: h.spouseKey), let placement = e.placement else {
            Issue.record("no placement"); return
        }
        var badHead = placement
        badHead.headSignature[0] ^= 1
        var moved = placement
        var change = try RecordCodec.decodeChange(placement.change)
        change.sequence = 2
        moved.change = RecordCodec.encode(change)
        var badChain = placement
        badChain.chainBefore[0] ^= 1
        for tampered in [badHead, moved, badChain] {
            let laptop = try h.replica(2)
            try laptop.applySigned(start() + [recovery(ownerSeen: 3)])
            let forged = try unplaced(evidence) + tampered.encoded()
            #expect(try laptop.learnRevocation(forged, of: h.spouseKey) == .void)
            #expect(try !laptop.isRevokedHere(h.spouseKey))
        }
    }

    /// A stolen former owner key writes a new version of its origin's third change, revoking the
    /// spouse there, below what the recovery saw: a laptop that holds the real third change
    /// refutes the placement (another version at that sequence is a fork there).
    @Test func aPlacementOnAForkedVersionIsRefutedByTheRealOne() throws {
        let judge = try h.replica(1)
        try judge.applySigned(start() + [revocation])
        let evidence = try #require(try judge.revocation(of: h.spouseKey))
        let laptop = try h.replica(2)
        try laptop.applySigned(start() + [h.change(owner, 3, millis: 10, [h.give(2, 200)]), recovery(ownerSeen: 3)])
        #expect(try laptop.learnRevocation(evidence, of: h.spouseKey) == .void)
        #expect(try !laptop.isRevokedHere(h.spouseKey))
    }

    @Test func evidenceWithAPlacementFitsTheRefusalFrame() throws {
        let judge = try h.replica(1)
        try judge.applySigned(start() + [revocation, recovery(ownerSeen: 3)])
        let evidence = try #require(try judge.revocation(of: h.spouseKey))
        #expect(evidence.count <= Replica.evidenceBytesMax)
        guard case .success(let e) = Replica.decodeEvidence(evidence, of: h.spouseKey) else { Issue.record("evidence"); return }
        #expect(e.transfers.count == 1 && e.placement != nil)
        // A placement anywhere but last, or twice, is not evidence.
        let placement = try #require(e.placement).encoded()
        let revoke = RecordCodec.encodeOperation(.revoke(e.revocation))
        for bad in [placement + revoke, revoke + placement + placement] {
            guard case .failure = Replica.decodeEvidence(bad, of: h.spouseKey) else { Issue.record("decoded"); continue }
        }
    }
}

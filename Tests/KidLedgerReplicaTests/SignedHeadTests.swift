import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerInMemory
import KidLedgerTestSupport

/// Issue 20, points 2 and 9: signed chain heads. A member's replica signs its origin's hash chain
/// at the last change of each commit and at every multiple of ``Membership/headInterval``; a
/// receiver applies a change of an owned household only when a head of its origin's member reaches
/// it, and passes the heads it verified on (docs/SECURITY.md, "Signed chain heads").
@Suite("Signed chain heads")
struct SignedHeadTests {
    let h = OwnedHousehold()

    func ownerReplica(_ seed: UInt64 = 1) throws -> Replica {
        let r = try h.replica(seed)
        r.signer = h.signer(h.ownerKey)
        try r.createHousehold(name: "Home", owner: h.ownerKey, salt: h.salt) { TestVerifier.sign($0, key: h.ownerKey) }
        return r
    }

    /// A second replica holding everything `from` holds, through batches of at most `limit`.
    func copy(of from: Replica, seed: UInt64 = 7, limit: Int = .max) throws -> Replica {
        let to = try h.replica(seed)
        try to.pinHousehold(h.id, owner: h.ownerKey)
        try sync(from, to, limit: limit)
        return to
    }

    /// Batches from `from` to `to` until `to` holds what `from` does (bounded).
    func sync(_ from: Replica, _ to: Replica, limit: Int = .max) throws {
        for _ in 0..<1_000 {
            let batch = try from.batch(notCoveredBy: try to.versionVector(), limit: limit)
            if batch.changes.isEmpty { return }
            let report = try to.applyRemote(batch)
            #expect(report.unauthenticated == 0)
        }
        Issue.record("sync did not finish")
    }

    /// `key`'s signed head over `origin`'s chain at `sequence` once `change` (that sequence) is
    /// added to what `r` holds.
    func forgedHead(_ change: Change, after r: Replica, key: [UInt8]) throws -> SignedHead {
        let previous = try r.chain(change.origin, at: change.sequence - 1) ?? Replica.zeroLink
        let chain = Replica.chainLink(after: previous, onlyVersion: Keys.version(RecordCodec.encode(change)))
        let message = Membership.headMessage(household: h.id, origin: change.origin, sequence: change.sequence, chain: chain)
        return SignedHead(origin: change.origin, sequence: change.sequence, signature: TestVerifier.sign(message, key: key))
    }

    @Test("each commit's last change and every 256th sequence get a head over the chain, which only the owner's key verifies")
    func headsAtCommitsAndIntervals() throws {
        let r = try ownerReplica()
        let ava = try r.addChild(name: "Ava")
        let origin = r.replicaID
        #expect(try r.signedHeads(of: origin).map(\.sequence) == [1, 2])
        try r.postBatch((0..<600).map { Replica.Draft(childID: ava.id, signedCents: Int64($0 + 1), note: "") }, source: "give")
        #expect(try r.versionVector()[origin] == 602)
        let heads = try r.signedHeads(of: origin)
        #expect(heads.map(\.sequence) == [1, 2, 256, 512, 602])
        for head in heads {
            let chain = try #require(try r.chain(origin, at: head.sequence))
            #expect(Membership.isValid(head, chain: chain, household: h.id, key: h.ownerKey, verifier: TestVerifier()))
            #expect(!Membership.isValid(head, chain: chain, household: h.id, key: h.spouseKey, verifier: TestVerifier()))
            var moved = head
            moved.sequence += 1
            #expect(!Membership.isValid(moved, chain: chain, household: h.id, key: h.ownerKey, verifier: TestVerifier()))
        }
        #expect(try r.verify().isIntact)
    }

    @Test("verify reports a stored head that is not its member's signature over its branch")
    func verifyChecksHeads() throws {
        let r = try ownerReplica()
        try r.addChild(name: "Ava")
        let origin = r.replicaID
        let key = try #require(try r.store.read { r in
            var first: [UInt8]?
            try r.scan(Tables.heads) { key, _ in first = key; return false }
            return first
        })
        try r.store.write { try $0.put(Tables.heads, key, TestVerifier.sign([1, 2, 3], key: h.ownerKey)) }
        let report = try r.verify()
        #expect(report.problems == ["signed head of \(origin) at 1 is not its member's signature over its branch"])
    }

    @Test("a household without an owner needs no heads; an owned one's changes without them are refused, with them applied and their heads kept")
    func headsAreRequiredInOwnedHouseholds() throws {
        let plain = try h.replica(2)
        plain.signer = h.signer(h.spouseKey)
        try plain.createHousehold(name: "Plain")
        try plain.addChild(name: "Ava")
        #expect(try plain.signedHeads(of: plain.replicaID).isEmpty)
        let plainCopy = try h.replica(4)
        #expect(try plainCopy.applyRemote(try plain.changes(notCoveredBy: [:])).applied == 2)

        let r = try ownerReplica()
        try r.addChild(name: "Ava")
        let bare = try h.replica(3)
        try bare.pinHousehold(h.id, owner: h.ownerKey)
        let refused = try bare.applyRemote(try r.changes(notCoveredBy: [:]))
        #expect(refused.unauthenticated == 2 && refused.applied == 0)
        #expect(try bare.versionVector().isEmpty)

        let copy = try copy(of: r)
        #expect(try copy.versionVector() == r.versionVector())
        #expect(try copy.digest() == r.digest())
        #expect(try copy.signedHeads(of: r.replicaID).map(\.sequence) == [2])
        #expect(try copy.verify().isIntact)
    }

    @Test("a relay passes the heads on: a third replica syncs 600 changes through it in batches of 100")
    func relaysPassHeadsOn() throws {
        let r = try ownerReplica()
        let ava = try r.addChild(name: "Ava")
        try r.postBatch((0..<600).map { Replica.Draft(childID: ava.id, signedCents: Int64($0 + 1), note: "") }, source: "give")
        let relay = try copy(of: r, limit: 300)
        let third = try copy(of: relay, seed: 9, limit: 100)
        #expect(try third.versionVector() == r.versionVector())
        #expect(try third.digest() == r.digest())
        // Every 256th sequence and the end of every batch it received.
        #expect(try third.signedHeads(of: r.replicaID).map(\.sequence).filter { $0 % 256 == 0 } == [256, 512])
        #expect(try third.verify().isIntact)
    }

    @Test("a member's change forged under the owner's origin at an unused sequence is refused on every replica, with or without a head of its own")
    func forgedUnderAnothersOrigin() throws {
        let r = try ownerReplica()
        try r.addChild(name: "Ava")
        let laptops = [try copy(of: r, seed: 3), try copy(of: r, seed: 5)]
        let origin = r.replicaID
        let held = try #require(try r.versionVector()[origin])
        let forged = h.change(origin, held + 1, millis: 50, [h.give(9, 100_000)])
        for laptop in laptops {
            let digest = try laptop.digest()
            let unsigned = try laptop.applyRemote([forged])
            let selfSigned = try laptop.applyRemote([forged], heads: [try forgedHead(forged, after: laptop, key: h.spouseKey)])
            #expect(unsigned.unauthenticated == 1 && selfSigned.unauthenticated == 1)
            #expect(unsigned.applied == 0 && selfSigned.applied == 0)
            #expect(try laptop.digest() == digest)
            #expect(try laptop.versionVector()[origin] == held)
            #expect(try laptop.verify().isIntact)
        }
        // The owner's own head over it would do: only the owner's key makes one.
        let owned = try laptops[0].applyRemote([forged], heads: [try forgedHead(forged, after: laptops[0], key: h.ownerKey)])
        #expect(owned.applied == 1)
    }

    @Test("a relay that alters a change it passes on is refused; the rest of its batch applies")
    func alteredByARelay() throws {
        let r = try ownerReplica()
        try r.addChild(name: "Ava")
        let spouse = try h.replica(11)
        try spouse.pinHousehold(h.id, owner: h.ownerKey)
        spouse.signer = h.signer(h.spouseKey)
        try sync(r, spouse)
        let target = try copy(of: r, seed: 13)
        // The spouse's own first change (a claim); then the owner's next one, altered on the way.
        try r.commitMembership([h.grant(h.spouseKey, name: "Dad")])
        let ava = try #require(try r.children().first)
        _ = try r.post("Ava", signedCents: 125, note: "chores", source: "give")
        let honest = try r.batch(notCoveredBy: try target.versionVector())
        var altered = honest.changes
        let last = altered.count - 1
        guard case .addTransaction(var t) = altered[last].operations[0] else { Issue.record("not a give"); return }
        t.amountCents = 125_000
        altered[last].operations[0] = .addTransaction(t)
        let report = try target.applyRemote(altered, heads: honest.heads)
        #expect(report.unauthenticated == altered.count && report.applied == 0)
        #expect(try target.balance(of: ava.id) == 0)
        #expect(try target.applyRemote(honest).applied == honest.changes.count)
        #expect(try target.balance(of: ava.id) == 125)
    }

    @Test("a member's version of an older change of another origin (below its head), signed by itself, is refused and the origin's own change kept")
    func forgedOlderVersionUnderAnothersOrigin() throws {
        let r = try ownerReplica()
        for name in ["Ava", "Ben", "Cleo"] { try r.addChild(name: name) }
        let laptop = try copy(of: r, seed: 3)
        let origin = r.replicaID
        let held = try #require(try r.versionVector()[origin])
        let before = try r.digest()
        for sequence in [held - 1, held - 2] {
            let forged = h.change(origin, sequence, millis: 60, [h.give(UInt64(sequence) + 70, 100_000)])
            for target in [r, laptop] {
                let report = try target.applyRemote([forged], heads: [try forgedHead(forged, after: target, key: h.spouseKey)])
                #expect(report.unauthenticated == 1 && report.applied == 0 && !report.rotatedReplicaID)
                #expect(try target.digest() == before)
                #expect(try target.verify().isIntact)
            }
        }
        #expect(r.replicaID == origin)
    }

    @Test("a change forged under this device's own origin makes it take no new replica id")
    func forgedOwnOriginDoesNotRotate() throws {
        let r = try ownerReplica()
        try r.addChild(name: "Ava")
        let me = r.replicaID
        let held = try #require(try r.versionVector()[me])
        for sequence in [held, held + 1] {  // another version of a held change, and a later one
            let forged = h.change(me, sequence, millis: 77, [h.give(UInt64(sequence) + 40, 1)])
            let report = try r.applyRemote([forged], heads: [try forgedHead(forged, after: r, key: h.spouseKey)])
            #expect(report.unauthenticated == 1 && !report.rotatedReplicaID)
            #expect(r.replicaID == me)
        }
        #expect(try r.verify().isIntact)
    }
    /// Issue 21 (hostile seed 933): a replica holding two versions at a sequence (a restore from a
    /// stale copy) must hand the origin whole to a replica that syncs from empty, however the sync
    /// cuts it into batches. Before, a batch could end at one version's head with the other
    /// version unreached, and the receiver refused the whole origin on every try.
    @Test("a forked origin reaches an empty replica whole in batches of any size, each authenticated", arguments: [1, 2, 3, 4, 6, 100])
    func forkedOriginSyncsFromEmpty(limit: Int) throws {
        let store = MemoryStore()
        let r = try Replica(store: store, clock: FixedClock(millis: 1_000_000), random: SplitMix64(seed: 1), verifier: TestVerifier())
        r.signer = h.signer(h.ownerKey)
        try r.createHousehold(name: "Home", owner: h.ownerKey, salt: h.salt) { TestVerifier.sign($0, key: h.ownerKey) }
        try r.addChild(name: "Ava")
        for cents in [1, 2] as [Int64] { try r.post("Ava", signedCents: cents, note: "", source: "give") }
        let snapshot = store.clone()
        for cents in [10, 11, 12] as [Int64] { try r.post("Ava", signedCents: cents, note: "", source: "give") }
        let origin = r.replicaID
        let holder = try copy(of: r)
        let restored = try Replica(store: snapshot, clock: FixedClock(millis: 2_000_000), random: SplitMix64(seed: 99),
                                   verifier: TestVerifier())
        restored.signer = h.signer(h.ownerKey)
        for cents in [20, 21] as [Int64] { try restored.post("Ava", signedCents: cents, note: "", source: "give") }
        // The restored copy's versions of sequences 5 and 6 reach the holder, which now holds both.
        let forked = try holder.applyRemote(try restored.batch(notCoveredBy: [origin: 4]))
        #expect(forked.forkedVersions == 2 && forked.unauthenticated == 0)
        #expect(try holder.counts().changes == 9)

        // An empty replica takes the holder's log in the smallest batches a session would send:
        // each ends at the first change of the queue that may end one.
        let fresh = try h.replica(5)
        try fresh.pinHousehold(h.id, owner: h.ownerKey)
        var batches = 0
        while batches < 100 {
            let queue = try holder.encodedChanges(notCoveredBy: try fresh.versionVector(), limit: limit)
            guard let end = queue.firstIndex(where: { $0.mayEndBatch }) else { break }
            let batch = queue[...end]
            let report = try fresh.applyRemote(try batch.map { try RecordCodec.decodeChange($0.bytes) }, heads: SignedHead.sent(with: batch))
            #expect(report.unauthenticated == 0, "batch \(batches): \(batch.map { "\($0.sequence)" })")
            batches += 1
        }
        #expect(try fresh.versionVector() == holder.versionVector())
        #expect(try fresh.counts().changes == holder.counts().changes)
        #expect(try fresh.digest() == holder.digest())
        #expect(try fresh.verify().isIntact)
    }
}

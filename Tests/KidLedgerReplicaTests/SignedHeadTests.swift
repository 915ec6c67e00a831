import KidLedgerDomain
import Testing
@testable import KidLedgerReplica

/// Issue 20, point 2, the author's side of signed chain heads: a member's replica signs its
/// origin's head at the last change of each commit and at every multiple of
/// ``Membership/headInterval``, and keeps the signatures beside its log (docs/SECURITY.md).
@Suite("Signed chain heads, the author's side")
struct SignedHeadTests {
    let h = OwnedHousehold()

    func ownerReplica() throws -> Replica {
        let r = try h.replica(1)
        r.signer = h.signer(h.ownerKey)
        try r.createHousehold(name: "Home", owner: h.ownerKey, salt: h.salt) { TestVerifier.sign($0, key: h.ownerKey) }
        return r
    }

    /// Whether every head `r` holds for `origin` is the owner's signature over the change the log
    /// holds at its sequence.
    func headsVerify(_ r: Replica, _ origin: ReplicaID) throws -> Bool {
        let log = Dictionary(uniqueKeysWithValues: try r.encodedChanges(notCoveredBy: [:]).filter { $0.origin == origin }
            .map { ($0.sequence, $0.bytes) })
        return try r.signedHeads(of: origin).allSatisfy { head in
            Membership.isValid(head, of: log[head.sequence] ?? [], household: h.id, key: h.ownerKey, verifier: TestVerifier())
        }
    }

    @Test("each commit's last change and every 256th sequence get a head the owner's key verifies")
    func headsAtCommitsAndIntervals() throws {
        let r = try ownerReplica()
        let ava = try r.addChild(name: "Ava")
        let origin = r.replicaID
        #expect(try r.signedHeads(of: origin).map(\.sequence) == [1, 2])
        try r.postBatch((0..<600).map { Replica.Draft(childID: ava.id, signedCents: Int64($0 + 1), note: "") }, source: "give")
        #expect(try r.versionVector()[origin] == 602)
        #expect(try r.signedHeads(of: origin).map(\.sequence) == [1, 2, 256, 512, 602])
        #expect(try headsVerify(r, origin))
        // A head names one change: over any other bytes, or checked with another key, it fails.
        let head = try #require(try r.signedHeads(of: origin).last)
        let other = try #require(try r.encodedChanges(notCoveredBy: [origin: 600]).first)
        #expect(!Membership.isValid(head, of: other.bytes, household: h.id, key: h.ownerKey, verifier: TestVerifier()))
        let last = try #require(try r.encodedChanges(notCoveredBy: [origin: 601]).first)
        #expect(Membership.isValid(head, of: last.bytes, household: h.id, key: h.ownerKey, verifier: TestVerifier()))
        #expect(!Membership.isValid(head, of: last.bytes, household: h.id, key: h.spouseKey, verifier: TestVerifier()))
        var moved = head
        moved.sequence += 1
        #expect(!Membership.isValid(moved, of: last.bytes, household: h.id, key: h.ownerKey, verifier: TestVerifier()))
        #expect(try r.verify().isIntact)
    }

    @Test("verify reports a stored head that is not its member's signature over its change")
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
        #expect(report.problems == ["signed head of \(origin) at 1 is not its member's signature over that change"])
    }

    @Test("a household without an owner signs no heads, and a receiver stores none it did not verify")
    func noHeadsWithoutOwnerOrForOthers() throws {
        let plain = try h.replica(2)
        plain.signer = h.signer(h.spouseKey)
        try plain.createHousehold(name: "Plain")
        try plain.addChild(name: "Ava")
        #expect(try plain.signedHeads(of: plain.replicaID).isEmpty)

        let r = try ownerReplica()
        try r.addChild(name: "Ava")
        let copy = try h.replica(3)
        try copy.applyRemote(try r.changes(notCoveredBy: [:]))
        #expect(try copy.versionVector() == r.versionVector())
        #expect(try copy.signedHeads(of: r.replicaID).isEmpty)
    }
}

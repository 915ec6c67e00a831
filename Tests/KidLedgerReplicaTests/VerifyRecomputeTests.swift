import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerInMemory
import KidLedgerTestSupport

/// `verify` recomputes the membership, the rejection and forged sets and the digest from the
/// change log and compares them with the stored state.
@Suite("verify recomputes the state from the log")
struct VerifyRecomputeTests {
    let rh = RecoverableHousehold()
    var h: OwnedHousehold { rh.h }
    var owner: ReplicaID { h.origin(h.ownerKey) }
    var spouse: ReplicaID { h.origin(h.spouseKey) }
    let ava = OwnedHousehold.ava

    func give(_ id: UInt64, _ cents: Int64) -> Operation { h.give(id, cents) }

    /// A replica with a transfer, a revocation, a rejected change and a forged grant.
    func busy() throws -> Replica {
        let r = try h.replica(1)
        try r.applySigned([
            h.change(owner, 1, millis: 1, [rh.genesis(), h.claim(owner, key: h.ownerKey),
                                           .createChild(ChildRecord(id: ava, createdAtMillis: 1))]),
            h.change(owner, 2, millis: 2, [h.grant(h.spouseKey, name: "Dad")]),
            h.change(spouse, 1, millis: 3, [h.claim(spouse, key: h.spouseKey), give(1, 100)]),
            h.change(spouse, 2, millis: 4, [rh.transfer(to: h.spouseKey, epoch: 1, seen: [owner: 2, spouse: 1])]),
            h.change(spouse, 3, millis: 5, [h.revoke(h.ownerKey, seen: [owner: 2, spouse: 2], signer: h.spouseKey)]),
            h.change(owner, 3, millis: 6, [give(2, 200)]),                                  // rejected
            h.change(owner, 4, millis: 7, [h.grant(rh.malloryKey, name: "Mallory")]),      // forged (membership only: not rejected)
        ])
        return r
    }

    @Test func aHealthyStorePassesAndIsLeftUnchanged() throws {
        let r = try busy()
        let store = r.store as! MemoryStore
        let before = store.clone()
        let report = try r.verify()
        #expect(report.isIntact, "\(report.problems)")
        #expect(report.rejected == 1 && report.forged == 1)
        #expect(store.hasSameEntries(as: before, in: Tables.all))
    }

    @Test func aPlantedRejectedEntryIsFound() throws {
        let r = try busy()
        // A change that the log does not reject, marked rejected behind the replica's back.
        try r.store.write { w in
            try w.put(Tables.rejected, Keys.change(spouse, 1, version: Array(repeating: 0, count: 8)), Array("planted".utf8))
        }
        let report = try r.verify()
        #expect(report.problems.contains { $0.contains("rejected table holds 2 entries, the change log gives 1") }, "\(report.problems)")
    }

    @Test func aDeletedForgedEntryIsFound() throws {
        let r = try busy()
        try r.store.write { w in
            var keys: [[UInt8]] = []
            try w.scan(Tables.forged) { key, _ in keys.append(key); return true }
            for key in keys { try w.delete(Tables.forged, key) }
        }
        let report = try r.verify()
        #expect(report.problems.contains { $0.contains("forged table holds 0 entries, the change log gives 1") }, "\(report.problems)")
    }

    /// A grant planted with a digest that matches the records: the read checks agree with
    /// themselves, only the recomputation from the log tells.
    @Test func aPlantedGrantWithAMatchingDigestIsFound() throws {
        let r = try busy()
        let grant = RecordCodec.encodeOperation(h.grant(rh.malloryKey, name: "Mallory"))
        try r.store.write { w in
            try w.put(Tables.grants, rh.malloryKey + Array(SHA256.hash(grant).prefix(16)), grant)
            var digest = Digest256(bytes: try w.get(Tables.meta, Keys.digest))!
            digest.insert([UInt8(ascii: "G")] + grant)
            try w.put(Tables.meta, Keys.digest, digest.bytes)
        }
        let report = try r.verify()
        #expect(report.problems.count == 1, "\(report.problems)")
        #expect(report.problems.first?.contains("recomputed from the change log has digest") == true)
    }
}

import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerTestSupport

/// A replica restored from a stale copy of its files can make a second, different change under a
/// sequence number its peers already hold (a fork), at the same clock reading. Two register writes
/// then share a stamp, and so a register-history key: the history must keep the same one of them
/// whatever order a replica merged them in, or the conflict journals of two replicas differ.
@Suite("Register history: forked writes with one stamp")
struct RegisterHistoryOrderTests {
    let h = OwnedHousehold()
    var owner: ReplicaID { h.origin(h.ownerKey) }
    var spouse: ReplicaID { h.origin(h.spouseKey) }
    let ava = RecordID(high: 0xAA, low: 1)

    func genesis() -> [Change] {
        [h.change(owner, 1, millis: 1, [h.genesis(),
                                        h.claim(owner, key: h.ownerKey),
                                        .createChild(ChildRecord(id: ava, createdAtMillis: 1))]),
         h.change(owner, 2, millis: 2, [h.grant(h.spouseKey, name: "Dad")]),
         h.change(spouse, 1, millis: 3, [h.claim(spouse, key: h.spouseKey)]),
         // A concurrent rename by the other parent, so the journal has a conflict to show.
         h.change(spouse, 2, millis: 5, [.setField(entity: ava, field: .childName, value: .text("Zoe"))])]
    }

    /// The owner's two versions of its third change rename Ava at one clock reading.
    func forks(_ names: [String], base: Stamp? = nil) -> [Change] {
        names.map { h.change(owner, 3, millis: 6, [.setField(entity: ava, field: .childName, value: .text($0), base: base)]) }
    }

    func historyTable(_ r: Replica) throws -> [[UInt8]] {
        try r.store.read { reader in
            var rows: [[UInt8]] = []
            try reader.scan(Tables.registerHistory, prefix: []) { key, value in rows.append(key + [0xFF] + value); return true }
            return rows
        }
    }

    @Test("either order: the same history, conflict journal and name", arguments: [
        ["Ada", "Eva"], ["Eva", "Ada"], ["Ada", "Ada"],
    ])
    func eitherOrder(names: [String]) throws {
        let a = try h.replica(1), b = try h.replica(2)
        try a.applySigned(genesis())
        try b.applySigned(genesis())
        for c in forks(names) { try a.applySigned([c]) }
        for c in forks(names.reversed()) { try b.applySigned([c]) }
        #expect(try historyTable(a) == historyTable(b))
        #expect(try a.fieldConflicts(entity: ava) == b.fieldConflicts(entity: ava))
        #expect(try a.digest() == b.digest())
        // The rebuild a revocation triggers makes the same history again.
        for r in [a, b] {
            try r.applySigned([h.change(owner, 4, millis: 7, [h.revoke(h.spouseKey, seen: [owner: 3, spouse: 2])])])
        }
        #expect(try historyTable(a) == historyTable(b))
    }

    @Test("versions that differ only in their base keep one entry alike")
    func differentBases() throws {
        let a = try h.replica(1), b = try h.replica(2)
        try a.applySigned(genesis())
        try b.applySigned(genesis())
        let one = forks(["Ada"])[0]
        let other = forks(["Ada"], base: Stamp(hlc: HLC(millis: 5), origin: spouse))[0]
        try a.applySigned([one]); try a.applySigned([other])
        try b.applySigned([other]); try b.applySigned([one])
        #expect(try historyTable(a) == historyTable(b))
        #expect(try a.fieldConflicts(entity: ava) == b.fieldConflicts(entity: ava))
    }
}

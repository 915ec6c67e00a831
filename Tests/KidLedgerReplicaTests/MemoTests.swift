@testable import KidLedgerReplica
import KidLedgerDomain
import Testing

/// What a memo keeps: an object, so a test can tell a kept value (the same object) from a fresh one.
final class Computed {
    let value: [UInt8]?
    init(_ value: [UInt8]?) { self.value = value }
}

@Suite("Values kept while their tables are unchanged")
struct MemoTests {
    let t = Table("t"), other = Table("other")

    /// Reads key [1] of `t` through the memo, counting the computations in `computed`.
    func memoized(_ r: any KeyValueReader, _ computed: inout Int) throws -> Computed {
        try r.memo(.childRows, tables: [t]) {
            computed += 1
            return Computed(try r.get(t, [1]))
        }
    }

    @Test("kept while the table is unchanged, recomputed after each put, delete or undone write of it")
    func keptUntilWritten() throws {
        let store = MemoryStore()
        var computed = 0
        let empty = try store.read { r in try memoized(r, &computed) }
        #expect(try store.read { r in try memoized(r, &computed) } === empty)
        #expect(computed == 1 && empty.value == nil)

        try store.write { w in try w.put(t, [1], [7]) }
        let seven = try store.read { r in try memoized(r, &computed) }
        #expect(seven.value == [7] && computed == 2)
        // Writes elsewhere and reads leave it alone.
        try store.write { w in try w.put(other, [1], [9]) }
        #expect(try store.read { r in try memoized(r, &computed) } === seven)

        // Inside a write transaction, its own writes count at once.
        try store.write { w in
            #expect(try memoized(w, &computed) === seven)
            try w.put(t, [1], [8])
            #expect(try memoized(w, &computed).value == [8])
        }
        #expect(try store.read { r in try memoized(r, &computed) }.value == [8])

        // A transaction that throws after writing and remembering leaves nothing stale behind.
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try store.write { w in
                try w.put(t, [1], [5])
                #expect(try memoized(w, &computed).value == [5])
                throw Boom()
            }
        }
        #expect(try store.read { r in try memoized(r, &computed) }.value == [8])

        try store.write { w in try w.delete(t, [1]) }
        #expect(try store.read { r in try memoized(r, &computed) }.value == nil)
    }

    @Test("a table created by an undone transaction and created again later is not mistaken for it")
    func noStaleHitAcrossRecreatedTables() throws {
        let store = MemoryStore()
        var computed = 0
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try store.write { w in
                try w.put(t, [1], [1])
                _ = try memoized(w, &computed)  // remembered at the discarded table's first write
                throw Boom()
            }
        }
        // The same number of writes to a new table of the same name, with other content.
        try store.write { w in try w.put(t, [1], [2]) }
        #expect(try store.read { r in try memoized(r, &computed) }.value == [2])
    }

    @Test("a clone keeps its own values")
    func clones() throws {
        let store = MemoryStore()
        var computed = 0
        try store.write { w in try w.put(t, [1], [1]) }
        _ = try store.read { r in try memoized(r, &computed) }
        let copy = store.clone()
        try copy.write { w in try w.put(t, [1], [2]) }
        try store.write { w in try w.put(other, [1], [1]) }
        #expect(try store.read { r in try memoized(r, &computed) }.value == [1])
        #expect(try copy.read { r in try memoized(r, &computed) }.value == [2])
    }

    @Test("a batch computes afresh while a write-back table of the memo has pending entries")
    func batchWriter() throws {
        let store = MemoryStore()
        var computed = 0
        try store.write { base in
            let w = BatchWriter(base)
            try w.put(Tables.meta, [1], [3])  // pending in the batch, not in the store yet
            for _ in 0..<2 {
                let value = try w.memo(.childRows, tables: [Tables.meta]) {
                    computed += 1
                    return Computed(try w.get(Tables.meta, [1]))
                }
                #expect(value.value == [3])
            }
            #expect(computed == 2)
            // A table the batch writes through is remembered by the store.
            try w.put(t, [1], [4])
            let first = try memoized(w, &computed)
            #expect(try memoized(w, &computed) === first && first.value == [4])
            try w.flush()
        }
    }

    @Test("a replica's child lookups see renames, archives and new children at once")
    func replicaSeesChanges() throws {
        let r = try householdWithChildren(["Ava", "Ben"], seed: 8)
        let ava = try r.resolveChild("Ava")
        _ = try r.renameChild("Ava", to: "Cleo")
        #expect(throws: LedgerError.unknownChild("Ava")) { try r.resolveChild("Ava") }
        #expect(try r.resolveChild("Cleo").id == ava.id)
        _ = try r.setArchived("Cleo", true)
        #expect(try r.resolveChild("cleo").isArchived)
        _ = try r.addChild(name: "Ava")
        #expect(try r.resolveChild("Ava").id != ava.id)
        #expect(try r.children(includeArchived: true).map(\.name).sorted() == ["Ava", "Ben", "Cleo"])
        // A refused operation writes nothing and leaves the lookups as they were.
        #expect(throws: LedgerError.self) { try r.renameChild("Ben", to: "Ava") }
        #expect(try r.resolveChild("Ben").name == "Ben")
    }

    @Test("a replica's version vector and totals follow local and received changes")
    func vectorAndTotals() throws {
        let a = try householdWithChildren(["Ava"], seed: 21)
        let b = try makeReplica(seed: 22)
        try b.applyRemote(try a.changeLog())
        let ava = try a.resolveChild("Ava").id
        #expect(try b.versionVector() == a.versionVector() && b.aggregates() == a.aggregates())
        try a.post("Ava", signedCents: 250, note: "", source: "give")
        #expect(try a.aggregates()[ava]?.sumCents == 250)
        #expect(try b.aggregates()[ava]?.sumCents ?? 0 == 0)
        #expect(try a.versionVector() != b.versionVector())
        try b.applyRemote(try a.changeLog())
        #expect(try b.versionVector() == a.versionVector())
        #expect(try b.aggregates() == a.aggregates() && b.aggregates()[ava]?.count == 1)
        // A batch that throws part-way leaves the kept values as they were.
        let before = try b.versionVector()
        var bad = try #require(try a.changeLog().last)
        bad.sequence += 1
        bad.operations = []
        #expect(throws: LedgerError.self) { try b.applyRemote([bad]) }
        #expect(try b.versionVector() == before && b.aggregates() == a.aggregates())
    }

    @Test("the list without totals is the full list, same order, totals zeroed")
    func listWithoutTotals() throws {
        let r = try householdWithChildren(["Cleo", "ava", "Ben", "Dan"], seed: 31)
        try r.post("Ben", signedCents: 700, note: "", source: "give")
        _ = try r.setArchived("Dan", true)
        _ = try r.renameChild("Cleo", to: "Aaron")
        for _ in 0..<2 {  // computed, then kept
            let full = try r.children(includeArchived: true)
            let bare = try r.childrenWithoutTotals()
            #expect(bare.map(\.id) == full.map(\.id))
            #expect(bare == full.map { var c = $0; c.balanceCents = 0; c.transactionCount = 0; return c })
            #expect(try r.children().map(\.name) == full.filter { !$0.isArchived }.map(\.name))
        }
        #expect(try r.children().first { $0.name == "Ben" }?.balanceCents == 700)
    }

    @Test("id-prefix queries: dashes skipped, only ASCII hex digits")
    func hexDigits() {
        #expect(Replica.hexDigits("01a3-185c") == Array("01a3185c".utf8))
        #expect(Replica.hexDigits("ABCD") == Array("ABCD".utf8))
        #expect(Replica.hexDigits("--") == [])
        #expect(Replica.hexDigits("01g3") == nil)
        #expect(Replica.hexDigits("\u{FF10}\u{FF11}\u{FF12}\u{FF13}") == nil)  // fullwidth 0123
        #expect(Replica.hexDigits("Ava") == nil)
    }
}

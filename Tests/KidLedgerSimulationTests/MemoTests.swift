@testable import KidLedgerReplica
import KidLedgerDomain
import KidLedgerSimulation
import Testing
import KidLedgerInMemory
import KidLedgerTestSupport

/// What a memo keeps: an object, so a test can tell a kept value (the same object) from a fresh one.
final class Computed {
    let value: [UInt8]?
    init(_ value: [UInt8]?) { self.value = value }
}

@Suite("Values kept while their tables are unchanged")
struct MemoTests {
    let t = Table("t"), other = Table("other")

    /// A value kept with `store`'s stamp of the table it read (what the simulator's caching
    /// decorators keep their answers by).
    final class StampMemo {
        let store: MemoryStore
        var kept: (stamp: UInt64, value: Computed)?
        init(_ store: MemoryStore) { self.store = store }
    }

    /// Reads key [1] of `t` through `cache`, counting the computations in `computed`.
    func memoized(_ r: any KeyValueReader, _ computed: inout Int, _ cache: StampMemo) throws -> Computed {
        let stamp = cache.store.stamp(of: t)
        if let kept = cache.kept, kept.stamp == stamp { return kept.value }
        computed += 1
        let value = Computed(try r.get(t, [1]))
        cache.kept = (stamp, value)
        return value
    }

    @Test("kept while the table is unchanged, recomputed after each put, delete or undone write of it")
    func keptUntilWritten() throws {
        let store = MemoryStore()
        let cache = StampMemo(store)
        var computed = 0
        let empty = try store.read { r in try memoized(r, &computed, cache) }
        #expect(try store.read { r in try memoized(r, &computed, cache) } === empty)
        #expect(computed == 1 && empty.value == nil)

        try store.write { w in try w.put(t, [1], [7]) }
        let seven = try store.read { r in try memoized(r, &computed, cache) }
        #expect(seven.value == [7] && computed == 2)
        // Writes elsewhere and reads leave it alone.
        try store.write { w in try w.put(other, [1], [9]) }
        #expect(try store.read { r in try memoized(r, &computed, cache) } === seven)

        // Inside a write transaction, its own writes count at once.
        try store.write { w in
            #expect(try memoized(w, &computed, cache) === seven)
            try w.put(t, [1], [8])
            #expect(try memoized(w, &computed, cache).value == [8])
        }
        #expect(try store.read { r in try memoized(r, &computed, cache) }.value == [8])

        // A transaction that throws after writing and remembering leaves nothing stale behind.
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try store.write { w in
                try w.put(t, [1], [5])
                #expect(try memoized(w, &computed, cache).value == [5])
                throw Boom()
            }
        }
        #expect(try store.read { r in try memoized(r, &computed, cache) }.value == [8])

        try store.write { w in try w.delete(t, [1]) }
        #expect(try store.read { r in try memoized(r, &computed, cache) }.value == nil)
    }

    @Test("a table created by an undone transaction and created again later is not mistaken for it")
    func noStaleHitAcrossRecreatedTables() throws {
        let store = MemoryStore()
        let cache = StampMemo(store)
        var computed = 0
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try store.write { w in
                try w.put(t, [1], [1])
                _ = try memoized(w, &computed, cache)  // remembered at the discarded table's first write
                throw Boom()
            }
        }
        // The same number of writes to a new table of the same name, with other content.
        try store.write { w in try w.put(t, [1], [2]) }
        #expect(try store.read { r in try memoized(r, &computed, cache) }.value == [2])
    }

    @Test("the store finds each of many tables (its table index, and the linear search past it)")
    func manyTables() throws {
        let store = MemoryStore()
        let tables = (0..<150).map { Table("table \($0)") }
        for (i, t) in tables.enumerated() {
            try store.write { w in try w.put(t, [1], [UInt8(i)]) }
            // Every table so far, and one never written.
            let values = try store.read { r in try tables[...i].map { try r.get($0, [1]) } }
            #expect(values == (0...i).map { [UInt8($0)] })
            #expect(try store.read { r in try r.get(Table("never"), [1]) } == nil)
        }
        let values = try store.clone().read { r in try tables.map { try r.get($0, [1]) } }
        #expect(values == tables.indices.map { [UInt8($0)] })
    }

    @Test("a clone keeps its own values")
    func clones() throws {
        let store = MemoryStore()
        let cache = StampMemo(store)
        var computed = 0
        try store.write { w in try w.put(t, [1], [1]) }
        _ = try store.read { r in try memoized(r, &computed, cache) }
        let copy = store.clone()
        try copy.write { w in try w.put(t, [1], [2]) }
        try store.write { w in try w.put(other, [1], [1]) }
        #expect(try store.read { r in try memoized(r, &computed, cache) }.value == [1])
        #expect(try copy.read { r in try memoized(r, &computed, StampMemo(copy)) }.value == [2])
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

@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerInMemory

/// `MemoryStore` against a plain dictionary: random puts (at the front, in the middle, at the
/// end, over existing keys) and deletes, some transactions throwing halfway, clones taken and
/// written on their own. After every transaction each store must hold exactly its model, in key
/// order, seen through gets, forward and reverse scans and counts.
@Suite("MemoryStore matches a dictionary model")
struct MemoryStoreModelTests {
    struct Boom: Error {}

    /// Everything `table` holds, in key order, read by a forward scan; checked against a reverse
    /// scan, `count` and a get of each key.
    static func contents(_ store: MemoryStore, _ table: Table) throws -> [[UInt8]: [UInt8]] {
        try store.read { r in
            var forward: [([UInt8], [UInt8])] = []
            try r.scan(table) { key, value in forward.append((key, value)); return true }
            var backward: [([UInt8], [UInt8])] = []
            try r.scan(table, prefix: [], from: nil, reverse: true) { key, value in backward.append((key, value)); return true }
            #expect(forward.map(\.0) == backward.reversed().map(\.0))
            #expect(forward.map(\.1) == backward.reversed().map(\.1))
            #expect(try r.count(table) == forward.count)
            for i in forward.indices.dropFirst() { #expect(KeyBytes.compare(forward[i - 1].0, forward[i].0) < 0) }
            var result: [[UInt8]: [UInt8]] = [:]
            for (key, value) in forward {
                #expect(try r.get(table, key) == value)
                result[key] = value
            }
            return result
        }
    }

    /// Half two-byte keys from a small range (inserts land anywhere, and repeat), half keys of
    /// 1 to 12 bytes of few values (shared prefixes, zero bytes, keys that are prefixes of
    /// others, first eight bytes alike).
    static func randomKey(_ rng: inout SplitMix64) -> [UInt8] {
        if Bool.random(using: &rng) {
            return [UInt8.random(in: 0...15, using: &rng), UInt8.random(in: 0...255, using: &rng)]
        }
        let bytes: [UInt8] = [0, 0, 1, 0xFF]
        return (0..<Int.random(in: 1...12, using: &rng)).map { _ in bytes.randomElement(using: &rng)! }
    }

    @Test("random writes, undone writes and clones")
    func randomWrites() throws {
        var rng = SplitMix64(seed: 7)
        let tables = [Table("a"), Table("b")]
        var stores = [MemoryStore()]
        var models: [[[[UInt8]: [UInt8]]]] = [[[:], [:]]]
        for step in 0..<400 {
            if step % 50 == 25 {
                stores.append(stores[0].clone())
                models.append(models[0])
            }
            let s = Int.random(in: 0..<stores.count, using: &rng)
            let fails = Int.random(in: 0..<5, using: &rng) == 0
            var model = models[s]
            let writes = Int.random(in: 1...40, using: &rng)
            do {
                try stores[s].write { w in
                    for n in 0..<writes {
                        if fails && n == writes / 2 { throw Boom() }
                        let t = Int.random(in: 0..<tables.count, using: &rng)
                        let key = Self.randomKey(&rng)
                        let draw = Int.random(in: 0..<60, using: &rng)
                        if draw == 0 {
                            try w.clear(tables[t])
                            model[t] = [:]
                        } else if draw < 15 {
                            try w.delete(tables[t], key)
                            model[t][key] = nil
                        } else {
                            let value = [UInt8(truncatingIfNeeded: step), UInt8(truncatingIfNeeded: n)]
                            try w.put(tables[t], key, value)
                            model[t][key] = value
                        }
                    }
                }
                #expect(!fails)
                models[s] = model
            } catch is Boom {
                #expect(fails)
            }
            for (i, store) in stores.enumerated() {
                for t in tables.indices { #expect(try Self.contents(store, tables[t]) == models[i][t]) }
            }
        }
        #expect(models[0][0].count > 30)  // the tables grew past a few entries
    }

    @Test("a lazy copy materializes as the clone taken with it, whatever the store wrote since")
    func lazyCopies() throws {
        var rng = SplitMix64(seed: 11)
        // "c" is created only after the first copies: they must not have it.
        let tables = [Table("a"), Table("b"), Table("c")]
        let store = MemoryStore()
        var copies: [(lazy: MemoryStore.LazyCopy, clone: MemoryStore)] = []
        for step in 0..<300 {
            if step % 40 == 20 {
                // Some copies are dropped (their logs freed), others kept to the end.
                if copies.count >= 4 { copies.remove(at: 1) }
                copies.append((store.lazyCopy(), store.clone()))
            }
            let fails = Int.random(in: 0..<5, using: &rng) == 0
            let usable = step < 100 ? 2 : 3
            do {
                try store.write { w in
                    let writes = Int.random(in: 1...30, using: &rng)
                    for n in 0..<writes {
                        if fails && n == writes / 2 { throw Boom() }
                        let t = tables[Int.random(in: 0..<usable, using: &rng)]
                        let key = Self.randomKey(&rng)
                        let draw = Int.random(in: 0..<60, using: &rng)
                        if draw == 0 {
                            try w.clear(t)
                        } else if draw < 15 {
                            try w.delete(t, key)
                        } else {
                            try w.put(t, key, [UInt8(truncatingIfNeeded: step), UInt8(truncatingIfNeeded: n)])
                        }
                    }
                }
            } catch is Boom {}
        }
        #expect(copies.count == 4)
        for (lazy, clone) in copies {
            let made = lazy.materialize()
            #expect(made.hasSameEntries(as: clone, in: tables))
            for t in tables {
                #expect(made.writeCount(t) == clone.writeCount(t))
                #expect(try Self.contents(made, t) == Self.contents(clone, t))
            }
            // The materialized store is a store of its own: the next write stamps as the clone's does.
            try made.write { w in try w.put(tables[0], [9], [9]) }
            try clone.write { w in try w.put(tables[0], [9], [9]) }
            #expect(made.writeCount(tables[0]) == clone.writeCount(tables[0]))
            #expect(try Self.contents(made, tables[0]) == Self.contents(clone, tables[0]))
        }
    }
}

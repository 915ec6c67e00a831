@testable import KidLedgerReplica
import KidLedgerDomain
import Testing

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
                        if Int.random(in: 0..<4, using: &rng) == 0 {
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
        #expect(models[0][0].count > 100)  // the tables grew past a few entries
    }
}

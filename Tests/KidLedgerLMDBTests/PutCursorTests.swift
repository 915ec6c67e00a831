import Testing
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTestSupport

/// A write transaction's puts go through one kept cursor per table: appends that split pages
/// (the tree grows deeper), puts in the middle, overwrites and deletes of two tables interleaved
/// in one transaction, and gets in between, must leave exactly what a dictionary holds.
@Suite("LMDB puts through kept cursors")
struct PutCursorTests {
    /// `clear` empties one table (not the others), its puts afterwards in the same transaction
    /// land, and an abort after it leaves the table as it was.
    @Test func clearEmptiesOneTableAndAnAbortUndoesIt() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA, tableB])
            func key(_ n: UInt64) -> [UInt8] { withUnsafeBytes(of: n.bigEndian) { Array($0) } }
            try env.write { w throws in
                for n in 0..<2_000 as Range<UInt64> {
                    try w.put(tableA, key(n), [UInt8](repeating: 1, count: 30))
                    try w.put(tableB, key(n), [2])
                }
            }
            struct Boom: Error {}
            #expect(throws: Boom.self) {
                try env.write { w throws in
                    try w.clear(tableA)
                    #expect(try w.count(tableA) == 0)
                    try w.put(tableA, key(5), [9])
                    throw Boom()
                }
            }
            #expect(try env.read { try $0.count(tableA) } == 2_000)
            try env.write { w throws in
                try w.put(tableA, key(9_999), [7])  // the put cursor is open when the table is cleared
                try w.clear(tableA)
                try w.put(tableA, key(3), [3])
                try w.put(tableA, key(4), [4])      // an append into the emptied tree
                try w.put(tableA, key(1), [1])
            }
            #expect(try entries(env, tableA) == [key(1): [1], key(3): [3], key(4): [4]])
            #expect(try env.read { try $0.count(tableB) } == 2_000)
        }
    }

    @Test(arguments: [3, 19, 2024] as [UInt64])
    func interleavedWritesMatchADictionary(seed: UInt64) throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA, tableB])
            var rng = SplitMix64(seed: seed)
            var expected: [Table: [[UInt8]: [UInt8]]] = [tableA: [:], tableB: [:]]
            func key(_ n: UInt64) -> [UInt8] { withUnsafeBytes(of: n.bigEndian) { Array($0) } }
            for round in 0..<3 {
                try env.write { w throws in
                    var next: [Table: UInt64] = [tableA: UInt64(round) << 40, tableB: UInt64(round) << 40]
                    for _ in 0..<3000 {
                        let table = Bool.random(using: &rng) ? tableA : tableB
                        let value = [UInt8](repeating: UInt8.random(in: 0...255, using: &rng), count: Int.random(in: 0...40, using: &rng))
                        // Now and then the table is emptied (its put cursor closed): the next
                        // puts go into an empty tree, appends among them.
                        if Int.random(in: 0..<700, using: &rng) == 0 {
                            try w.clear(table)
                            expected[table] = [:]
                            continue
                        }
                        switch Int.random(in: 0..<10, using: &rng) {
                        case 0..<6:  // the next greatest key: an append
                            next[table]! += UInt64.random(in: 1...3, using: &rng)
                            try w.put(table, key(next[table]!), value)
                            expected[table]![key(next[table]!)] = value
                        case 6, 7:  // a key anywhere, often an existing one
                            let k = key(UInt64.random(in: 0...next[table]!, using: &rng))
                            try w.put(table, k, value)
                            expected[table]![k] = value
                        case 8:
                            let k = key(UInt64.random(in: 0...next[table]!, using: &rng))
                            try w.delete(table, k)
                            expected[table]![k] = nil
                        default:
                            let k = key(UInt64.random(in: 0...next[table]!, using: &rng))
                            #expect(try w.get(table, k) == expected[table]![k])
                        }
                    }
                }
                for table in [tableA, tableB] {
                    let stored = try entries(env, table)
                    #expect(stored == expected[table]!)
                    var keys: [[UInt8]] = []
                    try env.read { r throws in try r.scan(table) { k, _ in keys.append(k); return true } }
                    #expect(keys == expected[table]!.keys.sorted { KeyBytes.compare($0, $1) < 0 })
                }
            }
            #expect(try env.stat(tableA).depth >= 2)
        }
    }

    @Test func aPutInAReadTransactionFailsAndTheReadEnds() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            try env.write { try $0.put(tableA, b("k"), b("v")) }
            #expect(throws: LMDBError.self) { try env.read { try ($0 as! any KeyValueWriter).put(tableA, b("k2"), b("v")) } }
            // The store is still usable: the read transaction and its cursor were released.
            try env.write { try $0.put(tableA, b("k3"), b("v3")) }
            #expect(try entries(env, tableA) == [b("k"): b("v"), b("k3"): b("v3")])
        }
    }
}

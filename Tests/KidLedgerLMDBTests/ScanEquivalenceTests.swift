import Testing
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTestSupport
import KidLedgerInMemory

/// Bytes biased towards the edges of the byte range and towards collisions.
private let alphabet: [UInt8] = [0x00, 0x00, 0x01, 0x41, 0x42, 0x7F, 0x80, 0xFE, 0xFF, 0xFF]

private func randomBytes(_ rng: inout SplitMix64, length: ClosedRange<Int>) -> [UInt8] {
    let n = Int.random(in: length, using: &rng)
    return (0..<n).map { _ in
        Int.random(in: 0..<8, using: &rng) == 0 ? UInt8.random(in: 0...255, using: &rng)
                                                 : alphabet.randomElement(using: &rng)!
    }
}

/// A key: often an existing key's prefix extended, so keys share prefixes.
private func randomKey(_ rng: inout SplitMix64, existing: [[UInt8]]) -> [UInt8] {
    if !existing.isEmpty, Bool.random(using: &rng) {
        let base = existing.randomElement(using: &rng)!
        let keep = Int.random(in: 0...base.count, using: &rng)
        let key = Array(base.prefix(keep)) + randomBytes(&rng, length: 0...3)
        return key.isEmpty ? [0x00] : key
    }
    return randomBytes(&rng, length: 1...6)
}

/// A prefix or start: empty, a piece of an existing key, a neighbour of one, or random.
private func randomProbe(_ rng: inout SplitMix64, existing: [[UInt8]]) -> [UInt8] {
    switch Int.random(in: 0..<6, using: &rng) {
    case 0: return []
    case 1 where !existing.isEmpty, 2 where !existing.isEmpty:
        let base = existing.randomElement(using: &rng)!
        return Array(base.prefix(Int.random(in: 0...base.count, using: &rng)))
    case 3 where !existing.isEmpty:
        var probe = existing.randomElement(using: &rng)!
        if Bool.random(using: &rng) { probe.append(alphabet.randomElement(using: &rng)!) }
        else { probe[probe.count - 1] &+= Bool.random(using: &rng) ? 1 : 255 }
        return probe
    case 4: return [UInt8](repeating: 0xFF, count: Int.random(in: 1...3, using: &rng))
    default: return randomBytes(&rng, length: 0...4)
    }
}

/// The entries a scan visits, stopping after `limit` of them.
private func collect(_ store: any KeyValueStore, _ table: Table, prefix: [UInt8], start: [UInt8]?,
                    reverse: Bool, limit: Int) throws -> [[UInt8]] {
    try store.read { reader in
        var visited: [[UInt8]] = []
        try reader.scan(table, prefix: prefix, from: start, reverse: reverse) { key, value in
            visited.append(key)
            visited.append(value)
            return visited.count / 2 < limit
        }
        return visited
    }
}

/// `scan` on LMDB must match `MemoryStore` exactly, for every prefix, start and direction.
@Suite("LMDB scan matches MemoryStore")
struct ScanEquivalenceTests {
    @Test(arguments: [1, 2, 3, 42, 1234, 0xDEAD_BEEF] as [UInt64])
    func randomQueriesMatch(seed: UInt64) throws {
        try withTemporaryDirectory { dir throws in
            var rng = SplitMix64(seed: seed)
            let lmdb = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            let memory = MemoryStore()
            var keys: [[UInt8]] = []
            for round in 0..<6 {
                // The same random puts and deletes into both stores, in one transaction each.
                // An empty key with no value: clear the table (then puts after it in the same
                // transaction, some of them appends).
                var ops: [(key: [UInt8], value: [UInt8]?)] = []
                for _ in 0..<Int.random(in: 20...80, using: &rng) {
                    if round == 3, ops.count == 10 {
                        ops.append(([], nil))
                    } else if !keys.isEmpty, Int.random(in: 0..<5, using: &rng) == 0 {
                        ops.append((keys.randomElement(using: &rng)!, nil))
                    } else {
                        let key = randomKey(&rng, existing: keys)
                        keys.append(key)
                        ops.append((key, randomBytes(&rng, length: 0...3)))
                    }
                }
                for store in [lmdb, memory] as [any KeyValueStore] {
                    try store.write { w in
                        for op in ops {
                            if let value = op.value { try w.put(tableA, op.key, value) }
                            else if op.key.isEmpty { try w.clear(tableA) }
                            else { try w.delete(tableA, op.key) }
                        }
                    }
                }
                #expect(try lmdb.read { try $0.count(tableA) } == memory.read { try $0.count(tableA) })

                for query in 0..<300 {
                    let prefix = randomProbe(&rng, existing: keys)
                    let start = Bool.random(using: &rng) ? nil : randomProbe(&rng, existing: keys)
                    let reverse = Bool.random(using: &rng)
                    let limit = Int.random(in: 0..<4, using: &rng) == 0 ? Int.random(in: 1...3, using: &rng) : .max
                    let expected = try collect(memory, tableA, prefix: prefix, start: start, reverse: reverse, limit: limit)
                    let actual = try collect(lmdb, tableA, prefix: prefix, start: start, reverse: reverse, limit: limit)
                    #expect(actual == expected,
                            "seed \(seed) round \(round) query \(query): prefix \(prefix) start \(String(describing: start)) reverse \(reverse) limit \(limit)")
                }
            }
        }
    }

    @Test func edgeCases() throws {
        try withTemporaryDirectory { dir throws in
            let lmdb = try LMDBEnvironment(directory: dir.path, tables: [tableA, tableB])
            let memory = MemoryStore()
            let keys: [[UInt8]] = [[0x00], [0x00, 0x00], [0x01], [0x01, 0xFF], [0x01, 0xFF, 0xFF], [0x02],
                                   [0xFF], [0xFF, 0x00], [0xFF, 0xFF], [0xFF, 0xFF, 0xFF]]
            for store in [lmdb, memory] as [any KeyValueStore] {
                try store.write { w in for key in keys { try w.put(tableA, key, key) } }
            }
            let long = [UInt8](repeating: 0x01, count: 600)  // longer than any key may be
            let probes: [[UInt8]] = [[], [0x00], [0x01], [0x01, 0xFF], [0xFF], [0xFF, 0xFF], [0xFF, 0xFF, 0xFF, 0xFF],
                                     [0x03], long, [0xFF] + long]
            for table in [tableA, tableB] {
                for prefix in probes {
                    for start in [nil] + probes.map(Optional.some) {
                        for reverse in [false, true] {
                            let expected = try collect(memory, table, prefix: prefix, start: start,
                                                                            reverse: reverse, limit: .max)
                            let actual = try collect(lmdb, table, prefix: prefix, start: start,
                                                                          reverse: reverse, limit: .max)
                            #expect(actual == expected, "prefix \(prefix.count) bytes, start \(String(describing: start?.count)), reverse \(reverse)")
                        }
                    }
                }
            }
            // An all-0xFF prefix in reverse starts at the very last key.
            let last = try collect(lmdb, tableA, prefix: [0xFF, 0xFF], start: nil, reverse: true, limit: .max)
            #expect(last == [[0xFF, 0xFF, 0xFF], [0xFF, 0xFF, 0xFF], [0xFF, 0xFF], [0xFF, 0xFF]])
        }
    }

    /// The scan reuses the storage of the key and value it hands to the body when the body kept
    /// no reference to them: a copy the body kept, even of an entry of the same size as the next,
    /// must never change afterwards, and one it did not keep must still hold the right bytes.
    @Test func keptCopiesNeverChange() throws {
        try withTemporaryDirectory { dir throws in
            let lmdb = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            // Equal-size keys and values (copied in place when not kept), then longer and shorter ones.
            let entries: [([UInt8], [UInt8])] = (0..<40).map { i in
                let size = i < 20 ? 8 : (i % 2 == 0 ? 3 : 12)
                return ([UInt8(i)] + [UInt8](repeating: UInt8(i), count: size),
                        [UInt8](repeating: UInt8(200 - i), count: size + i % 3))
            }
            try lmdb.write { w in for (key, value) in entries { try w.put(tableA, key, value) } }
            for every in [1, 2, 3, 7] {
                for reverse in [false, true] {
                    var kept: [([UInt8], [UInt8])] = [], seen: [([UInt8], [UInt8])] = []
                    try lmdb.read { r in
                        try r.scan(tableA, prefix: [], from: nil, reverse: reverse) { key, value in
                            // What the body sees now, compared by content, not kept.
                            seen.append((Array(key.map { $0 }), Array(value.map { $0 })))
                            if seen.count % every == 0 { kept.append((key, value)) }
                            return true
                        }
                    }
                    let expected = reverse ? entries.reversed() : entries
                    #expect(seen.map(\.0) == expected.map(\.0) && seen.map(\.1) == expected.map(\.1))
                    let keptExpected = expected.enumerated().filter { ($0.offset + 1) % every == 0 }.map(\.element)
                    #expect(kept.map(\.0) == keptExpected.map(\.0), "every \(every), reverse \(reverse)")
                    #expect(kept.map(\.1) == keptExpected.map(\.1), "every \(every), reverse \(reverse)")
                }
            }
            // A write transaction that overwrites each entry while scanning sees every old value once.
            let old = try lmdb.write { w in
                var seen: [[UInt8]] = []
                try w.scan(tableA) { key, value in
                    seen.append(value)
                    try w.put(tableA, key, value.map { ~$0 })
                    return true
                }
                return seen
            }
            #expect(old == entries.map(\.1))
            #expect(try collect(lmdb, tableA, prefix: [], start: nil, reverse: false, limit: .max)
                    == entries.flatMap { [$0.0, $0.1.map { ~$0 }] })
        }
    }

    @Test func bodyMayThrowMidScan() throws {
        struct Stop: Error {}
        try withTemporaryDirectory { dir throws in
            let lmdb = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            try lmdb.write { w in for i: UInt8 in 1...5 { try w.put(tableA, [i], [i]) } }
            var seen = 0
            #expect(throws: Stop.self) {
                try lmdb.read { r in
                    try r.scan(tableA) { _, _ in
                        seen += 1
                        if seen == 2 { throw Stop() }
                        return true
                    }
                }
            }
            #expect(seen == 2)
            #expect(try lmdb.read { try $0.count(tableA) } == 5)
        }
    }
}

/// Puts in key order append (`MDB_APPEND`); the store must hold exactly what plain puts would,
/// also when a delete or an overwrite leaves the transaction's idea of the last key stale.
@Suite("LMDB appends in key order")
struct AppendTests {
    @Test(arguments: [5, 77, 901] as [UInt64])
    func appendsMatchMemoryStore(seed: UInt64) throws {
        try withTemporaryDirectory { dir throws in
            var rng = SplitMix64(seed: seed)
            let lmdb = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            let memory = MemoryStore()
            func key(_ n: UInt64) -> [UInt8] { withUnsafeBytes(of: n.bigEndian) { Array($0) } }
            var next: UInt64 = 1_000
            for _ in 0..<8 {
                // Mostly ascending keys (appends), with overwrites, deletes of the last key,
                // keys below the last and a key between the true last and a deleted one.
                var ops: [(key: [UInt8], value: [UInt8]?)] = []
                for _ in 0..<400 {
                    switch Int.random(in: 0..<10, using: &rng) {
                    case 0: ops.append((key(next &- 1), [1]))                                  // overwrite the last
                    case 1: ops.append((key(next &- 1), nil)); ops.append((key(next &- 2), [2]))  // delete it, put below
                    case 2: ops.append((key(UInt64.random(in: 0..<next, using: &rng)), [3]))  // anywhere below
                    case 3: ops.append((key(next &- 1), nil)); ops.append((key(next &- 1) + [0], [4]))  // between
                    default:
                        next += UInt64.random(in: 1...3, using: &rng)
                        ops.append((key(next), [UInt8](repeating: 5, count: Int.random(in: 0...300, using: &rng))))
                    }
                }
                for store in [lmdb, memory] as [any KeyValueStore] {
                    try store.write { w in
                        for op in ops {
                            if let value = op.value { try w.put(tableA, op.key, value) } else { try w.delete(tableA, op.key) }
                        }
                    }
                }
                let all = { (store: any KeyValueStore) in
                    try store.read { r in
                        var entries: [[UInt8]] = []
                        try r.scan(tableA) { k, v in entries.append(k); entries.append(v); return true }
                        return entries
                    }
                }
                #expect(try all(lmdb) == all(memory))
            }
            #expect(try lmdb.read { try $0.count(tableA) } > 1_000)
        }
    }
}

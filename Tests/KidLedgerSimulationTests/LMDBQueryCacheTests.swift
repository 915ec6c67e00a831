@testable import KidLedgerReplica
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerSimulation
import KidLedgerTestSupport
import Testing

/// What the simulator's LMDB query cache keeps answers by: the committed state a reader sees
/// (`LMDBEnvironment.committedState(seenBy:)`), and the cache itself against fresh reads.
private let tableA = Table("a"), tableB = Table("b")

@Suite("Query answers kept by LMDB's committed state")
struct LMDBQueryCacheTests {
    /// An answer object, so a kept answer (the same object) can be told from a fresh one.
    final class Read {
        let value: [UInt8]?
        init(_ value: [UInt8]?) { self.value = value }
    }

    @Test("a read, or a write before its first write, sees the last commit; a write that wrote sees none")
    func committedStates() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path + "/a", tables: [tableA, tableB], durable: false)
            let other = try LMDBEnvironment(directory: dir.path + "/b", tables: [tableA], durable: false)
            try env.write { w in try w.put(tableA, [1], [1]) }
            let first = env.lastCommittedTransaction
            #expect(try env.read { env.committedState(seenBy: $0) } == first)
            #expect(try other.read { env.committedState(seenBy: $0) } == nil)  // another environment's reader
            try env.write { w in
                #expect(env.committedState(seenBy: w) == first)
                _ = try w.get(tableA, [1])
                #expect(env.committedState(seenBy: w) == first)  // reads change nothing
                try w.delete(tableB, [9])                       // a delete of a missing key counts as a write
                #expect(env.committedState(seenBy: w) == nil)
            }
            // It changed nothing, so LMDB committed no new state: the same id, the same content.
            #expect(env.lastCommittedTransaction == first)
            try env.write { w in try w.put(tableA, [3], [3]) }
            let second = env.lastCommittedTransaction
            #expect(second > first)
            #expect(try env.read { env.committedState(seenBy: $0) } == second)
            // An aborted write commits nothing: the state stays the last commit's.
            struct Boom: Error {}
            #expect(throws: Boom.self) { try env.write { w in try w.put(tableA, [2], [2]); throw Boom() } }
            #expect(try env.read { env.committedState(seenBy: $0) } == second)
            try env.write { w in try w.clear(tableB) }
            #expect(try env.read { env.committedState(seenBy: $0) } == env.lastCommittedTransaction)
            #expect(env.lastCommittedTransaction > second)
        }
    }

    @Test("kept while nothing commits, recomputed after a commit, never kept for a transaction that wrote")
    func keptByCommittedState() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA, tableB], durable: false)
            let cache = LMDBQueryCache(env)
            var computed = 0
            func read(_ r: any KeyValueReader) throws -> Read {
                try cache.value(.childRows, tables: [tableA], reading: r) {
                    computed += 1
                    return Read(try r.get(tableA, [1]))
                }
            }
            let empty = try env.read { try read($0) }
            #expect(try env.read { try read($0) } === empty)
            #expect(computed == 1)
            // Any commit moves the state, whatever table it wrote.
            try env.write { w in try w.put(tableB, [1], [1]) }
            #expect(try env.read { try read($0) } !== empty)
            #expect(computed == 2)
            try env.write { w in
                let before = try read(w)                // not written yet: the kept answer
                #expect(computed == 2 && before.value == nil)
                try w.put(tableA, [1], [7])
                #expect(try read(w).value == [7])       // its own write, computed
                #expect(try read(w).value == [7])
                #expect(computed == 4)
            }
            #expect(try env.read { try read($0) }.value == [7])
            // An aborted write leaves the kept answer right.
            struct Boom: Error {}
            let kept = try env.read { try read($0) }
            #expect(throws: Boom.self) {
                try env.write { w in
                    try w.put(tableA, [1], [8])
                    #expect(try read(w).value == [8])
                    throw Boom()
                }
            }
            #expect(try env.read { try read($0) } === kept)
            #expect(kept.value == [7])
        }
    }

    @Test("a replica's kept child rows and vector equal fresh reads through random writes", arguments: [UInt64(4), 5])
    func replicaQueriesMatchFreshReads(seed: UInt64) throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: Tables.all, durable: false)
            let cache = LMDBQueryCache(env)
            var rng = SplitMix64(seed: seed)
            func pick(_ n: UInt64) -> UInt64 { rng.next() % n }
            let ids = (0..<6).map { RecordID(high: 0x10 &* ($0 + 1), low: $0) }
            func write(_ w: any KeyValueWriter) throws {
                let id = ids[Int(pick(UInt64(ids.count)))]
                switch pick(6) {
                case 0: try w.put(Tables.children, Keys.id(id), RecordCodec.encodeRecord(ChildRecord(id: id, createdAtMillis: Int64(pick(50)))))
                case 1: try w.delete(Tables.children, Keys.id(id))
                case 2, 3:
                    let stamp = Stamp(hlc: HLC(millis: Int64(pick(1000))), origin: ReplicaID(pick(3) + 1))
                    let value = FieldValue.text(["Ava", "Ben", "Cleo"][Int(pick(3))])
                    try w.put(Tables.registers, Keys.register(id, .childName), StoredRegister(stamp: stamp, value: value).encoded())
                case 4: try w.put(Tables.vector, Keys.origin(ReplicaID(pick(4) + 1)), Bytes.u64(pick(99)))
                default: try w.delete(Tables.vector, Keys.origin(ReplicaID(pick(4) + 1)))
                }
            }
            func expectFresh(_ r: any KeyValueReader) throws {
                #expect(try Replica.childRows(r, cache) == Replica.readChildRowsAndKeys(r).rows)
                #expect(try Replica.versionVector(r, cache) == Replica.readVersionVector(r))
            }
            struct Boom: Error {}
            for _ in 0..<150 {
                let fails = pick(5) == 0
                do {
                    try env.write { w in
                        try expectFresh(w)  // before its first write: answers by the last commit
                        for _ in 0..<Int(pick(4)) { try write(w) }
                        try expectFresh(w)
                        if fails { throw Boom() }
                    }
                } catch is Boom {}
                try env.read { r in try expectFresh(r) }
                try env.read { r in try expectFresh(r) }
            }
        }
    }
}

@testable import KidLedgerReplica
import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerSimulation
import KidLedgerTestSupport
import Testing

/// The final run's comparisons of what verify reads (``Replica/verifiesAlike(_:_:)`` and its
/// kin, in KidLedgerSimulation/Checkers/VerifiedContent.swift), moved here from the replica's tests.
@Suite("Verified content")
struct VerifiedContentTests {
    @Test("verify's recomputation answers alike on stores alike in recomputedFrom and the stored digest, whatever else they hold")
    func recomputationDependsOnlyOnRecomputedFrom() throws {
        let r = try busyReplica()
        let memory = r.store as! MemoryStore
        func recomputation(_ store: MemoryStore) throws -> Recomputation {
            try Replica(store: store, clock: FixedClock(millis: 1_000_000), random: SplitMix64(seed: 1)).verifyRecomputation()
        }
        let intact = try recomputation(memory)
        #expect(intact.problems.isEmpty && intact.skipped == nil, "\(intact)")
        let others = Tables.all.filter { !Replica.recomputedFrom.contains($0) && $0 != Tables.meta }
        // Every other table emptied, or holding an entry more and every entry's value changed.
        let emptied = memory.clone(), scrambled = memory.clone()
        try emptied.write { w in
            for table in others {
                var keys: [[UInt8]] = []
                try w.scan(table) { key, _ in keys.append(key); return true }
                for key in keys { try w.delete(table, key) }
            }
        }
        try scrambled.write { w in
            for table in others {
                var entries: [([UInt8], [UInt8])] = []
                try w.scan(table) { key, value in entries.append((key, value)); return true }
                for (key, value) in entries { try w.put(table, key, value + [0xA5]) }
                try w.put(table, [0xFE, 0xED], [1, 2, 3])
            }
        }
        #expect(try Replica.recomputesAlike(Replica.verifiedContent(of: memory), emptied))
        #expect(try recomputation(emptied) == intact)
        #expect(try recomputation(scrambled) == intact)
        // One entry more in a table it names does change the answer (so this test can fail).
        let rejectedMore = memory.clone()
        try rejectedMore.write { w in try w.put(Tables.rejected, [UInt8](repeating: 7, count: 24), []) }
        #expect(try !Replica.recomputesAlike(Replica.verifiedContent(of: memory), rejectedMore))
        #expect(try recomputation(rejectedMore) != intact)
    }

    @Test("verifiesAlike: equal in what verify reads, whatever else differs")
    func verifiesAlike() throws {
        let r = try busyReplica()
        let store = r.store as! MemoryStore
        let copy = store.clone()
        #expect(try Replica.verifiesAlike(store, copy))
        // Another replica id and peer table: verify does not read them.
        try copy.write { w in
            try w.put(Tables.meta, Keys.replica, Bytes.u64(99))
            try w.put(Tables.peers, [1, 2, 3], [4])
        }
        #expect(try Replica.verifiesAlike(store, copy))
        try r.post("Ava", signedCents: 1, note: "", source: "give")
        #expect(try !Replica.verifiesAlike(store, copy))
        // A damaged index entry alone makes them differ, and verify tells them apart.
        let again = store.clone()
        try again.write { w in try w.put(Tables.byTime, [0xFF], []) }
        #expect(try !Replica.verifiesAlike(store, again))
        let damaged = try Replica(store: again, clock: FixedClock(millis: 1_000_000), random: SplitMix64(seed: 1))
        #expect(try !damaged.verify().isIntact)
    }

    @Test("verifiesAlike through any store (read entry by entry) agrees with the in-memory comparison")
    func verifiesAlikeThroughAnyStore() throws {
        let r = try busyReplica()
        let memory = r.store as! MemoryStore
        let content = try Replica.verifiedContent(of: RecordingStore(memory.clone()))
        #expect(try Replica.verifiesAlike(content, RecordingStore(memory)))
        #expect(try Replica.verifiesAlike(content, memory))
        // What verify does not read may differ.
        let other = memory.clone()
        try other.write { w in
            try w.put(Tables.meta, Keys.replica, Bytes.u64(99))
            try w.put(Tables.peers, [1, 2, 3], [4])
        }
        #expect(try Replica.verifiesAlike(content, RecordingStore(other)))
        // One extra, one missing, one changed entry, or another stored digest: not alike.
        let extra = memory.clone()
        try extra.write { w in try w.put(Tables.byTime, [0xFF], []) }
        #expect(try !Replica.verifiesAlike(content, RecordingStore(extra)))
        let missing = memory.clone()
        let firstKey = try missing.read { r in
            var key: [UInt8] = []
            try r.scan(Tables.byTime) { k, _ in key = k; return false }
            return key
        }
        try missing.write { w in try w.delete(Tables.byTime, firstKey) }
        #expect(try !Replica.verifiesAlike(content, RecordingStore(missing)))
        let changed = memory.clone()
        try changed.write { w in try w.put(Tables.byTime, firstKey, [1]) }
        #expect(try !Replica.verifiesAlike(content, RecordingStore(changed)))
        let digest = memory.clone()
        try digest.write { w in try w.put(Tables.meta, Keys.digest, [UInt8](repeating: 0, count: 32)) }
        #expect(try !Replica.verifiesAlike(content, RecordingStore(digest)))
        // The copy does not follow the store it was taken from.
        try r.post("Ava", signedCents: 1, note: "", source: "give")
        #expect(try !Replica.verifiesAlike(content, RecordingStore(memory)))
    }

    @Test("verifyAlikeness: the three answers at once, as each table differs, in memory and through any store")
    func verifyAlikenessByTable() throws {
        let r = try busyReplica()
        let memory = r.store as! MemoryStore
        let content = try Replica.verifiedContent(of: memory)
        func changed(_ table: Table) throws -> MemoryStore {
            let copy = memory.clone()
            try copy.write { w in try w.put(table, [0xFF, 0xFE], [1]) }
            return copy
        }
        typealias Alike = Replica.VerifyAlikeness
        let cases: [(MemoryStore, Alike)] = [
            (memory.clone(), Alike(everything: true, allButHeads: true, recomputation: true)),
            (try changed(Tables.heads), Alike(everything: false, allButHeads: true, recomputation: true)),
            (try changed(Tables.byTime), Alike(everything: false, allButHeads: false, recomputation: true)),
            (try changed(Tables.rejected), Alike(everything: false, allButHeads: false, recomputation: false)),
            (try changed(Tables.peers), Alike(everything: true, allButHeads: true, recomputation: true)),
        ]
        for (i, (store, expected)) in cases.enumerated() {
            #expect(try Replica.verifyAlikeness(content, store) == expected, "case \(i)")
            #expect(try Replica.verifyAlikeness(content, RecordingStore(store)) == expected, "case \(i), entry by entry")
        }
        let digest = memory.clone()
        try digest.write { w in try w.put(Tables.meta, Keys.digest, [UInt8](repeating: 0, count: 32)) }
        #expect(try Replica.verifyAlikeness(content, digest) == Alike())
    }
}

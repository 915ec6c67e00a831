@testable import KidLedgerReplica
import KidLedgerSimulation
import KidLedgerDomain
import Testing

/// A store that remembers which tables (and which `meta` keys) its readers touch.
final class RecordingStore: KeyValueStore {
    let base: MemoryStore
    var tables = Set<String>()
    var metaKeys = Set<[UInt8]>()

    init(_ base: MemoryStore) { self.base = base }

    func read<T>(_ body: (any KeyValueReader) throws -> T) throws -> T {
        try base.read { r in try body(Reader(base: r, store: self)) }
    }

    func write<T>(_ body: (any KeyValueWriter) throws -> T) throws -> T { try base.write(body) }

    final class Reader: KeyValueReader {
        let base: any KeyValueReader
        let store: RecordingStore
        init(base: any KeyValueReader, store: RecordingStore) { self.base = base; self.store = store }

        func get(_ table: Table, _ key: [UInt8]) throws -> [UInt8]? {
            store.tables.insert(table.name)
            if table == Tables.meta { store.metaKeys.insert(key) }
            return try base.get(table, key)
        }

        func scan(_ table: Table, prefix: [UInt8], from start: [UInt8]?, reverse: Bool,
                  _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
            store.tables.insert(table.name)
            if table == Tables.meta { store.metaKeys.insert([]) }  // a scan of meta reads every key
            try base.scan(table, prefix: prefix, from: start, reverse: reverse, body)
        }

        func count(_ table: Table) throws -> Int {
            store.tables.insert(table.name)
            return try base.count(table)
        }
    }
}

@Suite("Child listing, verify's reads and MemoryStore write counts")
struct ListingAndVerifyTests {
    /// A household with active, archived, renamed and concurrently added children, transactions
    /// (one undone) and a transaction waiting for a child that has not arrived.
    func busyReplica() throws -> Replica {
        let r = try householdWithChildren(["Ava", "Ben", "Cleo", "Dan", "Eve"], seed: 11)
        try r.renameChild("Ben", to: "Finn")
        try r.setArchived("Dan", true)
        try r.post("Ava", signedCents: 300, note: "a", source: "give")
        try r.post("Eve", signedCents: -20, note: "b", source: "take")
        try r.postAll(signedCents: 7, note: "all", source: "give-all")
        try r.undo()
        // Elsewhere: Ivy (on c), then Gus and a transaction for Ivy (on `other`); this replica
        // hears only from `other`, so the transaction waits for Ivy. And Hal, added here meanwhile.
        let c = try makeReplica(seed: 13)
        try c.applyRemote(try r.batch(notCoveredBy: [:]))
        try c.addChild(name: "Ivy")
        let other = try makeReplica(seed: 12)
        try other.applyRemote(try c.batch(notCoveredBy: [:]))
        try other.addChild(name: "Gus")
        try other.post("Ivy", signedCents: 40, note: "g", source: "give")
        try r.addChild(name: "Hal")
        let origin = other.replicaID
        try r.applyRemote(try other.changes(notCoveredBy: [:]).filter { $0.origin == origin })
        #expect(try r.counts().deferred == 1)
        return r
    }

    @Test("children() and aggregates() agree with reading each child on its own")
    func listingMatchesPointReads() throws {
        let r = try busyReplica()
        let ids: [RecordID] = try r.store.read { reader in
            var ids: [RecordID] = []
            try reader.scan(Tables.children) { key, _ in ids.append(RecordID(bytes: key)); return true }
            return ids
        }
        let one = try r.store.read { reader in try ids.map { try Replica.child($0, reader)! } }
        let ordered = one.sorted { ($0.sortOrder, $0.name, $0.id) < ($1.sortOrder, $1.name, $1.id) }
        #expect(try r.children(includeArchived: true) == ordered)
        #expect(try r.children() == ordered.filter { !$0.isArchived })
        #expect(ordered.contains { $0.isArchived } && ordered.contains { $0.balanceCents != 0 })
        let totals = try r.aggregates()
        let loaded = try r.store.read { reader in try ids.map { try Aggregate.load($0, reader) } }
        for (id, aggregate) in zip(ids, loaded) { #expect(totals[id] == aggregate) }
        #expect(totals.count == ids.count)
        for c in ordered { #expect(try r.resolveChild(c.id.hex) == c) }
        #expect(try r.resolveChild("finn").name == "Finn")
    }

    @Test("name matching up to case and accents equals comparing folded copies")
    func caseInsensitiveMatching() {
        let names = ["Ava", "AVA", "ava", "Avab", "Av", "", "Émile", "éMILE", "e\u{301}mile", "E\u{301}MILE", "Straße",
                     "STRASSE", "İlk", "i\u{307}lk", "ΣΑΣ", "σας", "Zoë", "zoe", "a1-b", "A1-B", "ab\u{301}"]
        for name in names {
            for query in names {
                let wanted = Text.folded(query)
                #expect(Replica.equalFolded(name, folded: wanted) == (Text.folded(name) == wanted), "\(name) / \(wanted)")
            }
        }
    }

    @Test("verify reads only the tables verifiedTables names, and of meta only the digest")
    func verifyReadsOnlyVerifiedTables() throws {
        let r = try busyReplica()
        let recording = RecordingStore(r.store as! MemoryStore)
        let replica = try Replica(store: recording, clock: FixedClock(millis: 1_000_000), random: SplitMix64(seed: 1))
        recording.tables = []
        recording.metaKeys = []
        let report = try replica.verify()
        #expect(report.isIntact, "\(report.problems)")
        let allowed = Set(Replica.verifiedTables.map(\.name)).union([Tables.meta.name])
        #expect(recording.tables.isSubset(of: allowed), "\(recording.tables.subtracting(allowed))")
        #expect(recording.metaKeys == [Array("digest".utf8)])
    }

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

    @Test("writeCount moves with every put and delete, not with reads; clones keep it")
    func writeCounts() throws {
        let store = MemoryStore()
        let t = Table("t")
        #expect(store.writeCount(t) == 0)
        try store.write { w in try w.put(t, [1], [1]) }
        let one = store.writeCount(t)
        #expect(one > 0)
        _ = try store.read { r in try r.get(t, [1]) }
        #expect(store.writeCount(t) == one)
        try store.write { w in try w.put(t, [1], [2]) }
        let two = store.writeCount(t)
        #expect(two != one)
        try store.write { w in try w.delete(t, [1]) }
        #expect(store.writeCount(t) != two)
        let three = store.writeCount(t)
        struct Boom: Error {}
        #expect(throws: Boom.self) { try store.write { w in try w.put(t, [5], [5]); throw Boom() } }
        #expect(store.writeCount(t) != three)  // an undone write counts too
        #expect(try store.read { r in try r.get(t, [5]) } == nil)
        #expect(store.clone().writeCount(t) == store.writeCount(t))
        #expect(store.writeCount(Table("other")) == 0)
    }
}

@Suite("Matching an id by hex prefix")
struct HexPrefixTests {
    @Test("equals id.hex.hasPrefix for every prefix length, and for digits that are not the id's")
    func hexPrefix() {
        var g = SplitMix64(seed: 5)
        for _ in 0..<50 {
            let id = RecordID.random(using: &g)
            let hex = id.hex
            for n in 0...33 {
                let prefix = String(hex.prefix(n)) + (n > 32 ? "0" : "")
                #expect(Replica.hex(of: id, hasPrefix: Array(prefix.utf8)) == hex.hasPrefix(prefix))
                var wrong = Array(prefix.utf8)
                if !wrong.isEmpty {
                    wrong[wrong.count - 1] = wrong.last! == UInt8(ascii: "f") ? UInt8(ascii: "0") : UInt8(ascii: "f")
                    #expect(Replica.hex(of: id, hasPrefix: wrong) == hex.hasPrefix(String(decoding: wrong, as: UTF8.self)))
                }
            }
            for odd in ["\u{FF10}\u{FF11}\u{FF12}\u{FF13}", "ABCD", hex.uppercased()] {
                #expect(Replica.hex(of: id, hasPrefix: Array(odd.utf8)) == hex.hasPrefix(odd))
            }
        }
    }
}

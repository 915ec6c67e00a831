@testable import KidLedgerReplica
import KidLedgerInMemory
import KidLedgerTestSupport
import KidLedgerDomain
import Testing

@Suite("Child listing, verify's reads and MemoryStore write counts")
struct ListingAndVerifyTests {
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

@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

@Suite("Finding a child by name or id prefix")
struct ResolveChildTests {
    @Test("names match case-insensitively, ignoring surrounding white space",
          arguments: ["Ava", "ava", "AVA", "  aVa\t", "\u{00C9}mile", "\u{00E9}MILE"])
    func caseInsensitiveNames(query: String) throws {
        let r = try householdWithChildren(["Ava", "Ben", "\u{00C9}mile"], seed: 3)
        let found = try r.resolveChild(query)
        #expect(found.name.lowercased() == Text.trimmed(query).lowercased())
    }

    @Test("id prefixes of at least four hex digits, any case, with or without dashes")
    func idPrefixes() throws {
        let r = try householdWithChildren(["Ava", "Ben"], seed: 3)
        let ava = try r.child(named: "Ava")
        let hex = ava.id.hex
        for query in [String(hex.prefix(4)), String(hex.prefix(8)), hex, hex.uppercased(),
                      ava.id.description, String(ava.id.description.prefix(13)), " \(hex.prefix(6)) "] {
            #expect(try r.resolveChild(query).id == ava.id, "query \(query)")
        }
        // Too short to be a prefix, and not a name.
        #expect(throws: LedgerError.unknownChild(String(hex.prefix(3)))) { try r.resolveChild(String(hex.prefix(3))) }
        // Not hex at all.
        #expect(throws: LedgerError.unknownChild("zzzz")) { try r.resolveChild("zzzz") }
    }

    @Test("unknown children")
    func unknown() throws {
        let r = try householdWithChildren(["Ava"], seed: 3)
        for query in ["Zed", "", "   ", "Ava Ava", "Bob"] {
            #expect(throws: LedgerError.unknownChild(query)) { try r.resolveChild(query) }
        }
        // A near name is suggested ("did you mean …?"), by its stored spelling.
        for query in ["Av", "Avx", "avaa", "\u{00C1}vx", "  avx "] {
            #expect(throws: LedgerError.unknownChild(query, nearest: "Ava")) { try r.resolveChild(query) }
        }
        #expect(LedgerError.unknownChild("Avx", nearest: "Ava").description
                == "no child named \"Avx\"; did you mean \"Ava\"? (see `kidledger children --all`)")
        let empty = try householdWithChildren([], seed: 4)
        #expect(throws: LedgerError.unknownChild("Ava")) { try empty.resolveChild("Ava") }
    }

    @Test("an exact name wins, then an active child; two archived ones are ambiguous")
    func exactThenActive() throws {
        let r = try householdWithChildren(["Ava"], seed: 3)
        let old = try r.child(named: "Ava")
        try r.setArchived("Ava", true)
        let new = try r.addChild(name: "ava")   // allowed: the other Ava is archived
        // Exact (case-sensitive) matches first.
        #expect(try r.resolveChild("Ava").id == old.id)
        #expect(try r.resolveChild(" ava ").id == new.id)
        // Up to case: both match, and the active one wins.
        #expect(try r.resolveChild("AVA").id == new.id)
        #expect(try r.resolveChild("\u{00C1}va").id == new.id)
        #expect(try r.post("AVA", signedCents: 1, note: "", source: "give").transaction.childID == new.id)
        // The exact match is the archived one: refused as archived, nothing written.
        let before = try r.view()
        #expect(throws: LedgerError.archived("Ava")) { try r.post("Ava", signedCents: 1, note: "", source: "give") }
        #expect(try r.view() == before)
        // Both archived: ambiguous, candidates listed, the id prefix decides.
        try r.setArchived("ava", true)
        let expected = ["Ava (\(old.id.hex.prefix(8)), archived)", "ava (\(new.id.hex.prefix(8)), archived)"]
        #expect(throws: LedgerError.ambiguousChild("AVA", candidates: expected)) { try r.resolveChild("AVA") }
        #expect(try r.resolveChild(String(new.id.hex.prefix(8))).id == new.id)
        // A second active "Ava", up to case or accents, is refused.
        try r.setArchived(String(new.id.hex.prefix(8)), false)
        #expect(throws: LedgerError.badName("there is already a child named \"AVA\"")) { try r.addChild(name: "AVA") }
        #expect(throws: LedgerError.badName("there is already a child named \"\u{00C1}va\"")) { try r.addChild(name: "\u{00C1}va") }
    }

    @Test("names match up to case and accents, in either composition")
    func accentsFold() throws {
        let r = try householdWithChildren(["\u{00C9}mile", "Zo\u{00EB}"], seed: 3)
        let emile = try r.child(named: "\u{00C9}mile"), zoe = try r.child(named: "Zo\u{00EB}")
        for query in ["\u{00C9}mile", "emile", "EMILE", "E\u{301}mile", "\u{00E9}MILE"] {
            #expect(try r.resolveChild(query).id == emile.id, "query \(query)")
        }
        for query in ["zoe", "ZOE", "Zoe\u{308}"] { #expect(try r.resolveChild(query).id == zoe.id, "query \(query)") }
        #expect(Text.folded("\u{00C9}mile") == Text.folded("EMILE"))
        #expect(Text.folded("Max") == "max")
    }

    @Test("restoring an archived child whose name an active child now has is refused; nothing changes")
    func restoreNameTaken() throws {
        let r = try householdWithChildren(["Ava"], seed: 3)
        let old = try r.child(named: "Ava")
        try r.setArchived("Ava", true)
        _ = try r.addChild(name: "\u{00E1}va")
        let before = try r.view()
        #expect(throws: LedgerError.restoreNameTaken("Ava", id: old.id, active: "\u{00E1}va")) { try r.setArchived("Ava", false) }
        #expect(try r.view() == before)
        // After a rename of the archived one, it comes back.
        _ = try r.renameChild("Ava", to: "Ava B")
        #expect(try r.setArchived("Ava B", false).isArchived == false)
    }

    @Test("active children with one folded name are grouped; archived ones and distinct names are not")
    func sameNameGroups() throws {
        let ids = (1...5).map { RecordID(high: 0x1000_0000_0000_4000 + UInt64($0) << 48, low: 0x8000_0000_0000_0000 + UInt64($0)) }
        let r = try childrenWithIDs([(ids[0], "Max"), (ids[1], "max"), (ids[2], "Ben"), (ids[3], "M\u{00C1}X"), (ids[4], "\u{00C9}mile")])
        let groups = Replica.sameNameGroups(try r.children())
        #expect(groups.map { Set($0.map(\.id)) } == [[ids[0], ids[1], ids[3]]])
        try r.setArchived(String(ids[1].hex.prefix(8)), true)
        try r.setArchived(String(ids[3].hex.prefix(8)), true)
        #expect(Replica.sameNameGroups(try r.children(includeArchived: true)).isEmpty)
        // Resolving "max": the exact one wins.
        #expect(try r.resolveChild("max").id == ids[1])
    }

    @Test("concurrent additions of one name on two replicas are told apart by id")
    func concurrentSameName() throws {
        let a = try householdWithChildren([], seed: 3)
        let b = try makeReplica(seed: 4)
        try b.receive(try a.changeLog())
        let fromA = try a.addChild(name: "Ava")
        let fromB = try b.addChild(name: "Ava")
        try a.receive(try b.ownChanges())
        try b.receive(try a.ownChanges())
        for r in [a, b] {
            #expect(throws: LedgerError.self) { try r.resolveChild("ava") }
            #expect(try r.resolveChild(fromA.id.hex).id == fromA.id)
            #expect(try r.resolveChild(fromB.id.hex).id == fromB.id)
        }
        #expect(try a.view() == b.view())
    }

    /// Children with chosen ids, made by hand-written changes.
    func childrenWithIDs(_ kids: [(RecordID, String)]) throws -> Replica {
        let r = try householdWithChildren([], seed: 3)
        for (i, (id, name)) in kids.enumerated() {
            try r.receive(change(0x50, UInt64(i + 1), millis: 2_000_000, [
                .createChild(ChildRecord(id: id, createdAtMillis: 2_000_000)),
                .setField(entity: id, field: .childName, value: .text(name)),
            ]))
        }
        return r
    }

    @Test("a prefix shared by two ids is ambiguous; a longer one is not")
    func ambiguousPrefix() throws {
        let first = RecordID(high: 0xABCD_0000_0000_4000, low: 0x8000_0000_0000_0001)
        let second = RecordID(high: 0xABCD_1111_0000_4000, low: 0x8000_0000_0000_0002)
        let r = try childrenWithIDs([(first, "Ava"), (second, "Ben")])
        #expect(throws: LedgerError.ambiguousChild("abcd", candidates: ["Ava (abcd0000)", "Ben (abcd1111)"])) {
            try r.resolveChild("abcd")
        }
        #expect(try r.resolveChild("abcd0").id == first)
        #expect(try r.resolveChild("ABCD-1").id == second)
    }

    @Test("a name wins over an id prefix that spells the same letters")
    func nameBeforePrefix() throws {
        let other = RecordID(high: 0xBEEF_0000_0000_4000, low: 0x8000_0000_0000_0001)
        let named = RecordID(high: 0x1234_0000_0000_4000, low: 0x8000_0000_0000_0002)
        let r = try childrenWithIDs([(other, "Ava"), (named, "Beef")])
        #expect(try r.resolveChild("beef").id == named)
        #expect(try r.resolveChild("beef0").id == other)
    }
}

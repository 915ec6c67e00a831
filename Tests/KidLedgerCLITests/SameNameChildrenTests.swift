import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerReplica
import KidLedgerDomain
import KidLedgerLMDB
@testable import KidLedgerDaemon

/// Children with one name up to case and accents (issue 23): how names resolve in the CLI, the
/// flags in `children` and `status` (text and `--json`), `child restore` refused and "did you
/// mean …?" (docs/CRDT.md, "Child names").
@Suite("Same-name children in the CLI")
struct SameNameChildrenTests {
    /// "max" as the other laptop added it while apart: written past this laptop's own check (that
    /// refuses a second active "Max"), as a sync would bring it.
    static func addAsAnotherLaptop(_ l: TestLedger, _ id: RecordID, _ name: String) throws {
        let replica = try Context(home: l.home, json: false, console: BufferConsole(), clock: SystemClock()).openReplicaForChanges()
        defer { (replica.store as? LMDBEnvironment)?.close() }
        try replica.commitLocal { _, hlc in
            ([.createChild(ChildRecord(id: id, createdAtMillis: hlc.millis)),
              .setField(entity: id, field: .childName, value: .text(name)),
              .setField(entity: id, field: .childArchived, value: .flag(false)),
              .setField(entity: id, field: .childSortOrder, value: .integer(5))], ())
        }
    }

    @Test("Max and max are flagged in children and status, and resolve by exact name; a rename clears the flag")
    func flaggedAndResolved() throws {
        try withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Max")
            l.ok("child", "add", "Ben")
            let other = RecordID(high: 0xABCD_EF01_0000_4000, low: 0x8000_0000_0000_0001)
            try Self.addAsAnotherLaptop(l, other, "max")
            let note = "note: Max (########) and max (abcdef01) have the same name up to case and accents (added on two laptops?); rename one (`kidledger child rename ID NEWNAME`) so each child has one name, or make them one child (`kidledger child merge FROM INTO`)\n"
            #expect(l.masked(l.ok("children")).replacingOccurrences(of: "max (########)", with: "max (abcdef01)") == """
                NAME  BALANCE  ID
                Max     $0.00  ########
                Ben     $0.00  ########
                max     $0.00  ########

                """ + note)
            let json = try #require(checkJSON(l, "children") as? [String: Any])
            let max = try #require(try childID(l, "Max"))
            #expect(json["sameNames"] as? [[String]] == [[max, other.description]], "\(json)")
            let status = try #require(checkJSON(l, "status") as? [String: Any])
            #expect(status["sameNames"] as? [[String]] == [[max, other.description]], "\(status)")
            #expect(l.ok("status").contains("note: Max ("), "status text")

            // Exact names pick one; a folded match of two active children is ambiguous.
            #expect(l.ok("give", "Max", "1") == "Gave $1.00 to Max. Balance: $1.00\n")
            #expect(l.ok("give", "max", "2") == "Gave $2.00 to max. Balance: $2.00\n")
            let ambiguous = l.run("give", "MAX", "1")
            #expect(ambiguous.code == 65 && l.masked(ambiguous.stderr)
                    == "kidledger: \"MAX\" matches more than one child: Max (########), max (########); name one by its id prefix\n")

            l.ok("child", "rename", "max", "Maxine")
            #expect(l.masked(l.ok("children")) == "NAME    BALANCE  ID\nMax       $1.00  ########\nBen       $0.00  ########\nMaxine    $2.00  ########\n")
            #expect((checkJSON(l, "children") as? [String: Any])?["sameNames"] as? [[String]] == [])
            #expect((checkJSON(l, "status") as? [String: Any])?["sameNames"] as? [[String]] == [])
            #expect(!l.ok("status").contains("note:"))
        }
    }

    func childID(_ l: TestLedger, _ name: String) throws -> String? {
        let list = (checkJSON(l, "children", "--all") as? [String: Any])?["children"] as? [[String: Any]] ?? []
        return list.first { $0["name"] as? String == name }?["id"] as? String
    }

    @Test("restoring a child whose name an active child took is refused and changes nothing; unknown names get did you mean")
    func restoreRefusedAndDidYouMean() throws {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            l.ok("give", "Ava", "1")
            l.ok("child", "archive", "Ava")
            l.ok("child", "add", "ava")
            let before = l.state()
            let refused = l.run("child", "restore", "Ava")
            #expect(refused.code == 65 && refused.stdout == "")
            #expect(l.masked(refused.stderr) == "kidledger: can't restore \"Ava\": the active child \"ava\" has that name now (up to case and accents); rename one of them first (`kidledger child rename ######## NEWNAME` renames the archived one)\n")
            #expect(l.state() == before)
            // Up to case, the active one is meant.
            #expect(l.ok("give", "AVA", "2") == "Gave $2.00 to ava. Balance: $2.00\n")
            let unknown = l.run("give", "Avx", "1")
            #expect(unknown.code == 65 && unknown.stderr == "kidledger: no child named \"Avx\"; did you mean \"ava\"? (see `kidledger children --all`)\n")
            let json = l.run("--json", "give", "Zed", "1")
            #expect(json.code == 65 && json.stderr.contains("no child named \\\"Zed\\\" (see"))
            l.ok("child", "rename", "Ava", "Ava B")
            #expect(l.ok("child", "restore", "Ava B") == "Restored Ava B.\n")
        }
    }
}

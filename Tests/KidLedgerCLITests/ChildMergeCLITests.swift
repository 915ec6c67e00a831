import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerReplica
import KidLedgerDomain
import KidLedgerLMDB

/// `kidledger child merge FROM INTO` (issue 23, point 3): output, `--json`, refusals with their
/// exit codes, and what `children`, `balance`, `history` and names show after a merge
/// (docs/CRDT.md, "Child merges").
@Suite("child merge in the CLI")
struct ChildMergeCLITests {
    /// Max (this laptop) and max (as the other laptop added it while apart), $1.00 and $2.00.
    func twoMaxes(_ l: TestLedger) throws -> (upper: String, lower: String) {
        l.ok("init", "Home")
        l.ok("child", "add", "Max")
        let other = RecordID(high: 0xABCD_EF01_0000_4000, low: 0x8000_0000_0000_0001)
        try SameNameChildrenTests.addAsAnotherLaptop(l, other, "max")
        l.ok("give", "Max", "1")
        l.ok("give", "max", "2")
        let list = (checkJSON(l, "children") as? [String: Any])?["children"] as? [[String: Any]] ?? []
        let upper = try #require(list.first { $0["name"] as? String == "Max" }?["id"] as? String)
        return (String(upper.prefix(8)), "abcdef01")
    }

    @Test("merging Max into max: one line, one child, the sum; the flag goes; names follow")
    func golden() throws {
        try withLedger { l in
            let (upper, lower) = try twoMaxes(l)
            #expect(l.ok("children").contains("note: Max ("))
            #expect(l.ok("child", "merge", upper, lower) == "Merged Max (\(upper)) into max (\(lower)). Balance: $3.00\n")
            #expect(l.ok("children") == "NAME  BALANCE  ID\nmax     $3.00  \(lower)\n")
            #expect(l.ok("children", "--all") == "NAME  BALANCE  ID\nMax            \(upper)  merged into max\nmax     $3.00  \(lower)\n")
            #expect((checkJSON(l, "children") as? [String: Any])?["sameNames"] as? [[String]] == [])
            #expect(!l.ok("status").contains("note:"))
            #expect(l.ok("balance") == "max  $3.00\n")
            // The merged child's name and id prefix stand for the child it was merged into.
            #expect(l.ok("balance", "Max") == "max: $3.00\n")
            #expect(l.ok("balance", upper) == "max: $3.00\n")
            #expect(l.ok("give", "Max", "0.50") == "Gave $0.50 to max. Balance: $3.50\n")
            let history = l.ok("history", "max", "--utc")
            #expect(history.components(separatedBy: "\n").filter { $0.contains("  max  ") }.count == 3, "\(history)")
            #expect(l.ok("history", upper, "--utc") == history)
            // Undo still works on the merged child's entries, and reports the child they count in.
            l.ok("undo")  // the $0.50
            l.ok("undo")  // Dad's $2.00 on max
            #expect(l.ok("undo").hasPrefix("Undid +$1.00 for max ("))
            #expect(l.ok("balance", "max") == "max: $0.00\n")
            #expect(l.masked(l.ok("verify")).hasPrefix("ok: 6 transactions, 2 children"))
            // Unmerged, Max counts on its own again (and is flagged with max once more).
            #expect(l.ok("child", "unmerge", "Max") == "Max (\(upper)) counts on its own again. Balance: $0.00; max: $0.00\n")
            #expect(l.ok("children").hasPrefix("NAME  BALANCE  ID\nMax     $0.00  \(upper)\nmax     $0.00  \(lower)\nnote: Max ("))
            let doc = try #require(checkJSON(l, "child", "merge", upper, lower) as? [String: Any])
            #expect((doc["into"] as? [String: Any])?["transactionCount"] as? NSNumber == 6)
            let json = try #require(checkJSON(l, "child", "unmerge", upper) as? [String: Any])
            #expect((json["child"] as? [String: Any])?["mergedInto"] is NSNull && (json["was"] as? [String: Any])?["name"] as? String == "max")
        }
    }

    @Test("--json: from and into with their totals, mergedInto, the allowance it stopped")
    func json() throws {
        try withLedger { l in
            let (upper, lower) = try twoMaxes(l)
            l.ok("allowance", "set", "Max", "5", "--every", "week")
            let text = l.ok("child", "merge", "Max", lower)
            #expect(text.contains("Max's allowance ($5.00 every week on "), "\(text)")
            l.ok("child", "add", "Ben")
            let doc = try #require(checkJSON(l, "child", "merge", "Ben", "max") as? [String: Any])
            let from = try #require(doc["from"] as? [String: Any]), into = try #require(doc["into"] as? [String: Any])
            #expect(from["name"] as? String == "Ben" && (from["balanceCents"] as? NSNumber)?.int64Value == 0)
            #expect((from["mergedInto"] as? String)?.hasPrefix(lower) == true)
            #expect(into["name"] as? String == "max" && (into["balanceCents"] as? NSNumber)?.int64Value == 300, "\(into)")
            #expect(into["mergedInto"] is NSNull && doc["stoppedAllowance"] is NSNull)
            let all = (checkJSON(l, "children", "--all") as? [String: Any])?["children"] as? [[String: Any]] ?? []
            let maxRow = try #require(all.first { ($0["id"] as? String)?.hasPrefix(upper) == true })
            #expect((maxRow["balanceCents"] as? NSNumber)?.int64Value == 100, "\(maxRow)")
            #expect((maxRow["mergedInto"] as? String)?.hasPrefix(lower) == true)
            #expect(l.ok("allowance", "list").contains("No allowance yet"))
        }
    }

    @Test("refusals: exit 65, the message, nothing changed; 64 for a wrong number of arguments")
    func refusals() throws {
        try withLedger { l in
            let (upper, lower) = try twoMaxes(l)
            l.ok("child", "add", "Ben")
            l.ok("child", "add", "Cleo")
            l.ok("child", "archive", "Cleo")
            func refused(_ arguments: [String], _ code: Int32, _ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
                let before = l.state()
                let outcome = l.run(arguments)
                #expect(outcome.code == code && outcome.stdout == "", sourceLocation: sourceLocation)
                #expect(l.masked(outcome.stderr) == "kidledger: \(message)\n", sourceLocation: sourceLocation)
                #expect(l.state() == before, sourceLocation: sourceLocation)
            }
            refused(["child", "merge", "Ben", "ben"], 65, "can't merge Ben into itself")
            refused(["child", "merge", "Ben", "Zed"], 65, "no child named \"Zed\" (see `kidledger children --all`)")
            refused(["child", "merge", "Bem", "max"], 65, "no child named \"Bem\"; did you mean \"Ben\"? (see `kidledger children --all`)")
            refused(["child", "merge", "MAX", "Ben"], 65, "\"MAX\" matches more than one child: Max (########), max (########); name one by its id prefix")
            refused(["child", "merge", "Ben", "Cleo"], 65, "Cleo is archived: run `kidledger child restore Cleo` first")
            refused(["child", "merge", "Ben"], 64, "`child merge` takes 2 arguments, got 1\nusage: kidledger child merge FROM INTO")
            l.ok("child", "merge", upper, lower)
            refused(["child", "merge", upper, "Ben"], 65, "Max was merged into max already")
            refused(["child", "merge", "Ben", upper], 65, "Max was merged into max: merge into max instead")
            refused(["child", "merge", "max", "Max"], 65, "Max was merged into max: merge into max instead")
            refused(["child", "merge", "max", "MAX"], 65, "can't merge max into itself")
            refused(["child", "unmerge", "max"], 65, "max is not merged into another child (`kidledger children --all` shows merged children)")
            let json = l.run("child", "merge", "Ben", "ben", "--json")
            #expect(json.code == 65 && json.stderr.contains("\"code\":\"dataError\""))
        }
    }
}

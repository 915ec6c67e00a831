import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI

/// `undo` of a give-all/take-all reverses the batch; `undo ID`, `undo --mine`, `undo --dry-run`
/// (issue 23, point 2).
@Suite("undo matches what was done")
struct BatchUndoCLITests {
    @Test func dryRunThenUndoOfAGiveAll() {
        withLedger { l in
            l.ok("init", "Home", "--name", "Mom")                      // 11:06
            l.ok("child", "add", "Ava")                               // 11:07
            l.ok("child", "add", "Ben")                               // 11:08
            l.ok("give", "Ava", "5", "--note", "birthday")            // 11:09
            l.ok("give-all", "2", "--note", "weekly")                 // 11:10
            #expect(maskFingerprints(l.ok("undo", "--dry-run")) == """
                Undo would reverse the give-all of 2026-11-18 11:10 UTC, made by Mom (xxxx-xxxx-xxxx-xxxx), for 2 children:
                  Ava  +$2.00
                  Ben  +$2.00

                """)
            #expect(maskFingerprints(l.ok("undo")) == """
                Undid the give-all of 2026-11-18 11:10 UTC, made by Mom (xxxx-xxxx-xxxx-xxxx), for 2 children:
                  Ava  +$2.00  $5.00
                  Ben  +$2.00  $0.00

                """)                                                  // 11:11
            #expect(l.ok("balance") == "Ava  $5.00\nBen  $0.00\n")
            #expect(maskFingerprints(l.ok("undo", "--dry-run")) == "Undo would reverse +$5.00 for Ava (2026-11-18 11:09 UTC), made by Mom (xxxx-xxxx-xxxx-xxxx).\n")
        }
    }

    @Test func undoByIDReversesItsBatchAndNamesTheAuthor() throws {
        try withLedger { l in
            l.ok("init", "Smiths", "--name", "Dad")
            l.ok("child", "add", "Ava")
            l.ok("child", "add", "Ben")
            #expect(l.run("take-all", "1", "--note", "fine").code == 0)   // with a warning: balances below zero
            l.ok("give", "Ava", "3")
            let history = try #require(checkJSON(l, "history") as? [String: Any])
            let entries = try #require(history["transactions"] as? [[String: Any]])
            let fine = entries.compactMap { $0["transaction"] as? [String: Any] }.filter { $0["source"] as? String == "take-all" }
            #expect(fine.count == 2)
            let id = try #require(fine.first?["id"] as? String)
            let preview = try #require(checkJSON(l, "undo", id, "--dry-run") as? [String: Any])
            #expect((preview["wouldUndoAll"] as? [Any])?.count == 2, "\(preview)")
            let undone = try #require(checkJSON(l, "undo", id) as? [String: Any])
            #expect((undone["entries"] as? [Any])?.count == 2, "\(undone)")
            #expect((undone["originalAuthor"] as? [String: Any])?["name"] as? String == "Dad")
            #expect(l.ok("balance") == "Ava  $3.00\nBen  $0.00\n")
            // The same id again, an undo's id, an unknown id, and a word that is no id.
            let again = l.run("undo", id)
            #expect(again.code == 65 && again.stderr.contains("can't undo: entry \(id) is already undone"), "\(again.stderr)")
            let unknown = l.run("undo", "00000000-0000-4000-8000-000000000000")
            #expect(unknown.code == 65 && unknown.stderr.contains("no transaction with id 00000000-0000-4000-8000-000000000000"), "\(unknown.stderr)")
            let word = l.run("undo", "Ava")
            #expect(word.code == 65 && word.stderr.contains("\"Ava\" is not a transaction id"), "\(word.stderr)")
            // A short id: the 8 last digits of history's ID column, or any 4 or more.
            let give = try #require(entries.compactMap { $0["transaction"] as? [String: Any] }.first { $0["source"] as? String == "give" })
            let giveID = try #require(give["id"] as? String)
            let short = String(giveID.suffix(8))
            #expect(l.ok("history", "Ava").contains("  \(short)\n"), "history shows the short id")
            #expect(maskFingerprints(l.ok("undo", short, "--dry-run")).hasPrefix("Undo would reverse +$3.00 for Ava"))
            #expect(maskFingerprints(l.ok("undo", String(giveID.suffix(14)).uppercased(), "--dry-run")).hasPrefix("Undo would reverse +$3.00 for Ava"))
            let absent = l.run("undo", short == "ffffffff" ? "eeeeeeee" : "ffffffff")
            #expect(absent.code == 65 && absent.stderr.contains("no transaction has an id ending in"), "\(absent.stderr)")
            let undoEntries = try #require(checkJSON(l, "history") as? [String: Any])["transactions"] as? [[String: Any]]
            let anUndo = try #require(undoEntries?.compactMap { $0["transaction"] as? [String: Any] }.first { $0["source"] as? String == "undo" })
            let undoID = try #require(anUndo["id"] as? String)
            let ofUndo = l.run("undo", String(undoID.suffix(8)))
            #expect(ofUndo.code == 65 && ofUndo.stderr.contains("can't undo: entry \(undoID) is itself an undo: an undo cannot be undone"), "\(ofUndo.stderr)")
            let tooShort = l.run("undo", "abc")
            #expect(tooShort.code == 65 && tooShort.stderr.contains("at least 4 digits"), "\(tooShort.stderr)")
            let both = l.run("undo", id, "--mine")
            #expect(both.code == 64 && both.stderr.contains("`undo` takes an ID or --mine, not both"), "\(both.stderr)")
            // --mine: the newest of this member's entries (here Ava's $3).
            #expect(l.ok("undo", "--mine").hasPrefix("Undid +$3.00 for Ava"))
            let none = l.run("undo", "--mine")
            #expect(none.code == 65 && none.stderr.contains("nothing of yours to undo"), "\(none.stderr)")
        }
    }
}

import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI

/// Tests that show bugs found while writing this suite. They fail until the bug is fixed (see
/// each test's comment for the cause and the fix).
@Suite("Regressions found by review")
struct BugTests {
    /// When the wall clock steps back (NTP, a suspended VM, a wrong clock fixed by hand), the
    /// hybrid logical clock keeps the last millisecond and only bumps its counter, so every
    /// transaction made until the wall clock catches up gets the same `createdAtMillis`.
    /// `byTime`/`byChild` keys are createdAtMillis + random id (Sources/KidLedgerReplica/Store/Tables.swift,
    /// Keys.byTime / Keys.byChild), so `history` lists those transactions in random order and
    /// `undo` (Replica.newestUndoable, Replica+Undo.swift) reverses a random one of them
    /// instead of the newest. Fix: order by the full HLC (millis + counter), e.g. store the
    /// change's HLC counter in the transaction and put it between createdAt and id in both keys.
    /// (The chance that this test passes by luck is 1/12! for the order.)
    @Test func transactionsAfterTheClockSteppedBackKeepTheirOrder() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            l.ok("give", "Ava", "100")
            l.setClock(TestLedger.startMillis - 3_600_000) // the wall clock stepped back one hour
            l.step = 1_000
            for dollars in 1...12 { l.ok("give", "Ava", "\(dollars)") }
            let history = l.run("--json", "history", "Ava", "--limit", "0")
            let entries = ((parseJSON(history.stdout) as? [String: Any])?["transactions"] as? [[String: Any]]) ?? []
            let amounts = entries.compactMap { (($0["transaction"] as? [String: Any])?["amountCents"] as? NSNumber)?.int64Value }
            #expect(amounts == (1...12).reversed().map { Int64($0) * 100 } + [10_000], "history must be newest first")
            #expect(l.ok("undo").hasPrefix("Undid +$12.00 for Ava"), "undo must reverse the newest transaction")
        }
    }

    /// `child add` refuses a second active child with the same name (any case), but `child rename`
    /// does not check, so the invariant is bypassed and "Ava" then names two children (every
    /// command naming her fails as ambiguous). Replica.renameChild (Replica+Ledger.swift) has no
    /// equivalent of addChild's check. Fix: in renameChild's commitLocal, throw
    /// `.badName("there is already a child named \"\(name)\"")` when another active child (id
    /// different from the renamed one) has the same lowercased name.
    @Test func renameToTheNameOfAnotherActiveChildIsRefused() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            l.ok("child", "add", "Ben")
            // Renaming to a different case of the child's own name stays allowed.
            #expect(l.ok("child", "rename", "Ava", "AVA") == "Renamed Ava to AVA.\n")
            let rename = l.run("child", "rename", "Ben", "ava")
            #expect(rename.code == 65, "\(rename)")
            #expect(rename.stderr == "kidledger: there is already a child named \"ava\"\n")
            #expect(l.run("give", "ava", "1").code == 0, "ava must still name exactly one child")
        }
    }

    /// CLI.dispatch (Sources/KidLedgerCLI/CLI.swift) removes the command words from the arguments
    /// by their first *occurrence*, not at the positions `commandWords` found them. When an
    /// option value before the command equals a command word, that value is removed instead and
    /// the options shift: here `--note` swallows `--json` and `give` becomes a third positional
    /// (exit 64 "`give` takes 2 arguments, got 3"). Fix: have commandWords return the indices of
    /// the words it kept and remove the command words at those indices.
    @Test func optionValueEqualToTheCommandWord() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            let outcome = l.run("--note", "give", "--json", "give", "Ava", "1")
            #expect(outcome.code == 0, "\(outcome)")
            guard outcome.code == 0 else { return }
            let note = ((parseJSON(outcome.stdout) as? [String: Any])?["transaction"] as? [String: Any])?["note"] as? String
            #expect(note == "give")
        }
    }
}

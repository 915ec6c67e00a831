import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain

/// `Context.change` (issue 42, point 3): the gate, the allowance periods due and the command in one
/// write transaction.
@Suite("A command's change")
struct LedgerChangeTests {
    /// A give that fails after the periods due were paid keeps them paid and says so, before its
    /// error; the next command pays nothing again.
    @Test func periodsPaidBeforeAFailedGiveStayPaid() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            l.ok("allowance", "set", "Ava", "2", "--every", "week")
            l.setClock(TestLedger.startMillis + 7 * 86_400_000)
            let failed = l.run("give", "Bob", "1")
            #expect(failed.code == 65, "\(failed)")
            #expect(failed.stdout.hasPrefix("Paid Ava's allowance of $2.00 for the period from 2026-11-25"), "\(failed)")
            #expect(l.ok("balance", "Ava") == "Ava: $4.00\n")
            #expect(l.ok("give", "Ava", "1") == "Gave $1.00 to Ava. Balance: $5.00\n")
        }
    }

    /// Refused by the gate (another account is signed in), a give pays nothing.
    @Test func aGiveRefusedByTheGatePaysNothing() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            l.ok("allowance", "set", "Ava", "2", "--every", "week")
            l.ok("account", "switch", "other", "--create")
            l.setClock(TestLedger.startMillis + 7 * 86_400_000)
            let refused = l.run("give", "Ava", "1")
            #expect(refused.code == 77 && refused.stdout.isEmpty, "\(refused)")
            #expect(l.ok("balance", "Ava") == "Ava: $2.00\n")
        }
    }
}

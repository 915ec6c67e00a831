import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain

/// `household limit [AMOUNT|never]` (issue 41, point 5): the household's limit for asking first,
/// a replicated register; `quick limit` is its deprecated alias; `quick show` reports it.
@Suite("The household's limit in the CLI")
struct CLIHouseholdLimitTests {
    @Test func showSetNeverAndJSON() {
        withLedger { l in
            #expect(l.run("household", "limit").code == 65, "no household yet")
            l.ok("init", "Home")
            #expect(l.ok("household", "limit") == "The page asks before a give or take above $1000.00\n")
            #expect(l.ok("household", "limit", "--json") == "{\"confirmAboveCents\":100000}\n")
            #expect(l.ok("household", "limit", "$250.50") == "The page asks before a give or take above $250.50 on every laptop.\n")
            #expect(l.ok("household", "limit", "--json") == "{\"confirmAboveCents\":25050}\n")
            #expect(l.ok("quick", "show", "--json").hasSuffix("\"confirmAboveCents\":25050}\n"))
            #expect(l.ok("household", "limit", "never", "--json") == "{\"confirmAboveCents\":0}\n")
            #expect(l.ok("household", "limit") == "The page never asks before a give or take (the household's limit is \"never\")\n")
            #expect(l.ok("household", "limit", "1,500") == "The page asks before a give or take above $1500.00 on every laptop.\n")
        }
    }

    @Test func refusalsChangeNothing() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("household", "limit", "500")
            let before = l.state()
            let cases: [([String], Int32, String)] = [
                (["household", "limit", "abc"], 65, "\"abc\" is not an amount"),
                (["household", "limit", "0"], 65, "the limit must be more than $0.00: type \"never\" for a page that never asks"),
                (["household", "limit", "--", "-5"], 65, "amount must not be negative"),
                (["household", "limit", "1.001"], 65, "fraction of a cent"),
                (["household", "limit", "500"], 65, "the household's limit is already $500.00"),
                (["household", "limit", "1", "2"], 64, "household limit"),
            ]
            for (words, code, message) in cases {
                let outcome = l.run(words)
                #expect(outcome.code == code && outcome.stderr.contains(message), "\(words): \(outcome)")
                #expect(outcome.stdout.isEmpty, "\(words): \(outcome)")
            }
            #expect(l.state() == before)
            #expect(l.ok("household", "limit", "--json") == "{\"confirmAboveCents\":50000}\n")
        }
    }

    @Test func quickLimitIsADeprecatedAlias() {
        withLedger { l in
            l.ok("init", "Home")
            let outcome = l.run("quick", "limit", "300", "--json")
            #expect(outcome.code == 0 && outcome.stdout == "{\"confirmAboveCents\":30000}\n", "\(outcome)")
            #expect(outcome.stderr.contains("`quick limit` is deprecated: it sets the household's limit now"), "\(outcome)")
            #expect(l.ok("household", "limit", "--json") == "{\"confirmAboveCents\":30000}\n")
            #expect(l.run("quick", "limit", "zero").code == 65)
        }
    }
}

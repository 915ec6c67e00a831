import Foundation
import KidLedgerCLITestSupport
import Testing
import KidLedgerDomain
@testable import KidLedgerCLI

/// Exact text output of the commands, run in process with fixed clocks (see ``TestLedger``).
/// Id prefixes and digests are random, so they are masked (`########`, `<digest>`).
@Suite("Golden output")
struct GoldenOutputTests {
    @Test func initAndChildAdd() {
        withLedger { l in
            #expect(maskRecoverySecret(l.masked(l.ok("init", "The Smiths"))) == "Created household \"The Smiths\" in $HOME.\n" + initRecoveryNotice)
            #expect(l.masked(l.ok("child", "add", "Ava")) == "Added Ava (id ########).\n")
            #expect(l.masked(l.ok("child", "add", "  Maximilian ")) == "Added Maximilian (id ########).\n")
            #expect(l.ok("child", "rename", "maximilian", "Max") == "Renamed Maximilian to Max.\n")
            let restore = l.run("child", "restore", "Max")
            #expect(restore.code == 65 && restore.stdout == "" && restore.stderr == "kidledger: Max is already active\n")
        }
    }

    @Test func moneyBalancesAndChildren() {
        withLedger { l in
            l.ok("init", "The Smiths")
            l.ok("child", "add", "Ava")
            l.ok("child", "add", "Maximilian")
            #expect(l.ok("give", "Ava", "1.25", "--note", "chores") == "Gave $1.25 to Ava. Balance: $1.25\n")
            #expect(l.ok("take", "ava", "quarter") == "Took $0.25 from Ava. Balance: $1.00\n")
            #expect(l.ok("give-all", "5", "--note", "weekly allowance") == """
                Gave $5.00 to 2 children:
                  Ava         $6.00
                  Maximilian  $5.00

                """)
            #expect(l.ok("take-all", "0.5") == """
                Took $0.50 from 2 children:
                  Ava         $5.50
                  Maximilian  $4.50

                """)
            #expect(l.ok("balance") == "Ava         $5.50\nMaximilian  $4.50\n")
            #expect(l.ok("balance", "MAXIMILIAN") == "Maximilian: $4.50\n")
            #expect(l.masked(l.ok("children")) == """
                NAME        BALANCE  ID
                Ava           $5.50  ########
                Maximilian    $4.50  ########

                """)
            #expect(l.ok("child", "archive", "Maximilian")
                    == "Archived Maximilian; history is kept (`kidledger child restore Maximilian` brings it back).\n")
            #expect(l.masked(l.ok("children")) == "NAME  BALANCE  ID\nAva     $5.50  ########\n")
            #expect(l.masked(l.ok("children", "--all")) == """
                NAME        BALANCE  ID
                Ava           $5.50  ########
                Maximilian    $4.50  ########  archived

                """)
            #expect(l.ok("balance") == "Ava  $5.50\n")
            #expect(l.ok("balance", "Maximilian") == "Maximilian: $4.50\n")
            #expect(l.ok("give-all", "1") == "Gave $1.00 to 1 child:\n  Ava  $6.50\n")
            #expect(l.ok("child", "restore", "maximilian") == "Restored Maximilian.\n")
        }
    }

    @Test func emptyLists() {
        withLedger { l in
            l.ok("init", "Home")
            #expect(l.ok("children") == "No children yet: `kidledger child add NAME`.\n")
            #expect(l.ok("balance") == "No children yet: `kidledger child add NAME`.\n")
            #expect(l.ok("history") == "No transactions yet.\n")
        }
    }

    @Test func historyUndoAndVerify() {
        withLedger { l in
            l.ok("init", "Home")                                      // 11:06
            l.ok("child", "add", "Ava")                               // 11:07
            l.ok("give", "Ava", "2", "--note", "birthday")            // 11:08
            l.ok("take", "Ava", "dime")                               // 11:09
            l.ok("give", "Ava", "0.75")                               // 11:10
            #expect(maskFingerprints(l.ok("undo")) == "Undid +$0.75 for Ava (2026-11-18 11:10 UTC, made by member (xxxx-xxxx-xxxx-xxxx)). Balance: $1.90\n") // 11:11
            #expect(maskIDs(maskFingerprints(l.ok("history"))) == """
                WHEN (UTC)        CHILD  AMOUNT  SOURCE  BY                            ID        NOTE
                2026-11-18 11:11  Ava    -$0.75  undo    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx  undo $0.75
                2026-11-18 11:10  Ava    +$0.75  give    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx  (undone)
                2026-11-18 11:09  Ava    -$0.10  take    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx
                2026-11-18 11:08  Ava    +$2.00  give    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx  birthday

                """)                                                  // 11:12
            #expect(maskFingerprints(l.ok("undo")) == "Undid -$0.10 for Ava (2026-11-18 11:09 UTC, made by member (xxxx-xxxx-xxxx-xxxx)). Balance: $2.00\n") // 11:13
            #expect(maskIDs(maskFingerprints(l.ok("history", "Ava", "--limit", "2"))) == """
                WHEN (UTC)        CHILD  AMOUNT  SOURCE  BY                            ID        NOTE
                2026-11-18 11:13  Ava    +$0.10  undo    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx  undo -$0.10
                2026-11-18 11:11  Ava    -$0.75  undo    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx  undo $0.75

                """)                                                  // 11:14
            #expect(maskFingerprints(l.ok("undo")) == "Undid +$2.00 for Ava (2026-11-18 11:08 UTC, made by member (xxxx-xxxx-xxxx-xxxx)). Balance: $0.00\n") // 11:15
            #expect(l.masked(l.ok("verify")) == "ok: 6 transactions, 1 child, 9 changes; digest <digest>\n")
            #expect(l.masked(l.ok("digest")) == "<digest>\n")
            let digest = l.ok("digest")
            #expect(l.ok("verify").hasSuffix("digest " + digest))
        }
    }

    @Test func exportThenImport() throws {
        withLedger { a in
            withLedger { b in
                let csv = a.file("ledger.csv")
                a.ok("init", "A")                                      // 11:06
                a.ok("child", "add", "Ava")                            // 11:07
                a.ok("child", "add", "Ben")                            // 11:08
                a.ok("give", "Ava", "1.25", "--note", "chores, \"big\" ones") // 11:09
                a.ok("give", "Ben", "3")                               // 11:10
                a.ok("undo")                                           // 11:11
                #expect(a.masked(a.ok("export", "--csv", csv)) == "Exported 3 transactions to $TMP/ledger.csv.\n")
                let text = (try? String(contentsOfFile: csv, encoding: .utf8)) ?? ""
                let lines = text.components(separatedBy: "\r\n")
                #expect(lines.count == 5 && lines.last == "", "4 CRLF-terminated lines: \(text)")
                #expect(lines.first == "id,createdAt,child,childId,amountCents,amount,note,source,reverses")
                #expect(lines.count > 1 && lines[1].contains(",2026-11-18T11:09:40.000Z,Ava,"))
                #expect(lines.count > 1 && lines[1].hasSuffix(",125,$1.25,\"chores, \"\"big\"\" ones\",give,"))
                #expect(lines.count > 3 && lines[3].contains(",-300,-$3.00,undo $3.00,undo,"))

                #expect(a.masked(a.ok("import", "--csv", csv))
                        == "Imported 0 transactions from $TMP/ledger.csv (3 already present).\n")

                b.ok("init", "B")
                #expect(b.ok("import", "--csv", csv) == "Imported 3 transactions from \(csv); added Ava, Ben.\n")
                #expect(b.ok("import", "--csv", csv) == "Imported 0 transactions from \(csv) (3 already present).\n")
                #expect(b.ok("balance") == "Ava  $1.25\nBen  $0.00\n")
                #expect(maskIDs(maskFingerprints(b.ok("history"))) == """
                    WHEN (UTC)        CHILD  AMOUNT  SOURCE  BY                            ID        NOTE
                    2026-11-18 11:11  Ben    -$3.00  undo    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx  undo $3.00
                    2026-11-18 11:10  Ben    +$3.00  give    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx  (undone)
                    2026-11-18 11:09  Ava    +$1.25  give    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx  chores, "big" ones

                    """)
                #expect(b.masked(b.ok("verify")) == "ok: 3 transactions, 2 children, 3 changes; digest <digest>\n")
                #expect(a.ok("balance") == b.ok("balance"))
            }
        }
    }

    static let overview = """
        usage: kidledger [--home DIR] [--json] [--utc] COMMAND [ARGS]

        A local-first family allowance ledger.

        Commands:
          init NAME [--account NAME] [--name DISPLAY]  create a household that this device owns
          child add NAME                               add a child
          child rename CHILD NAME                      rename a child
          child archive CHILD                          archive a child (history is kept)
          child restore CHILD                          restore an archived child
          child merge FROM INTO                        make two children one (one child added on two laptops)
          child unmerge CHILD                          undo a child merge: CHILD counts on its own again
          children [--all]                             list children with balances
          give CHILD AMOUNT [--note T]                 give money to a child
          take CHILD AMOUNT [--note T]                 take money from a child
          give-all AMOUNT [--note T]                   give every active child the same amount
          take-all AMOUNT [--note T]                   take the same amount from every active child
          balance [CHILD]                              show balances
          history [CHILD] [--limit N]                  list transactions, newest first
          undo [ID | --mine] [--dry-run]               reverse the newest transaction not yet undone
          allowance set CHILD AMOUNT --every PERIOD    pay a child AMOUNT every week or month
          allowance list                               list allowance schedules
          allowance stop CHILD|SCHEDULE-ID             stop a child's allowance
          conflicts [CHILD]                            show what concurrent edits lost, and same-id conflicts
          digest                                       print the replica's state digest
          verify                                       check the replica's integrity
          export --csv FILE                            write every transaction to a CSV file
          import --csv FILE [--dry-run]                add transactions from a CSV file (idempotent)
          peer add HOST:PORT                           remember a peer to sync with
          peer remove HOST:PORT                        forget a peer
          peers                                        list known peers and their last sync
          status                                       sync state, pending changes, peers, digest
          serve --listen HOST:PORT [--ui ADDRESS]      run the peer daemon
          sync [HOST:PORT]                             sync now with one or all known peers
          invite [--address HOST:PORT] [--minutes N]   print a one-time code another device joins with
          join CODE [--replace] [--name DISPLAY]       join a household with a code from `kidledger invite`
          account show                                 show this device's signed-in identity
          account list                                 list the accounts this laptop has a key for
          account switch NAME [--create]               sign this device in as another account
          account rename NAME                          change the display name the household knows this member by
          members                                      list the household's members: names, key fingerprints, devices, revocations
          revoke MEMBER [--yes]                        revoke a member (owner only; permanent)
          recover [SECRET]                             take over as the household's owner with its recovery secret
          ui [--open] [--address-only]                 print a one-time sign-in address of this home's page (served by `serve`)
          quick show                                   this device's quick amounts (the page's buttons)
          quick set AMOUNT...                          set this device's quick amounts (1 to 6, unique)
          quick limit AMOUNT|never                     deprecated: `household limit AMOUNT` (the household's limit for asking first)
          open [--no-browser]                          start this home's service if needed and open the page, signed in
          service install [--listen ADDR] [--dry-run]  run the daemon as a systemd user service for this home
          service status                               whether this home's service is installed, enabled and running
          service uninstall                            stop, disable and remove this home's service
          household timezone [ZONE]                    show or set the household's time zone
          household limit [AMOUNT|never]               show or set the amount above which the page asks first
          backup FILE                                  write a copy of the whole home (ledger and this laptop's keys) to FILE
          backup schedule [FOLDER [--keep N] | --off]  have the daemon write a backup every day into FOLDER
          restore FILE [--replace]                     bring back a backup into an empty home (or a new laptop)
          relay serve --listen HOST:PORT               run a sealed relay for a household (on the relay machine)
          relay add CODE [--address HOST:PORT]         adopt a relay for the household (owner only)
          relay remove [FINGERPRINT]                   remove the household's relay (owner only)
          relay status                                 the household's relays and what they last told of each laptop
          relay sync                                   sync now through the household's relay(s)
          help [COMMAND]                               this overview, or a command's help

        Amounts: dollars ('$1.25', '$0.10', 5) or coins (penny, nickel, dime, quarter, half, dollar);
        quote an amount with $ ('$1.25'): unquoted, the shell replaces $1 before kidledger sees it.
        A child is named by name (any case) or by an id prefix.
        Times are shown in the household's time zone; --utc shows UTC; --json gives Unix milliseconds.
        Run `kidledger help COMMAND` (or `kidledger COMMAND --help`) for details.
        Exit codes: 0 ok, 64 usage, 65 bad data, 69 no peer reachable, 70 internal error or damaged store,
        74 file error, 75 temporary failure (retry), 77 not permitted.

        """

    /// The clock starts on Wednesday 2026-11-18 11:06:40 UTC (``TestLedger``).
    @Test func allowance() {
        withLedger { l in
            l.ok("init", "The Smiths")
            l.ok("child", "add", "Ava")
            l.ok("child", "add", "Ben")
            #expect(l.ok("allowance", "list") == "No allowance yet: `kidledger allowance set CHILD AMOUNT --every week`.\n")
            #expect(l.ok("allowance", "set", "Ava", "$5", "--every", "week", "--note", "weekly") == """
                Ava's allowance: $5.00 every week on wednesday (note "weekly").
                Paid Ava's allowance of $5.00 for the period from 2026-11-18 00:00 UTC. Balance: $5.00
                Next payment: 2026-11-25 00:00 UTC.

                """)
            #expect(l.ok("allowance", "set", "ben", "2.50", "--every", "month", "--on", "1") == """
                Ben's allowance: $2.50 every month on day 1.
                Next payment: 2026-12-01 00:00 UTC.

                """)
            #expect(l.masked(l.ok("allowance", "list")) == """
                CHILD  AMOUNT  EVERY  ON         NEXT (UTC)        NOTE    ID
                Ava     $5.00  week   wednesday  2026-11-25 00:00  weekly  ########
                Ben     $2.50  month  1          2026-12-01 00:00          ########

                """)
            // Two weeks later, the first command pays the periods missed, once each, then does its own work.
            l.setClock(TestLedger.startMillis + 14 * 86_400_000)
            #expect(l.ok("balance") == """
                Paid Ava's allowance of $5.00 for the period from 2026-11-25 00:00 UTC. Balance: $10.00
                Paid Ben's allowance of $2.50 for the period from 2026-12-01 00:00 UTC. Balance: $2.50
                Paid Ava's allowance of $5.00 for the period from 2026-12-02 00:00 UTC. Balance: $15.00
                Ava  $15.00
                Ben   $2.50

                """)
            #expect(l.ok("balance") == "Ava  $15.00\nBen   $2.50\n")
            // The amount alone: the day is kept.
            #expect(l.ok("allowance", "set", "Ava", "6", "--every", "week") == """
                Ava's allowance: $6.00 every week on wednesday (note "weekly").
                Next payment: 2026-12-09 00:00 UTC.

                """)
            #expect(l.ok("allowance", "stop", "Ben") == "Stopped Ben's allowance ($2.50 every month on day 1).\n")
            // Times are the household's (UTC here), whatever this laptop's TZ.
            l.timeZone = "America/New_York"
            #expect(l.masked(l.ok("allowance", "list")) == """
                CHILD  AMOUNT  EVERY  ON         NEXT (UTC)        NOTE    ID
                Ava     $6.00  week   wednesday  2026-12-09 00:00  weekly  ########
                Ben     $2.50  month  1          (stopped)                 ########

                """)
            l.timeZone = "UTC"
            for (arguments, code, message) in [
                (["allowance", "set", "Ava", "5"], 64, "`allowance set` needs --every week or --every month\nusage: kidledger allowance set CHILD AMOUNT --every week|month [--on DAY] [--note T]"),
                (["allowance", "set", "Ava", "5", "--every", "fortnight"], 64, "--every takes week or month, got \"fortnight\""),
                (["allowance", "set", "Ava", "5", "--every", "month", "--on", "31"], 64, "--on 31: not every month has a day 31; use 28 (or 1, the first of the next month)"),
                (["allowance", "set", "Ava", "5", "--every", "week", "--on", "someday"], 64, "--on takes a weekday for a weekly allowance (monday ... sunday), got \"someday\""),
                (["allowance", "set", "Zed", "5", "--every", "week"], 65, "no child named \"Zed\" (see `kidledger children --all`)"),
                (["allowance", "set", "Ava", "6", "--every", "week"], 65, "Ava's allowance is already $6.00 every week on wednesday"),
                (["allowance", "stop", "Ben"], 65, "Ben's allowance is already stopped"),
            ] {
                let outcome = l.run(arguments)
                #expect(outcome.code == Int32(code) && outcome.stdout == "" && outcome.stderr == "kidledger: \(message)\n", "\(arguments): \(outcome)")
            }
            // Archiving stops the allowance; restoring does not pay the weeks it was archived.
            l.ok("child", "archive", "Ava")
            l.setClock(TestLedger.startMillis + 35 * 86_400_000)
            l.ok("child", "restore", "Ava")
            #expect(l.ok("balance", "Ava") == "Ava: $15.00\n")
            #expect(l.run("allowance", "set", "Ava", "1", "--every", "week").code == 0)
            // export pays what is due first too (on standard error when the CSV goes to standard output).
            l.setClock(TestLedger.startMillis + 42 * 86_400_000)
            let export = l.run("export", "--csv", "-")
            #expect(export.code == 0 && export.stdout.hasPrefix("id,createdAt,"), "\(export)")
            #expect(export.stderr == "kidledger: Paid Ava's allowance of $1.00 for the period from 2026-12-30 00:00 UTC. Balance: $17.00\n", "\(export)")
            #expect(export.stdout.contains(",2026-12-30T00:00:00.000Z,Ava,"), "the CSV has the payment")
        }
    }

    @Test func topLevelHelpAndVersion() {
        withLedger { l in
            for arguments in [["--help"], ["-h"], ["--json", "--help"]] {
                let outcome = l.run(arguments)
                #expect(outcome.code == 0 && outcome.stdout == Self.overview && outcome.stderr == "", "\(arguments)")
            }
            let bare = l.run([])
            #expect(bare.code == 64 && bare.stdout == Self.overview)
            #expect(l.ok("--version") == "kidledger \(KidLedgerVersion.current)\n")
            #expect(l.ok("give", "--version") == "kidledger \(KidLedgerVersion.current)\n")
            #expect(!FileManager.default.fileExists(atPath: l.home), "help and version must not create the home")
        }
    }

    @Test func helpOfEveryCommand() {
        withLedger { l in
            #expect(CLI.commands.count == 56)
            for command in CLI.commands {
                let name = command.spec.name
                let words = name.split(separator: " ").map(String.init)
                for arguments in [words + ["--help"], ["--help"] + words, words + ["-h"]] {
                    let outcome = l.run(arguments)
                    #expect(outcome.code == 0, "\(arguments): \(outcome)")
                    #expect(outcome.stderr == "")
                    #expect(outcome.stdout == command.spec.help)
                    #expect(outcome.stdout.hasPrefix("usage: kidledger \(name)"), "\(arguments)")
                    #expect(outcome.stdout.hasSuffix("""

                        Global options:
                          --home DIR   the ledger home (else $KIDLEDGER_HOME, else ~/.kidledger)
                          --json       machine-readable output (an error is a JSON object on standard error)
                          --utc        show times in UTC (default: the household's time zone)
                          --help       show this help

                        """), "\(arguments)")
                    #expect(outcome.stdout.contains("\n\(command.spec.summary)\n"))
                }
            }
            #expect(l.ok("give", "--help") == """
                usage: kidledger give CHILD AMOUNT [--note T]

                give money to a child

                AMOUNT is positive: dollars ('$1.25', '$0.10', 5) or a coin (penny, nickel, dime, quarter, half, dollar).
                Quote an amount with $ in single quotes ('$1.25'): unquoted or in double quotes, the shell eats $1 and
                kidledger sees .25.
                  --note T   a note kept with the transaction

                Global options:
                  --home DIR   the ledger home (else $KIDLEDGER_HOME, else ~/.kidledger)
                  --json       machine-readable output (an error is a JSON object on standard error)
                  --utc        show times in UTC (default: the household's time zone)
                  --help       show this help

                """)
            #expect(l.ok("undo", "--help").hasPrefix("usage: kidledger undo [ID | --mine] [--dry-run]\n\nreverse the newest transaction not yet undone\n"))
            // Help wins over argument-count checks.
            #expect(l.ok("give", "Ava", "1", "2", "3", "--help").hasPrefix("usage: kidledger give "))
            #expect(!FileManager.default.fileExists(atPath: l.home), "help must not create the home")
        }
    }
}

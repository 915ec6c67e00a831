import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI

/// Issue 23 point 5: argument errors, `help`, duplicate options, `--json` errors, help texts.
@Suite("CLI frictions: arguments and help")
struct ArgumentFrictionTests {
    /// `kidledger --bogus` and `-x`: an error line on stderr and exit 64, not only the overview.
    @Test func unknownTopLevelOptions() {
        withLedger { l in
            for (arguments, option) in [(["--bogus"], "--bogus"), (["-x"], "-x"), (["--bogus", "give", "Ava", "1"], "--bogus"),
                                        (["--jsn"], "--jsn")] {
                let outcome = l.run(arguments)
                #expect(outcome.code == 64 && outcome.stdout == "", "\(arguments): \(outcome)")
                #expect(outcome.stderr.hasPrefix("kidledger: unknown option \(option)"), "\(arguments): \(outcome)")
            }
            #expect(l.run("--jsn").stderr.hasPrefix("kidledger: unknown option --jsn; did you mean --json?\n"))
            #expect(l.run("-x").stderr == "kidledger: unknown option -x\nusage: kidledger [--home DIR] [--json] [--utc] COMMAND [ARGS]; `kidledger --help` lists the commands\n")
            #expect(!FileManager.default.fileExists(atPath: l.home))
        }
    }

    @Test func didYouMean() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            let cases: [([String], String)] = [
                (["chidl", "add", "Zoe"], "unknown command `chidl`; did you mean `child`?"),
                (["child", "ad", "Zoe"], "unknown command `child ad`; did you mean `child add`?"),
                (["balanse"], "unknown command `balanse`; did you mean `balance`?"),
                (["hepl"], "unknown command `hepl`; did you mean `help`?"),
                (["frobnicate"], "unknown command `frobnicate`"),
                (["give", "Ava", "1", "--nte", "x"], "unknown option --nte for `give`; did you mean --note? (see `kidledger give --help`)"),
                (["history", "--limt", "3"], "unknown option --limt for `history`; did you mean --limit? (see `kidledger history --help`)"),
                (["give", "Ava", "1", "-n"], "unknown option -n for `give` (see `kidledger give --help`)"),
            ]
            for (arguments, message) in cases {
                let outcome = l.run(arguments)
                #expect(outcome.code == 64 && outcome.stdout == "", "\(arguments): \(outcome)")
                #expect(outcome.stderr.split(separator: "\n").first.map(String.init) == "kidledger: " + message, "\(arguments): \(outcome)")
            }
        }
    }

    @Test func helpCommand() {
        withLedger { l in
            #expect(l.ok("help") == GoldenOutputTests.overview)
            for command in CLI.commands {
                let words = command.spec.name.split(separator: " ").map(String.init)
                #expect(l.ok(["help"] + words) == command.spec.help, "help \(words)")
            }
            #expect(l.ok("help", "child") == l.run("child").stdout)
            let unknown = l.run("help", "frobnicate")
            #expect(unknown.code == 64 && unknown.stderr.hasPrefix("kidledger: unknown command `frobnicate`"))
            let near = l.run("help", "giv")
            #expect(near.code == 64 && near.stderr.hasPrefix("kidledger: unknown command `giv`; did you mean `give`?"), "\(near)")
            #expect(!FileManager.default.fileExists(atPath: l.home))
        }
    }

    @Test func optionGivenTwice() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            let before = l.state()
            for (arguments, option) in [(["give", "Ava", "1", "--note", "a", "--note", "b"], "--note"),
                                        (["give", "Ava", "1", "--note=a", "--note", "b"], "--note"),
                                        (["--json", "give", "Ava", "1", "--json"], "--json"),
                                        (["children", "--all", "--all"], "--all"),
                                        (["--home", l.home, "--home", l.home, "balance"], "--home"),
                                        (["--utc", "history", "--utc"], "--utc")] {
                let outcome = l.run(arguments)
                #expect(outcome.code == 64 && outcome.stdout == "", "\(arguments): \(outcome)")
                let first = outcome.stderr.contains("{") ? outcome.stderr : outcome.stderr.split(separator: "\n").first.map(String.init) ?? ""
                #expect(first.contains("\(option) is given twice; give it once"), "\(arguments): \(outcome)")
            }
            #expect(l.state() == before)
            // Help may be asked for twice.
            #expect(l.ok("give", "--help", "-h").hasPrefix("usage: kidledger give "))
        }
    }

    /// `kidledger --help` lists every command on one line each, and no help text sends the reader
    /// to docs/ (which an installed binary does not have).
    @Test func helpIsSelfContained() {
        let overview = CLI.overview()
        for command in CLI.commands {
            let lines = overview.split(separator: "\n").filter { $0.hasPrefix("  \(command.spec.name) ") || $0 == "  \(command.spec.name)" }
            #expect(lines.count == 1 || CLI.commands.contains { $0.spec.name != command.spec.name && $0.spec.name.hasPrefix(command.spec.name + " ") },
                    "\(command.spec.name): \(lines)")
            #expect(overview.contains("  " + command.spec.name + (command.spec.synopsis.isEmpty ? "" : " " + command.spec.synopsis) + " "))
            #expect(!command.spec.help.contains("docs/"), "\(command.spec.name) help mentions docs/")
        }
        #expect(!overview.contains("docs/"))
        #expect(overview.contains("  help [COMMAND]"))
    }

    /// Help and the overview quote amounts with $ in single quotes; give/take say why.
    @Test func dollarAmountsAreQuoted() {
        #expect(CLI.overview().contains("('$1.25', '$0.10', 5)"))
        for name in ["give", "take", "give-all", "take-all"] {
            let help = CLI.commands.first { $0.spec.name == name }?.spec.help ?? ""
            #expect(help.contains("the shell eats $1"), "\(name)")
            #expect(!help.contains(" $0.10,") && !help.contains("(1.25,"), "\(name): unquoted amounts")
        }
    }
}

/// Issue 23 point 5: a take that leaves a balance below zero says so.
@Suite("CLI frictions: negative balance warnings")
struct NegativeBalanceTests {
    @Test func takeWarns() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            l.ok("child", "add", "Ben")
            l.ok("give", "Ava", "1")
            #expect(l.ok("take", "Ava", "0.5") == "Took $0.50 from Ava. Balance: $0.50\n")
            let below = l.run("take", "Ava", "2")
            #expect(below.code == 0 && below.stdout == "Took $2.00 from Ava. Balance: -$1.50\n", "\(below)")
            #expect(below.stderr == "kidledger: warning: Ava's balance is now negative (-$1.50): Ava owes that much\n")
            let json = l.run("--json", "take", "Ava", "quarter")
            #expect(json.code == 0 && json.stderr == "kidledger: warning: Ava's balance is now negative (-$1.75): Ava owes that much\n")
            let object = parseJSON(json.stdout) as? [String: Any]
            #expect(object?["warnings"] as? [String] == ["Ava's balance is now negative (-$1.75): Ava owes that much"])
            #expect(object?["balanceCents"] as? Int == -175)
            let give = checkJSON(l, "give", "Ben", "1") as? [String: Any]
            #expect(give?["warnings"] as? [String] == [])
            // take-all: one warning per child left below zero.
            let all = l.run("--json", "take-all", "1.5")
            #expect(all.code == 0)
            #expect(all.stderr == "kidledger: warning: Ava's balance is now negative (-$3.25): Ava owes that much\nkidledger: warning: Ben's balance is now negative (-$0.50): Ben owes that much\n", "\(all)")
            #expect((parseJSON(all.stdout) as? [String: Any])?["warnings"] as? [String] == [
                "Ava's balance is now negative (-$3.25): Ava owes that much", "Ben's balance is now negative (-$0.50): Ben owes that much"])
        }
    }
}

/// Issue 23 point 4, issue 41: tables show the household's time zone (`TZ` where it has none), `--utc` shows UTC, JSON keeps milliseconds.
@Suite("CLI frictions: local time")
struct LocalTimeTests {
    @Test func historyInTheLocalZone() {
        withLedger { l in
            l.ok("init", "Home")                      // 11:06 UTC
            l.ok("child", "add", "Ava")               // 11:07
            l.ok("give", "Ava", "2", "--note", "x")   // 11:08
            let utcJSON = l.ok("--json", "history")
            // Times show in the household's zone (set at init from TZ, UTC here), whatever TZ says.
            l.timeZone = "America/New_York"
            #expect(l.ok("history").hasPrefix("WHEN (UTC) "))
            l.ok("household", "timezone", "America/New_York")
            #expect(maskIDs(maskFingerprints(l.ok("history"))) == """
                WHEN (-05:00)     CHILD  AMOUNT  SOURCE  BY                            ID        NOTE
                2026-11-18 06:08  Ava    +$2.00  give    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx  x

                """)
            #expect(maskIDs(maskFingerprints(l.ok("--utc", "history"))) == """
                WHEN (UTC)        CHILD  AMOUNT  SOURCE  BY                            ID        NOTE
                2026-11-18 11:08  Ava    +$2.00  give    member (xxxx-xxxx-xxxx-xxxx)  xxxxxxxx  x

                """)
            #expect(l.ok("--json", "history") == utcJSON, "JSON does not depend on the zone")
            #expect(l.ok("history", "--json", "--utc") == utcJSON)
            l.ok("household", "timezone", "Asia/Kolkata")
            #expect(maskFingerprints(l.ok("undo", "--dry-run")) == "Undo would reverse +$2.00 for Ava (2026-11-18 16:38 +05:30), made by member (xxxx-xxxx-xxxx-xxxx).\n")
            l.ok("household", "timezone", "Europe/Paris")
            #expect(maskFingerprints(l.ok("undo")) == "Undid +$2.00 for Ava (2026-11-18 12:08 +01:00, made by member (xxxx-xxxx-xxxx-xxxx)). Balance: $0.00\n")
            // TZ does not change them; it is read as the C library reads it (empty and unknown
            // zones are UTC) where the household has no zone.
            for zone in ["", "UTC", "Etc/UTC", "No/Such_Zone", ":Asia/Tokyo"] {
                l.timeZone = zone
                #expect(l.ok("history", "--limit", "1").hasPrefix("WHEN (+01:00) "), "TZ=\(zone)")
                #expect(LocalTime.from(environment: ["TZ": zone]).isUTC == (zone != ":Asia/Tokyo"), "TZ=\(zone)")
            }
        }
    }

    /// Rows on both sides of a daylight saving change: each in its own offset, the header names the zone.
    @Test func daylightSavingInOneTable() {
        withLedger { l in
            l.timeZone = "America/New_York"
            l.setClock(1_782_000_000_000)   // 2026-06-21 00:00 UTC: EDT
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            l.ok("give", "Ava", "1")
            l.setClock(TestLedger.startMillis) // 2026-11-18: EST
            l.ok("give", "Ava", "2")
            let table = maskFingerprints(l.ok("history"))
            #expect(table.hasPrefix("WHEN (America/New_York)  CHILD"), "\(table)")
            #expect(table.contains("2026-11-18 06:06 ") && table.contains("2026-06-20 20:02 "), "\(table)")
        }
    }

    @Test func zoneLabels() {
        let paris = LocalTime(zone: TimeZone(identifier: "Europe/Paris")!)
        #expect(paris.short(TestLedger.startMillis) == "2026-11-18 12:06")
        #expect(paris.label(TestLedger.startMillis) == "+01:00")
        #expect(paris.label(1_782_000_000_000) == "+02:00")
        #expect(LocalTime.utc.stamped(TestLedger.startMillis) == "2026-11-18 11:06 UTC")
        #expect(LocalTime.from(environment: [:]).zone == TimeZone.current)
        #expect(LocalTime.from(environment: ["TZ": "UTC"]).isUTC)
        #expect(LocalTime(zone: TimeZone(identifier: "Asia/Kathmandu")!).label(TestLedger.startMillis) == "+05:45")
        #expect(LocalTime(zone: TimeZone(identifier: "America/St_Johns")!).label(TestLedger.startMillis) == "-03:30")
        // Instants at the ends of Int64 do not trap.
        #expect(!paris.short(.max).isEmpty && !paris.short(.min).isEmpty)
    }

    /// The real executable reads TZ from its environment when it creates the household: that is
    /// the household's zone, in which every laptop then shows times, whatever its own TZ.
    @Test func executableHonoursTZ() throws {
        try withLedger { l in
            let binary = try #require(Binary.path)
            func run(_ zone: String?, _ arguments: String...) throws -> ProcessOutcome {
                var environment = ["KIDLEDGER_HOME": l.home, "HOME": l.directory, "PATH": "/usr/bin:/bin", "LC_ALL": "C"]
                environment["TZ"] = zone
                return try runProcess(binary, arguments, environment: environment, timeout: 60)
            }
            #expect(try run("Asia/Tokyo", "init", "Home").code == 0)
            #expect(try run("UTC", "child", "add", "Ava").code == 0)
            #expect(try run("UTC", "give", "Ava", "1").code == 0)
            #expect(try run("UTC", "household", "timezone").stdout.hasPrefix("Asia/Tokyo (now "))
            let utc = try run("UTC", "--utc", "history").stdout
            let tokyo = try run("UTC", "history").stdout
            #expect(utc.hasPrefix("WHEN (UTC) ") && tokyo.hasPrefix("WHEN (+09:00) "), "\(utc)\n\(tokyo)")
            #expect(try run("Asia/Tokyo", "--utc", "history").stdout == utc)
            // The times differ by nine hours.
            func minutes(_ table: String) -> Int? {
                let line = table.split(separator: "\n").dropFirst().first.map(String.init) ?? ""
                let parts = line.prefix(16).split(whereSeparator: { ":- ".contains($0) }).compactMap { Int($0) }
                guard parts.count == 5 else { return nil }
                return ((parts[2] * 24) + parts[3]) * 60 + parts[4]
            }
            if let a = minutes(utc), let b = minutes(tokyo) { #expect((b - a + 31 * 24 * 60) % (24 * 60) == 9 * 60) }
            #expect(try run("Asia/Tokyo", "--json", "history").stdout == run("UTC", "--json", "history").stdout)
        }
    }
}

/// Issue 23 point 5: tables pad by display width and cut long names with an ellipsis.
@Suite("CLI frictions: table widths")
struct TableWidthTests {
    @Test func displayWidths() {
        #expect(DisplayWidth.of("Ava") == 3)
        #expect(DisplayWidth.of("Zoë") == 3)              // precomposed
        #expect(DisplayWidth.of("Zoe\u{0308}") == 3)      // e + combining diaeresis: one cluster
        #expect(DisplayWidth.of("明美") == 4)
        #expect(DisplayWidth.of("🦄") == 2)
        #expect(DisplayWidth.of("👨‍👩‍👧") == 2)           // one ZWJ sequence
        #expect(DisplayWidth.of("🇫🇷") == 2)             // a flag
        #expect(DisplayWidth.of("❤️") == 2)              // text-default emoji made emoji by U+FE0F
        #expect(DisplayWidth.of("❤") == 1)
        #expect(DisplayWidth.of("ｶ") == 1 && DisplayWidth.of("Ａ") == 2) // halfwidth, fullwidth
        #expect(DisplayWidth.truncate("Ava", to: 5) == "Ava")
        #expect(DisplayWidth.truncate("Maximilian", to: 5) == "Maxi…")
        #expect(DisplayWidth.truncate("明美明美", to: 6) == "明美…")   // 4 + 1, a wide character does not fit the last column
        #expect(DisplayWidth.truncate("🦄🦄🦄", to: 4) == "🦄…")
    }

    @Test func childrenTableAlignsAndTruncates() {
        withLedger { l in
            l.ok("init", "Home")
            for name in ["Zoe\u{0308}", "明美", "🦄 Uni", "Bartholomew Maximilian Fitzgerald-Smythe"] { l.ok("child", "add", name) }
            l.ok("give", "明美", "1")
            #expect(l.masked(l.ok("children")) == """
                NAME                      BALANCE  ID
                Zoë                         $0.00  ########
                明美                        $1.00  ########
                🦄 Uni                      $0.00  ########
                Bartholomew Maximilian …    $0.00  ########

                """.replacingOccurrences(of: "Zoë", with: "Zoe\u{0308}"))
            #expect(l.ok("balance") == """
                Zoë                       $0.00
                明美                      $1.00
                🦄 Uni                    $0.00
                Bartholomew Maximilian …  $0.00

                """.replacingOccurrences(of: "Zoë", with: "Zoe\u{0308}"))
            // The full name stays in JSON and in one-child output.
            #expect(l.ok("balance", "bartholomew maximilian fitzgerald-smythe") == "Bartholomew Maximilian Fitzgerald-Smythe: $0.00\n")
            #expect(l.ok("--json", "children").contains("\"Bartholomew Maximilian Fitzgerald-Smythe\""))
        }
    }
}

/// Issue 23 point 5: `account switch` to an account never used needs --create; `account list`.
@Suite("CLI frictions: accounts")
struct AccountFrictionTests {
    @Test func switchNeedsCreateAndListShowsAccounts() {
        withLedger { l in
            l.ok("init", "Home")
            let refused = l.run("account", "switch", "wrok")
            #expect(refused.code == 65 && refused.stdout == "", "\(refused)")
            #expect(refused.stderr == "kidledger: this laptop has no account \"wrok\" (accounts: default); pass --create to make a new account with a new key\n")
            #expect(l.ok("account", "show").hasPrefix("account default: "), "the refused switch did not sign in")
            #expect(l.run("account", "switch", "work", "--create").code == 0)
            #expect(l.run("account", "switch", "default").code == 0)
            let typo = l.run("account", "switch", "wrok")
            #expect(typo.stderr == "kidledger: this laptop has no account \"wrok\" (accounts: default, work); did you mean work? pass --create to make a new account with a new key\n")
            #expect(maskFingerprints(l.ok("account", "list")) == """
                   ACCOUNT  KEY
                *  default  xxxx-xxxx-xxxx-xxxx
                   work     xxxx-xxxx-xxxx-xxxx

                """)
            let json = checkJSON(l, "account", "list") as? [String: Any]
            #expect(json?["current"] as? String == "default")
            let accounts = json?["accounts"] as? [[String: Any]] ?? []
            #expect(accounts.map { $0["name"] as? String } == ["default", "work"])
            #expect(accounts.map { $0["current"] as? Bool } == [true, false])
            #expect(accounts.allSatisfy { ($0["key"] as? String)?.count == 64 })
        }
    }

    @Test func emptyAccountList() {
        withLedger { l in
            #expect(l.ok("account", "list") == "No accounts on this laptop yet (`kidledger init` or `kidledger join` makes one).\n")
            #expect(!FileManager.default.fileExists(atPath: l.home))
        }
    }
}

/// Issue 23 point 5: `import --dry-run`, and plain dates in an imported CSV.
@Suite("CLI frictions: import")
struct ImportFrictionTests {
    static let csv = "createdAt,child,amountCents,note\n2026-11-20,Ava,100,\"two\nlines\"\n2026-11-21T10:00:00Z,Ben,50,x\n"

    @Test func dryRunStoresNothing() throws {
        try withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            let path = l.file("in.csv")
            try Self.csv.write(toFile: path, atomically: true, encoding: .utf8)
            let before = l.state()
            let digest = l.ok("digest")
            #expect(l.masked(l.ok("import", "--csv", path, "--dry-run"))
                    == "Would import 2 transactions from $TMP/in.csv; would add Ben. Nothing was stored (--dry-run).\n")
            let json = checkJSON(l, "import", "--csv", path, "--dry-run") as? [String: Any]
            #expect(json?["added"] as? Int == 2 && json?["dryRun"] as? Bool == true && json?["childrenCreated"] as? [String] == ["Ben"])
            #expect(l.ok("digest") == digest && l.state() == before, "a dry run changed the ledger")
            let entries = try FileManager.default.contentsOfDirectory(atPath: l.home).sorted()
            #expect(entries == ["identities", "ledger"], "the dry run's copy is removed: \(entries)")
            // The real import does what the dry run said; a second dry run then finds everything present.
            #expect(l.masked(l.ok("import", "--csv", path)) == "Imported 2 transactions from $TMP/in.csv; added Ben.\n")
            #expect(l.ok("digest") != digest)
            let after = l.state()
            #expect(l.masked(l.ok("import", "--csv", path, "--dry-run"))
                    == "Would import 0 transactions from $TMP/in.csv (2 already present). Nothing was stored (--dry-run).\n")
            #expect(l.state() == after)
            #expect((checkJSON(l, "import", "--csv", path) as? [String: Any])?["dryRun"] as? Bool == false)
        }
    }

    /// A dry run refuses what the import would refuse, with the same message, and stores nothing.
    @Test func dryRunRefusesLikeTheImport() throws {
        try withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            l.ok("give", "Ava", "92233720368547758.07")
            let path = l.file("big.csv")
            try "createdAt,child,amountCents\n2026-11-20,Ava,1\n".write(toFile: path, atomically: true, encoding: .utf8)
            let before = l.state()
            let dry = l.run("import", "--csv", path, "--dry-run")
            let real = l.run("import", "--csv", path)
            #expect(dry.code == 65 && dry.stderr == "kidledger: that would take Ava's balance out of range\n", "\(dry)")
            #expect(real.code == dry.code && real.stderr == dry.stderr)
            #expect(l.state() == before)
        }
    }

    /// A plain date is 12:00 UTC that day: the same transaction (and id) on every laptop, whatever its zone.
    @Test func plainDates() throws {
        try withLedger { l in
            l.ok("init", "Home")
            let path = l.file("dates.csv")
            try "createdAt,child,amountCents\n2026-11-20,Ava,100\n\n 2026-11-21 ,Ava,-25\n".write(toFile: path, atomically: true, encoding: .utf8)
            l.timeZone = "America/Los_Angeles"
            l.ok("household", "timezone", "America/Los_Angeles")
            #expect(l.masked(l.ok("import", "--csv", path)) == "Imported 2 transactions from $TMP/dates.csv; added Ava.\n")
            let history = checkJSON(l, "history") as? [String: Any]
            let times = (history?["transactions"] as? [[String: Any]] ?? []).compactMap { ($0["transaction"] as? [String: Any])?["createdAtMillis"] as? Int64 }
            #expect(times == [1_795_262_400_000, 1_795_176_000_000], "2026-11-21 and 2026-11-20 at 12:00 UTC")
            #expect(l.ok("history").contains("2026-11-20 04:00  Ava"), "noon UTC is 04:00 in Los Angeles")
            // Importing the file again, in another zone, adds nothing.
            l.timeZone = "Asia/Tokyo"
            #expect(l.masked(l.ok("import", "--csv", path)) == "Imported 0 transactions from $TMP/dates.csv (2 already present).\n")
            // Not a calendar date: the import's own error, on the file's own line.
            for (text, message) in [("createdAt,child,amountCents\n2026-02-30,Ava,1\n", "kidledger: line 2: createdAt \"2026-02-30\" is not an ISO 8601 time like 2026-11-29T18:02:00.000Z\n"),
                                    ("createdAt,child,amountCents\n2026-11-20,Ava,1\n\n2026-11-22,Ava,x\n", "kidledger: line 4: amountCents \"x\" is not a non-zero whole number of cents\n"),
                                    ("createdAt,child,amountCents\n2026-11-20,Ava,1\n\"two\nlines\",Ava,2\n", "kidledger: line 3: createdAt \"two\\nlines\" is not an ISO 8601 time like 2026-11-29T18:02:00.000Z\n")] {
                try text.write(toFile: path, atomically: true, encoding: .utf8)
                let outcome = l.run("import", "--csv", path)
                #expect(outcome.code == 65 && outcome.stderr == message, "\(outcome)")
            }
        }
    }

    @Test func noonOfADate() {
        #expect(ImportDates.noon("2026-11-20") == "2026-11-20T12:00:00.000Z")
        #expect(ImportDates.noon("2024-02-29") == "2024-02-29T12:00:00.000Z")
        for bad in ["2026-02-29", "2026-13-01", "2026-1-01", "20261120", "2026-11-20T", "２０２６-11-20", "", "abcd-ef-gh"] {
            #expect(ImportDates.noon(bad) == nil, "\(bad)")
        }
        let text = "id,createdAt\r\nx,2026-11-20\r\n"
        #expect(ImportDates.withPlainDates(text) == "id,createdAt\nx,2026-11-20T12:00:00.000Z\n")
        #expect(ImportDates.withPlainDates("createdAt\n2026-11-20T01:00:00Z\n") == "createdAt\n2026-11-20T01:00:00Z\n")
        #expect(ImportDates.withPlainDates("\"unterminated") == "\"unterminated")
    }
}

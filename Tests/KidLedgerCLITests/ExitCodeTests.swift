import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI

/// One refused command line: what to set up, the command, the exit code and stderr fragments.
struct BadInput: Sendable, CustomTestStringConvertible {
    var label: String
    /// Commands run (and required to succeed) after the standard set-up.
    var setup: [[String]] = []
    /// Files written into the temporary directory first: name → content.
    var files: [String: String] = [:]
    /// The command; "{tmp}" is replaced by the temporary directory.
    var command: [String]
    var code: Int32
    /// Fragments the stderr message must contain.
    var messages: [String]

    var testDescription: String { label }

    /// A household "Home" with Ava ($1.00) and Ben ($0.00).
    static let standard: [[String]] = [["init", "Home"], ["child", "add", "Ava"], ["child", "add", "Ben"], ["give", "Ava", "1"]]
}

func bad(_ label: String, setup: [[String]] = [], files: [String: String] = [:], _ command: [String],
         _ code: Int32, _ messages: String...) -> BadInput {
    BadInput(label: label, setup: setup, files: files, command: command, code: code, messages: messages)
}

let goodCSV = "createdAt,child,amountCents\n2026-11-18T11:00:00.000Z,Ava,100\n"

@Suite("Exit codes and error messages")
struct ExitCodeTests {
    static let cases: [BadInput] = [
        // Amounts (65).
        bad("zero", ["give", "Ava", "0"], 65, "kidledger: amount must be greater than zero"),
        bad("negative", ["give", "Ava", "-1"], 65, "amount must not be negative"),
        bad("negative dollars", ["take", "Ava", "-$1"], 65, "amount must not be negative"),
        bad("fraction of a cent", ["give", "Ava", "1.001"], 65, "fraction of a cent"),
        bad("letters", ["give", "Ava", "abc"], 65, "\"abc\" is not an amount"),
        bad("empty", ["give", "Ava", ""], 65, "amount is empty"),
        bad("blank", ["take", "Ava", "  "], 65, "amount is empty"),
        bad("too large", ["give", "Ava", "99999999999999999999"], 65, "amount is too large (at most $92233720368547758.07)"),
        bad("give-all zero", ["give-all", "0"], 65, "greater than zero"),
        bad("take-all letters", ["take-all", "abc"], 65, "is not an amount"),
        // Children (65).
        bad("unknown child", ["give", "Zed", "1"], 65, "no child named \"Zed\" (see `kidledger children --all`)"),
        bad("unknown child balance", ["balance", "Zed"], 65, "no child named \"Zed\""),
        bad("unknown child history", ["history", "Zed"], 65, "no child named \"Zed\""),
        bad("unknown child rename", ["child", "rename", "Zed", "Zoe"], 65, "no child named \"Zed\""),
        bad("second active child of that name", ["child", "add", "AVA"], 65, "there is already a child named \"AVA\""),
        bad("empty child name", ["child", "add", " "], 65, "child name must not be empty"),
        bad("ambiguous child", setup: [["child", "archive", "Ava"], ["child", "add", "ava"], ["child", "archive", "ava"]], ["give", "AVA", "1"], 65,
            "\"AVA\" matches more than one child: ", "Ava (", ", archived)", "ava ("),
        bad("restoring a child whose name an active child has", setup: [["child", "archive", "Ava"], ["child", "add", "ava"]],
            ["child", "restore", "Ava"], 65, "can't restore \"Ava\": the active child \"ava\" has that name now"),
        bad("archived child", setup: [["child", "archive", "Ben"]], ["give", "Ben", "1"], 65,
            "Ben is archived: run `kidledger child restore Ben` first"),
        bad("take from archived child", setup: [["child", "archive", "Ben"]], ["take", "ben", "1"], 65, "Ben is archived"),
        bad("archive twice", setup: [["child", "archive", "Ben"]], ["child", "archive", "Ben"], 65, "Ben is already archived"),
        bad("no active children", setup: [["child", "archive", "Ava"], ["child", "archive", "Ben"]], ["give-all", "1"], 65,
            "there are no active children"),
        bad("note too long", ["give", "Ava", "1", "--note", String(repeating: "n", count: 1001)], 65, "note is longer than 1000 bytes"),
        // Balances out of range (65); give-all writes nothing for Ben either.
        bad("overflow", setup: [["give", "Ava", "92233720368547757.07"]], ["give", "Ava", "0.01"], 65,
            "that would take Ava's balance out of range"),
        bad("overflow give-all", setup: [["give", "Ava", "92233720368547757.07"]], ["give-all", "0.01"], 65, "Ava's balance out of range"),
        bad("overflow from zero", setup: [["give", "Ben", "92233720368547758.07"]], ["give", "Ben", "penny"], 65, "Ben's balance"),
        // Undo and init (65).
        bad("nothing to undo", setup: [["undo"]], ["undo"], 65, "nothing to undo"),
        bad("init twice", ["init", "Other"], 65, "this home already holds the household \"Home\""),
        // Import (65 with the line, or 74).
        bad("import bad amount", files: ["bad.csv": goodCSV + "2026-11-18T11:00:01.000Z,Ava,1.5\n"],
            ["import", "--csv", "{tmp}/bad.csv"], 65, "line 3: amountCents \"1.5\""),
        bad("import unterminated quote", files: ["bad.csv": goodCSV + "2026-11-18T11:00:01.000Z,\"Zoe,100\n"],
            ["import", "--csv", "{tmp}/bad.csv"], 65, "line 3: "),
        bad("import bad time", files: ["bad.csv": goodCSV + goodCSV.split(separator: "\n")[1] + "\nyesterday,New kid,5\n"],
            ["import", "--csv", "{tmp}/bad.csv"], 65, "line 4: createdAt \"yesterday\""),
        bad("import without a header", files: ["bad.csv": ""], ["import", "--csv", "{tmp}/bad.csv"], 65, "line 1: the file is empty"),
        bad("import overflow", files: ["big.csv": goodCSV + "2026-11-18T11:00:01.000Z,Ava,9223372036854775807\n"],
            ["import", "--csv", "{tmp}/big.csv"], 65, "Ava's balance out of range"),
        bad("import missing file", ["import", "--csv", "{tmp}/missing.csv"], 74, "cannot read {tmp}/missing.csv"),
        bad("export to a missing directory", ["export", "--csv", "{tmp}/no/such/dir.csv"], 74, "cannot write {tmp}/no/such/dir.csv"),
        // Usage (64).
        bad("unknown command", ["frobnicate"], 64, "kidledger: unknown command `frobnicate`", "Run `kidledger --help` to list the commands."),
        bad("unknown subcommand", ["child", "adopt", "Zoe"], 64, "unknown command `child adopt`"),
        bad("unknown option", ["give", "Ava", "1", "--bogus"], 64, "unknown option --bogus for `give` (see `kidledger give --help`)"),
        bad("unknown short option", ["children", "-x"], 64, "unknown option -x for `children`"),
        bad("flag with a value", ["children", "--all=yes"], 64, "--all takes no value"),
        bad("option without value", ["give", "Ava", "1", "--note"], 64, "--note needs a value"),
        bad("missing arguments", ["give", "Ava"], 64, "`give` takes 2 arguments, got 1", "usage: kidledger give CHILD AMOUNT"),
        bad("missing name", ["child", "add"], 64, "`child add` takes 1 argument, got 0"),
        bad("missing --csv", ["export"], 64, "export needs --csv FILE"),
        bad("too many arguments", ["give", "Ava", "1", "2"], 64, "`give` takes 2 arguments, got 3"),
        bad("too many for balance", ["balance", "Ava", "Ben"], 64, "`balance` takes 0 to 1 argument, got 2"),
        bad("too many for undo", ["undo", "now", "later"], 64, "`undo` takes 0 to 1 argument, got 2"),
        bad("undo of no id", ["undo", "now"], 65, "\"now\" is not a transaction id (the ID column of `kidledger history`, at least 4 digits, or `id` in `history --json`)"),
        bad("undo of a short id that ends no id", ["undo", "0000-0000"], 65, "no transaction has an id ending in 00000000 (the ID column of `kidledger history`)"),
        bad("limit not a number", ["history", "--limit", "abc"], 64, "--limit takes a whole number, got \"abc\""),
        bad("limit negative", ["history", "--limit=-3"], 64, "--limit takes a whole number, got \"-3\""),
        bad("empty home", ["balance", "--home="], 64, "--home needs a directory"),
    ]

    @Test(arguments: cases)
    func refusedAndNothingChanged(_ input: BadInput) throws {
        try withLedger { l in
            for command in BadInput.standard + input.setup { l.ok(command) }
            for (name, content) in input.files { try content.write(toFile: l.file(name), atomically: true, encoding: .utf8) }
            let before = l.state()
            let outcome = l.run(input.command.map { $0.replacingOccurrences(of: "{tmp}", with: l.directory) })
            #expect(outcome.code == input.code, "\(outcome)")
            #expect(outcome.stdout == "" || input.code == 64, "nothing on stdout: \(outcome)")
            #expect(outcome.stderr.hasPrefix("kidledger: ") && outcome.stderr.hasSuffix("\n"))
            for message in input.messages {
                let expected = message.replacingOccurrences(of: "{tmp}", with: l.directory)
                #expect(outcome.stderr.contains(expected), "\(expected) in \(outcome.stderr)")
            }
            #expect(l.state() == before, "the failed command changed the ledger")
            #expect(!FileManager.default.fileExists(atPath: l.file("no")))
        }
    }

    /// Before `init`, every command that needs the household says so, and none creates the home.
    @Test(arguments: [["balance"], ["balance", "Ava"], ["children"], ["children", "--all"], ["history"], ["digest"], ["verify"],
                      ["undo"], ["give", "Ava", "1"], ["take", "Ava", "1"], ["give-all", "1"], ["take-all", "1"],
                      ["child", "add", "Ava"], ["child", "rename", "Ava", "Eva"], ["child", "archive", "Ava"],
                      ["child", "restore", "Ava"], ["export", "--csv", "{tmp}/out.csv"], ["import", "--csv", "{tmp}/in.csv"]])
    func beforeInit(_ command: [String]) throws {
        try withLedger { l in
            try goodCSV.write(toFile: l.file("in.csv"), atomically: true, encoding: .utf8)
            let arguments = command.map { $0.replacingOccurrences(of: "{tmp}", with: l.directory) }
            for existingHome in [false, true] {
                if existingHome { try FileManager.default.createDirectory(atPath: l.home, withIntermediateDirectories: false) }
                let outcome = l.run(arguments)
                #expect(outcome.code == 65, "\(outcome)")
                #expect(outcome.stdout == "")
                #expect(outcome.stderr == "kidledger: no household here yet: run `kidledger init NAME` first\n")
                let contents = try? FileManager.default.contentsOfDirectory(atPath: l.home)
                #expect(contents == (existingHome ? [] : nil), "the home must not be created or filled: \(contents ?? [])")
                #expect(!FileManager.default.fileExists(atPath: l.file("out.csv")))
            }
        }
    }

    /// The "nothing changed" check notices a change of each part it compares.
    @Test func stateDetectsChanges() {
        withLedger { l in
            for command in BadInput.standard { l.ok(command) }
            for change in [["give", "Ben", "1"], ["undo"], ["child", "archive", "Ben"], ["child", "rename", "ava", "Eva"]] {
                let before = l.state()
                #expect(before.hasPrefix("0 ") && before.contains("\n0 {\"transactions\":["))
                l.ok(change)
                #expect(l.state() != before, "\(change)")
            }
        }
    }

    /// `init` creates the home with missing parents; the household then exists.
    @Test func initCreatesTheHome() {
        withLedger { l in
            let outcome = l.run(["init", "Home", "--home", l.home + "/a/b"])
            #expect(outcome.code == 0)
            #expect(FileManager.default.fileExists(atPath: l.home + "/a/b/ledger/data.mdb"))
            #expect(l.run(["balance", "--home", l.home + "/a/b"]).code == 0)
            #expect(l.run(["balance"]).code == 65, "KIDLEDGER_HOME is another home")
        }
    }
}

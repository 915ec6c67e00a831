import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI

/// `--json` output: one object per line, parsed with Foundation; every key camelCase, every value
/// of a key ending in "Cents" an integer (checked on the parsed value and on the raw text).
@Suite("JSON output")
struct JSONOutputTests {
    /// `value[key1][key2]...`, or nil.
    func field(_ value: Any?, _ path: String...) -> Any? {
        var current = value
        for key in path { current = (current as? [String: Any])?[key] }
        return current
    }

    func int(_ value: Any?) -> Int64? { (value as? NSNumber)?.int64Value }

    @Test func mutatingCommands() {
        withLedger { l in
            let household = checkJSON(l, "init", "The Smiths")
            #expect(field(household, "name") as? String == "The Smiths")
            #expect(int(field(household, "createdAtMillis")) == TestLedger.startMillis)

            let child = checkJSON(l, "child", "add", "Ava")
            #expect(field(child, "name") as? String == "Ava")
            #expect(int(field(child, "balanceCents")) == 0)
            #expect(field(child, "archived") as? Bool == false)
            checkJSON(l, "child", "add", "Ben")

            let give = checkJSON(l, "give", "Ava", "1.25", "--note", "chores")
            #expect(int(field(give, "transaction", "amountCents")) == 125)
            #expect(int(field(give, "balanceCents")) == 125)
            #expect(field(give, "childName") as? String == "Ava")
            #expect(field(give, "transaction", "source") as? String == "give")
            #expect(field(give, "transaction", "note") as? String == "chores")
            #expect(field(give, "transaction", "reverses") is NSNull)
            let giveID = field(give, "transaction", "id") as? String

            let take = checkJSON(l, "take", "Ava", "quarter")
            #expect(int(field(take, "transaction", "amountCents")) == -25)
            #expect(int(field(take, "balanceCents")) == 100)

            let all = checkJSON(l, "give-all", "5")
            let postings = field(all, "postings") as? [Any] ?? []
            #expect(postings.compactMap { int(field($0, "balanceCents")) } == [600, 500])
            checkJSON(l, "take-all", "dime")

            let undo = checkJSON(l, "undo")
            #expect(int(field(undo, "original", "amountCents")) == -10)
            #expect(int(field(undo, "undo", "amountCents")) == 10)
            #expect(field(undo, "undo", "source") as? String == "undo")
            #expect(field(undo, "undo", "reverses") as? String == field(undo, "original", "id") as? String)
            #expect(int(field(undo, "balanceCents")) != nil)
            #expect(field(undo, "childName") is String)
            #expect((field(undo, "entries") as? [Any])?.count == 2, "the take-all is undone whole")

            checkJSON(l, "child", "rename", "Ben", "Benjamin")
            let archived = checkJSON(l, "child", "archive", "Benjamin")
            #expect(field(archived, "archived") as? Bool == true)
            checkJSON(l, "child", "restore", "Benjamin")

            let csv = l.file("out.csv")
            let export = checkJSON(l, "export", "--csv", csv)
            #expect(int(field(export, "transactions")) == 8)
            let imported = checkJSON(l, "import", "--csv", csv)
            #expect(int(field(imported, "added")) == 0)
            #expect(int(field(imported, "alreadyPresent")) == 8)
            #expect((field(imported, "childrenCreated") as? [Any])?.isEmpty == true)

            // The id given by `give` is the one history shows.
            let history = checkJSON(l, "history", "Ava", "--limit", "0")
            let ids = (field(history, "transactions") as? [Any] ?? []).compactMap { field($0, "transaction", "id") as? String }
            #expect(giveID != nil && ids.last == giveID)
        }
    }

    @Test func readCommands() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            l.ok("child", "add", "Ben")
            l.ok("give", "Ava", "92233720368547758.07")
            #expect(l.run("take", "Ben", "3 quarters").code == 0) // warns: Ben's balance is negative
            l.ok("undo")
            l.ok("give", "Ben", "1")
            l.ok("child", "archive", "Ben")

            for arguments in [["children"], ["children", "--all"], ["balance"], ["balance", "Ava"], ["balance", "Ben"],
                              ["history"], ["history", "Ava"], ["history", "--limit", "1"], ["digest"], ["verify"]] {
                checkJSON(l, arguments)
            }

            let children = checkJSON(l, "children", "--all")
            let list = field(children, "children") as? [Any] ?? []
            #expect(list.compactMap { field($0, "name") as? String } == ["Ava", "Ben"])
            #expect(list.compactMap { int(field($0, "balanceCents")) } == [Int64.max, 100])
            #expect(list.compactMap { int(field($0, "transactionCount")) } == [1, 3])
            #expect(list.compactMap { field($0, "archived") as? Bool } == [false, true])
            #expect(list.compactMap { int(field($0, "sortOrder")) } == [0, 1])
            #expect(l.run("--json", "children").stdout.contains("\"balanceCents\":9223372036854775807"))

            let active = checkJSON(l, "balance")
            #expect((field(active, "children") as? [Any])?.count == 1)
            let ben = checkJSON(l, "balance", "ben")
            #expect(field(ben, "name") as? String == "Ben")
            #expect(int(field(ben, "balanceCents")) == 100)

            let history = checkJSON(l, "history")
            let entries = field(history, "transactions") as? [Any] ?? []
            #expect(entries.compactMap { int(field($0, "transaction", "amountCents")) } == [100, 75, -75, Int64.max])
            #expect(entries.compactMap { field($0, "reversed") as? Bool } == [false, false, true, false])
            #expect(entries.compactMap { field($0, "childName") as? String } == ["Ben", "Ben", "Ben", "Ava"])

            let digest = checkJSON(l, "digest")
            let verify = checkJSON(l, "verify")
            #expect((field(digest, "digest") as? String)?.count == 64)
            #expect(field(digest, "digest") as? String == field(verify, "digest") as? String)
            #expect((field(digest, "replicaId") as? String)?.count == 16)
            #expect(field(verify, "ok") as? Bool == true)
            #expect((field(verify, "problems") as? [Any])?.isEmpty == true)
            #expect(int(field(verify, "transactions")) == 4)
            #expect(int(field(verify, "children")) == 2)
        }
    }

    /// In JSON mode an error is one JSON object on stderr (code name, exit code, message), and
    /// stdout stays empty.
    @Test func errorsInJSONMode() {
        withLedger { l in
            l.ok("init", "Home")
            let outcome = l.run("--json", "give", "Nobody", "1")
            #expect(outcome.code == 65)
            #expect(outcome.stdout == "")
            #expect(outcome.stderr == #"{"error":{"code":"dataError","exitCode":65,"message":"no child named \"Nobody\" (see `kidledger children --all`)"}}"# + "\n")
            for (arguments, code, name) in [(["--json", "--bogus"], 64, "usage"), (["give", "Ava", "--json"], 64, "usage"),
                                            (["--json", "frobnicate"], 64, "usage"), (["--json", "balance", "Zed"], 65, "dataError"),
                                            (["--json", "--home", l.file("none"), "balance"], 65, "dataError")] {
                let failed = l.run(arguments)
                #expect(failed.code == Int32(code) && failed.stdout == "", "\(arguments): \(failed)")
                #expect(failed.stderr.hasSuffix("}\n") && failed.stderr.filter { $0 == "\n" }.count == 1, "\(arguments): \(failed)")
                let error = (parseJSON(failed.stderr) as? [String: Any])?["error"] as? [String: Any]
                #expect(error?["code"] as? String == name && error?["exitCode"] as? Int == code && (error?["message"] as? String)?.isEmpty == false,
                        "\(arguments): \(failed)")
                #expect(parseJSON(failed.stderr).map { jsonProblems($0) } == [])
            }
            // Without --json (or with it only as an option's value) the error stays a text line.
            #expect(l.run("give", "Nobody", "1", "--note", "--json").stderr.hasPrefix("kidledger: no child named"))
        }
    }

    /// `balance CHILD --json` is one element of `balance --json`'s `children`.
    @Test func balanceOfOneChildIsAnElementOfBalance() {
        withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            l.ok("child", "add", "Ben")
            l.ok("give", "Ava", "2")
            let all = checkJSON(l, "balance") as? [String: Any]
            let one = checkJSON(l, "balance", "ava") as? [String: Any]
            let first = (all?["children"] as? [[String: Any]])?.first
            func canonical(_ value: [String: Any]?) -> String? {
                guard let value, let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]) else { return nil }
                return String(decoding: data, as: UTF8.self)
            }
            #expect(canonical(one) != nil && canonical(one) == canonical(first), "\(String(describing: one)) vs \(String(describing: first))")
        }
    }

    @Test func camelCaseAndCentsCheckersWork() {
        #expect(isCamelCase("balanceCents") && isCamelCase("ok") && isCamelCase("replicaId"))
        #expect(!isCamelCase("balance_cents") && !isCamelCase("BalanceCents") && !isCamelCase("child-id") && !isCamelCase(""))
        #expect(rawCentsProblems("{\"aCents\":-12,\"b\":[{\"cCents\":0}]}") == [])
        #expect(rawCentsProblems("{\"aCents\":1.5}").count == 1)
        #expect(rawCentsProblems("{\"aCents\":\"12\"}").count == 1)
        let parsed = parseJSON("{\"aCents\":1.5,\"b_c\":{\"dCents\":2}}")
        #expect(parsed.map { jsonProblems($0).sorted() } == ["$.aCents: 1.5 is not an integer", "$.b_c: key is not camelCase"])
    }
}

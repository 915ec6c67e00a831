import Foundation
import Synchronization
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
import KidLedgerDomain

@Suite("The kidledger executable")
struct ProcessTests {
    @Test func binaryIsFound() throws {
        let path = try #require(Binary.path)
        #expect(FileManager.default.isExecutableFile(atPath: path))
    }

    /// Every command is its own process: the store is reopened each time.
    @Test func storeReopensAfterExit() throws {
        try withLedger { l in
            #expect(try maskRecoverySecret(kidledger(l, "init", "The Smiths").stdout) == "Created household \"The Smiths\" in \(l.home).\n" + initRecoveryNotice)
            #expect(try kidledger(l, "child", "add", "Ava").code == 0)
            #expect(try kidledger(l, "give", "Ava", "1.25").stdout == "Gave $1.25 to Ava. Balance: $1.25\n")
            #expect(try kidledger(l, "give", "Ava", "2", "--note", "chores").stdout == "Gave $2.00 to Ava. Balance: $3.25\n")
            let balance = try kidledger(l, "balance", "Ava")
            #expect(balance.code == 0 && balance.stdout == "Ava: $3.25\n" && balance.stderr == "", "\(balance)")
            let verify = try kidledger(l, "verify")
            #expect(verify.code == 0 && verify.stdout.hasPrefix("ok: 2 transactions, 1 child, 5 changes; digest "), "\(verify)")
            // The in-process CLI reads what the processes wrote.
            #expect(l.ok("balance") == "Ava  $3.25\n")
        }
    }

    @Test func exitCodesOfARealProcess() throws {
        try withLedger { l in
            let before = try kidledger(l, "balance")
            #expect(before.code == 65 && before.stderr == "kidledger: no household here yet: run `kidledger init NAME` first\n")
            #expect(!FileManager.default.fileExists(atPath: l.home))
            #expect(try kidledger(l, "init", "Home").code == 0)
            #expect(try kidledger(l, "child", "add", "Ava").code == 0)
            let amount = try kidledger(l, "give", "Ava", "abc")
            #expect(amount.code == 65 && amount.stdout == "", "\(amount)")
            #expect(amount.stderr.hasPrefix("kidledger: \"abc\" is not an amount"))
            let command = try kidledger(l, "frobnicate")
            #expect(command.code == 64 && command.stdout == "", "\(command)")
            #expect(command.stderr.hasPrefix("kidledger: unknown command `frobnicate`"))
            #expect(try kidledger(l, "give", "Ava").code == 64)
            #expect(try kidledger(l, "import", "--csv", l.file("missing.csv")).code == 74)
        }
    }

    @Test func helpAndVersion() throws {
        try withLedger { l in
            let help = try kidledger(l, "--help")
            #expect(help.code == 0 && help.stdout == GoldenOutputTests.overview && help.stderr == "", "\(help)")
            let give = try kidledger(l, "give", "--help")
            #expect(give.code == 0 && give.stdout.hasPrefix("usage: kidledger give CHILD AMOUNT [--note T]\n"))
            #expect(try kidledger(l, "--version").stdout == "kidledger \(KidLedgerVersion.current)\n")
            #expect(try kidledger(l).code == 64)
            #expect(!FileManager.default.fileExists(atPath: l.home))
        }
    }

    /// Two workers at once, each running 20 `give` processes one after another on the same home:
    /// LMDB's lock file serializes the writers of the different processes, and no write is lost.
    @Test func concurrentProcessesOnOneHome() throws {
        try withLedger { l in
            #expect(try kidledger(l, "init", "Home").code == 0)
            #expect(try kidledger(l, "child", "add", "Ava").code == 0)
            let binary = try #require(Binary.path)
            let environment = ["KIDLEDGER_HOME": l.home, "HOME": l.directory, "PATH": "/usr/bin:/bin"]
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { worker in
                for i in 0..<20 {
                    // Worker 0 gives 1 cent, worker 1 gives 2 cents each time.
                    let outcome = try? runProcess(binary, ["give", "Ava", worker == 0 ? "0.01" : "0.02", "--note", "w\(worker) #\(i)"],
                                                  environment: environment, timeout: 60)
                    if outcome?.code != 0 || outcome?.timedOut != false {
                        failures.withLock { $0.append("worker \(worker) give #\(i): \(outcome.map(String.init(describing:)) ?? "not started")") }
                    }
                }
            }
            #expect(failures.withLock { $0 } == [])

            let verify = try kidledger(l, "verify")
            #expect(verify.code == 0 && verify.stdout.hasPrefix("ok: 40 transactions, 1 child, 43 changes; "), "\(verify)")
            let balance = try kidledger(l, "--json", "balance", "Ava")
            let child = parseJSON(balance.stdout) as? [String: Any]
            #expect((child?["transactionCount"] as? NSNumber)?.int64Value == 40, "\(balance)")
            let cents: Int64 = 20 * 1 + 20 * 2
            #expect((child?["balanceCents"] as? NSNumber)?.int64Value == cents, "\(balance)")
            let history = try kidledger(l, "--json", "history", "--limit", "0")
            let entries = ((parseJSON(history.stdout) as? [String: Any])?["transactions"] as? [Any]) ?? []
            #expect(entries.count == 40)
        }
    }
}

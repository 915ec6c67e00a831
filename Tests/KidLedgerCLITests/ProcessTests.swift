import Foundation
import Synchronization
import KidLedgerTestSupport
import Testing
import KidLedgerDomain

/// The built `kidledger` executable.
///
/// `swift test` builds every product before running tests, so the executable sits next to the
/// test executable (`<scratch>/<triple>/debug/kidledger`). The search order is:
/// 1. `$KIDLEDGER_BIN`, when set;
/// 2. the directory of the running test executable (`/proc/self/exe`, then `CommandLine.arguments[0]`);
/// 3. `<package root>/.build/debug/kidledger` (the root is found from this file's path).
/// When none exists (e.g. the test bundle was built alone with `--target`), it is built once with
/// `swift build --product kidledger` into its own scratch path, so it never waits on the build lock
/// of the `swift test` that is running. `static let` initialization runs once, so that is the lock.
enum Binary {
    static let path: String? = locate()

    static func locate() -> String? {
        let fm = FileManager.default
        var candidates: [String] = []
        if let explicit = ProcessInfo.processInfo.environment["KIDLEDGER_BIN"], !explicit.isEmpty { candidates.append(explicit) }
        if let exe = try? fm.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append(URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("kidledger").path)
        }
        if let first = CommandLine.arguments.first {
            candidates.append(URL(fileURLWithPath: first).deletingLastPathComponent().appendingPathComponent("kidledger").path)
        }
        let root = packageRoot
        candidates.append(root + "/.build/debug/kidledger")
        if let found = candidates.first(where: { fm.isExecutableFile(atPath: $0) }) { return found }

        let scratch = "/tmp/kidledger-clitests-build-\(getuid())"
        let built = scratch + "/debug/kidledger"
        let result = try? runProcess("/usr/bin/env", ["swift", "build", "--product", "kidledger", "--scratch-path", scratch,
                                                     "--package-path", root],
                                     environment: ProcessInfo.processInfo.environment, timeout: 1800)
        return result?.code == 0 && fm.isExecutableFile(atPath: built) ? built : nil
    }

    /// The package directory: this file is <root>/Tests/KidLedgerCLITests/ProcessTests.swift.
    static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }
}

/// What a finished process returned.
struct ProcessOutcome: CustomStringConvertible {
    var code: Int32
    var stdout: String
    var stderr: String
    var timedOut: Bool

    var description: String { "exit \(code)\(timedOut ? " (killed after the time limit)" : "")\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }
}

/// Runs `executable` with `arguments` and exactly `environment`, killing it after `timeout` seconds.
/// Output goes to temporary files (no pipe can fill up and block the child); standard input is
/// `input` (from a temporary file), else empty.
func runProcess(_ executable: String, _ arguments: [String], environment: [String: String],
                timeout: TimeInterval, input: String? = nil) throws -> ProcessOutcome {
    let fm = FileManager.default
    let base = NSTemporaryDirectory() + "kidledger-proc-\(UUID().uuidString)"
    let outPath = base + ".out", errPath = base + ".err"
    guard fm.createFile(atPath: outPath, contents: nil), fm.createFile(atPath: errPath, contents: nil) else {
        throw CocoaError(.fileWriteUnknown)
    }
    defer { try? fm.removeItem(atPath: outPath); try? fm.removeItem(atPath: errPath) }
    let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    defer { try? out.close(); try? err.close() }

    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = environment
    let inPath = base + ".in"
    if let input {
        guard fm.createFile(atPath: inPath, contents: Data(input.utf8)) else { throw CocoaError(.fileWriteUnknown) }
        process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: inPath))
    } else {
        process.standardInput = FileHandle.nullDevice
    }
    defer { if input != nil { try? fm.removeItem(atPath: inPath) } }
    process.standardOutput = out
    process.standardError = err
    let done = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in done.signal() }
    try process.run()
    var timedOut = false
    if done.wait(timeout: .now() + timeout) == .timedOut {
        timedOut = true
        kill(process.processIdentifier, SIGKILL)
        done.wait()
    }
    let stdout = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return ProcessOutcome(code: process.terminationStatus, stdout: stdout, stderr: stderr, timedOut: timedOut)
}

/// Runs the built `kidledger` on `ledger`'s home as a separate process (time limit 60 s).
@discardableResult
func kidledger(_ ledger: TestLedger, _ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) throws -> ProcessOutcome {
    let binary = try #require(Binary.path, "the kidledger executable was neither found nor built", sourceLocation: sourceLocation)
    let outcome = try runProcess(binary, arguments, environment: ["KIDLEDGER_HOME": ledger.home, "HOME": ledger.directory,
                                                                  "PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"], timeout: 60)
    #expect(!outcome.timedOut, "kidledger \(arguments.joined(separator: " ")) hung: \(outcome)", sourceLocation: sourceLocation)
    return outcome
}

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

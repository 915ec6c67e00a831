import Foundation
import Testing

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
public enum Binary {
    public static let path: String? = locate()

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

    /// The package directory: this file is <root>/Tests/KidLedgerCLITestSupport/Processes.swift.
    public static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }
}

/// What a finished process returned.
public struct ProcessOutcome: CustomStringConvertible {
    public var code: Int32
    public var stdout: String
    public var stderr: String
    public var timedOut: Bool

    public var description: String { "exit \(code)\(timedOut ? " (killed after the time limit)" : "")\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }
}

/// Runs `executable` with `arguments` and exactly `environment`, killing it after `timeout` seconds.
/// Output goes to temporary files (no pipe can fill up and block the child); standard input is
/// `input` (from a temporary file), else empty.
public func runProcess(_ executable: String, _ arguments: [String], environment: [String: String],
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
public func kidledger(_ ledger: TestLedger, _ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) throws -> ProcessOutcome {
    let binary = try #require(Binary.path, "the kidledger executable was neither found nor built", sourceLocation: sourceLocation)
    let outcome = try runProcess(binary, arguments, environment: ["KIDLEDGER_HOME": ledger.home, "HOME": ledger.directory,
                                                                  "PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"], timeout: 60)
    #expect(!outcome.timedOut, "kidledger \(arguments.joined(separator: " ")) hung: \(outcome)", sourceLocation: sourceLocation)
    return outcome
}

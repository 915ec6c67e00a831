import Foundation
import Synchronization
import KidLedgerTestSupport
import Testing

// Helpers for tests that run real `kidledger` processes talking TCP on 127.0.0.1.
// Every wait is bounded; every process started here is registered with a `ProcessGroup`
// whose `stopAll()` (called from a `defer`) kills and reaps whatever is still running.

/// A `kidledger` process running in the background, its output going to files.
///
/// Spawned with `posix_spawn` and an empty signal mask with default dispositions, as a shell would
/// start it: `Foundation.Process` passes on the mask of the calling thread, and the test runner's
/// threads block SIGTERM and SIGINT. Reaped only here (`waitpid` on its pid), so the pid stays
/// ours to signal until `wait` has seen it end.
public final class BackgroundProcess: Sendable {
    public let pid: pid_t
    public let outPath: String
    public let errPath: String
    public let arguments: [String]
    /// The raw wait status once reaped (nil while running); reaped under its lock, so only once.
    private let reaped = Mutex<Int32?>(nil)
    private var status: Int32? { reaped.withLock { $0 } }

    /// Starts `kidledger ARGS` on `ledger`'s home (same environment as `kidledger(_:_:)`, plus
    /// `extraEnvironment`), with `blocked` signals blocked (none unless a test asks).
    public init(_ ledger: TestLedger, _ arguments: [String], blocked: [Int32] = [], extraEnvironment: [String: String] = [:]) throws {
        let binary = try #require(Binary.path, "the kidledger executable was neither found nor built")
        let base = ledger.directory + "/proc-\(UUID().uuidString.prefix(8))"
        outPath = base + ".out"
        errPath = base + ".err"
        self.arguments = arguments

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t(), defaults = sigset_t()
        sigemptyset(&mask)
        for signal in blocked { sigaddset(&mask, signal) }
        sigfillset(&defaults)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let environment = ["KIDLEDGER_HOME=\(ledger.home)", "HOME=\(ledger.directory)", "PATH=/usr/bin:/bin", "LC_ALL=C"]
            + extraEnvironment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let argv = ([binary] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, binary, &actions, &attributes, argv, envp)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
        pid = child
    }

    public var stdout: String { (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "" }
    public var stderr: String { (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "" }

    /// Whether it has ended (reaping it when it has).
    public var hasExited: Bool {
        reaped.withLock { status in
            if status != nil { return true }
            var raw: Int32 = 0
            let r = waitpid(pid, &raw, WNOHANG)
            if r == pid { status = raw }
            else if r < 0 && errno == ECHILD { status = -1 } // cannot happen: nobody else reaps it
            return status != nil
        }
    }

    /// Waits at most `timeout` seconds for the process to end; true when it has.
    @discardableResult
    public func wait(timeout: TimeInterval) -> Bool {
        let deadline = Deadline(seconds: timeout)
        while !hasExited {
            if deadline.passed { return false }
            usleep(10_000)
        }
        return true
    }

    /// The exit status (-1 while running or when it ended by a signal).
    public var exitCode: Int32 {
        guard let status, status & 0x7f == 0 else { return -1 }
        return (status >> 8) & 0xff
    }
    /// Whether it ended by a signal rather than `exit`.
    public var killedBySignal: Bool {
        guard let status else { return false }
        return status & 0x7f != 0 && status & 0x7f != 0x7f
    }

    /// The signal that ended it, or nil (running, or ended by `exit`).
    public var terminationSignal: Int32? {
        guard let status, killedBySignal else { return nil }
        return status & 0x7f
    }

    /// Sends `signal` while it runs (not yet reaped, so the pid is still ours).
    public func send(_ signal: Int32) {
        if !hasExited { kill(pid, signal) }
    }

    /// SIGKILL and reap (bounded). Safe to call more than once.
    public func killAndReap() {
        guard !hasExited else { return }
        kill(pid, SIGKILL)
        _ = wait(timeout: 30)
    }
}

/// The processes one test started; `stopAll()` kills and reaps every one still running.
public final class ProcessGroup: Sendable {
    private let list = Mutex<[BackgroundProcess]>([])

    public init() {}

    @discardableResult
    public func add(_ p: BackgroundProcess) -> BackgroundProcess {
        list.withLock { $0.append(p) }
        return p
    }

    public func stopAll() {
        for p in list.withLock({ $0 }) { p.killAndReap() }
    }
}

/// A running `kidledger serve --listen 127.0.0.1:N` and the port it bound.
public final class DaemonProcess: Sendable {
    public let background: BackgroundProcess
    public let port: Int
    public var address: String { "127.0.0.1:\(port)" }
    public var log: String { background.stderr }

    private init(background: BackgroundProcess, port: Int) {
        self.background = background
        self.port = port
    }

    /// Starts the daemon (port 0 unless `port` is given: a port this test's own daemon bound before)
    /// and waits at most 30 s for its first line, `... serving "NAME" on 127.0.0.1:PORT (...`.
    /// Returns nil (the process reaped) when it exits first or never says so.
    public static func start(_ ledger: TestLedger, in group: ProcessGroup, port: Int = 0, blocked: [Int32] = [],
                      extraEnvironment: [String: String] = [:], arguments: [String] = [],
                      sourceLocation: SourceLocation = #_sourceLocation) throws -> DaemonProcess? {
        let p = group.add(try BackgroundProcess(ledger, ["serve", "--listen", "127.0.0.1:\(port)"] + arguments, blocked: blocked,
                                                extraEnvironment: extraEnvironment))
        let marker = " on 127.0.0.1:"
        let deadline = Deadline(seconds: 30)
        while !deadline.passed {
            let text = p.stderr
            if let firstLine = text.split(separator: "\n", omittingEmptySubsequences: false).first,
               text.contains("\n"), let range = firstLine.range(of: marker) {
                let digits = firstLine[range.upperBound...].prefix { $0.isASCII && $0.isNumber }
                if let bound = Int(digits), bound > 0 { return DaemonProcess(background: p, port: bound) }
                Issue.record("unexpected first line of serve: \(firstLine)", sourceLocation: sourceLocation)
                p.killAndReap()
                return nil
            }
            if p.hasExited { break }
            usleep(20_000)
        }
        if !p.hasExited { Issue.record("serve did not announce its port within 30 s: \(p.stderr)", sourceLocation: sourceLocation) }
        p.killAndReap()
        return nil
    }

    /// SIGTERM, then waits at most `timeout` s; returns the exit status, or nil when it had to be killed.
    public func stop(timeout: TimeInterval = 15) -> Int32? {
        background.send(SIGTERM)
        guard background.wait(timeout: timeout) else {
            background.killAndReap()
            return nil
        }
        return background.killedBySignal ? -1 : background.exitCode
    }
}


/// The household many network tests start from: `owner` runs `init Smiths` and adds Ava, then
/// starts its daemon on 127.0.0.1.
public func smithsServing(_ owner: TestLedger, in group: ProcessGroup, sourceLocation: SourceLocation = #_sourceLocation) throws -> DaemonProcess {
    try ok(owner, "init", "Smiths", sourceLocation: sourceLocation)
    try ok(owner, "child", "add", "Ava", sourceLocation: sourceLocation)
    return try #require(try DaemonProcess.start(owner, in: group, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
}

/// Runs the process, expects exit 0 and returns its standard output.
@discardableResult
public func ok(_ ledger: TestLedger, _ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    let outcome = try runKidledger(ledger, arguments, sourceLocation: sourceLocation)
    #expect(outcome.code == 0, "kidledger \(arguments.joined(separator: " ")): \(outcome)", sourceLocation: sourceLocation)
    return outcome.stdout
}

/// `kidledger(_:_:)` with an array of arguments.
public func runKidledger(_ ledger: TestLedger, _ arguments: [String], input: String? = nil,
                         sourceLocation: SourceLocation = #_sourceLocation) throws -> ProcessOutcome {
    let binary = try #require(Binary.path, "the kidledger executable was neither found nor built", sourceLocation: sourceLocation)
    let outcome = try runProcess(binary, arguments, environment: ["KIDLEDGER_HOME": ledger.home, "HOME": ledger.directory,
                                                                  "PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"], timeout: 120, input: input)
    #expect(!outcome.timedOut, "kidledger \(arguments.joined(separator: " ")) hung: \(outcome)", sourceLocation: sourceLocation)
    return outcome
}

/// Runs `--json ARGS`, expects exit 0 and returns the top-level object (empty when not one).
public func json(_ ledger: TestLedger, _ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    let outcome = try runKidledger(ledger, ["--json"] + arguments, sourceLocation: sourceLocation)
    #expect(outcome.code == 0, "kidledger --json \(arguments.joined(separator: " ")): \(outcome)", sourceLocation: sourceLocation)
    return (parseJSON(outcome.stdout, sourceLocation: sourceLocation) as? [String: Any]) ?? [:]
}

/// The `digest` line of a home (empty when the command failed).
public func digest(_ ledger: TestLedger, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    let outcome = try runKidledger(ledger, ["digest"], sourceLocation: sourceLocation)
    #expect(outcome.code == 0 && outcome.stdout.count == 65, "digest: \(outcome)", sourceLocation: sourceLocation)
    return outcome.code == 0 ? outcome.stdout.trimmingCharacters(in: .whitespacesAndNewlines) : ""
}

/// An invitation code from `--json invite` on `ledger` (its daemon must be running).
public func inviteCode(_ ledger: TestLedger, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    let code = try json(ledger, "invite", sourceLocation: sourceLocation)["code"] as? String
    return try #require(code, "invite printed no code", sourceLocation: sourceLocation)
}

/// `children --all --json` as (name → (balanceCents, transactionCount)).
public func childTable(_ ledger: TestLedger, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: [Int64]] {
    let list = try json(ledger, "children", "--all", sourceLocation: sourceLocation)["children"] as? [[String: Any]] ?? []
    var table: [String: [Int64]] = [:]
    for child in list {
        let name = child["name"] as? String ?? "?"
        table[name] = [(child["balanceCents"] as? NSNumber)?.int64Value ?? .min,
                       (child["transactionCount"] as? NSNumber)?.int64Value ?? .min]
    }
    return table
}

/// `verify` must exit 0 and say "ok:".
public func expectVerified(_ ledger: TestLedger, _ label: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let outcome = try runKidledger(ledger, ["verify"], sourceLocation: sourceLocation)
    #expect(outcome.code == 0 && outcome.stdout.hasPrefix("ok: "), "verify on \(label): \(outcome)", sourceLocation: sourceLocation)
}

/// A TCP port on 127.0.0.1 that is bound but not listening while the returned socket is open:
/// connecting to it is refused, and no other process can take it meanwhile.
public func refusingPort() throws -> (fd: Int32, port: Int) {
    try loopbackSocket(listening: false)
}

/// A TCP socket bound to 127.0.0.1 on a system-chosen port, listening or not.
public func loopbackSocket(listening: Bool) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0, !listening || listen(fd, 4) == 0 else { close(fd); throw POSIXError(.EADDRINUSE) }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else { close(fd); throw POSIXError(.EIO) }
    return (fd, Int(UInt16(bigEndian: addr.sin_port)))
}

/// The sum of `transactionCount` over every child (archived too).
public func transactionTotal(_ ledger: TestLedger, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int64 {
    try childTable(ledger, sourceLocation: sourceLocation).values.reduce(0) { $0 + $1[1] }
}

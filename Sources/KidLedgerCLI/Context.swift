#if canImport(Glibc)
import Glibc
#endif
import Foundation
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB
import KidLedgerSecurity
import Synchronization
import KidLedgerSystem
import KidLedgerDaemon

/// Where the CLI writes: standard output and standard error, or a buffer in tests.
public protocol Console: AnyObject, Sendable {
    /// Writes to standard output.
    func out(_ text: String)
    /// Writes to standard error.
    func err(_ text: String)
}

/// The process's standard streams.
public final class StandardConsole: Console, Sendable {
    /// Creates a console on stdout/stderr.
    public init() {}
    /// Writes to stdout.
    public func out(_ text: String) { Self.write(text, to: 1) }
    /// Writes to stderr.
    public func err(_ text: String) { Self.write(text, to: 2) }

    static func write(_ text: String, to descriptor: Int32) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = retryWhileInterrupted { bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) } }
            if n <= 0 { return }
            bytes = bytes.dropFirst(n)
        }
    }
}

/// A console that keeps what was written (tests). Thread-safe: the daemon logs from several threads.
public final class BufferConsole: Console, Sendable {
    private let text = Mutex((out: "", err: ""))
    /// Everything written to stdout.
    public var stdout: String { text.withLock { $0.out } }
    /// Everything written to stderr.
    public var stderr: String { text.withLock { $0.err } }
    /// Creates an empty buffer.
    public init() {}
    /// Appends to ``stdout``.
    public func out(_ text: String) { self.text.withLock { $0.out += text } }
    /// Appends to ``stderr``.
    public func err(_ text: String) { self.text.withLock { $0.err += text } }
}

/// What every command gets: the home, the output mode, the console. Immutable, so the daemon's
/// session threads may share it.
public final class Context: Sendable {
    /// The ledger home directory.
    public let home: String
    /// Whether `--json` was given.
    public let json: Bool
    /// Whether `--utc` was given: text shows times in UTC instead of the local zone.
    public let utc: Bool
    /// Where output goes.
    public let console: Console
    let clock: any WallClock
    /// The process environment (settings such as ``Daemon/peerTimeoutVariable``).
    let environment: [String: String]
    /// The daemon's open store, when the page runs a command inside the daemon (one process may
    /// open a store only once).
    let sharedStore: LMDBEnvironment?
    /// Where ``say(_:)`` writes in JSON mode too (the page shows a command's message beside its JSON).
    let messages: Console?
    /// The household's time zone as the last replica opened here read it (text shows times in it:
    /// ``time``); nil until one is opened.
    let householdZone = Mutex<Replica.TimeZoneSetting?>(nil)

    init(home: String, json: Bool, utc: Bool = false, console: Console, clock: any WallClock, environment: [String: String] = [:],
         sharedStore: LMDBEnvironment? = nil, messages: Console? = nil) {
        self.utc = utc
        self.sharedStore = sharedStore
        self.messages = messages
        self.environment = environment
        self.home = home
        self.json = json
        self.console = console
        self.clock = clock
    }

    /// This context on `store`, opened already (the daemon shares its store with the page).
    func sharing(_ store: LMDBEnvironment) -> Context {
        Context(home: home, json: json, utc: utc, console: console, clock: clock, environment: environment, sharedStore: store, messages: messages)
    }

    /// The LMDB environment directory inside the home.
    public var storePath: String { home + "/ledger" }

    /// Where `join` builds the joined ledger before it becomes ``storePath``: present while a join
    /// runs, and after one was interrupted (killed before it finished); the next join starts it afresh.
    var joinStagingPath: String { home + "/ledger.joining" }

    /// Whether a join into this home was interrupted (or is still running).
    var joinInterrupted: Bool { FileSystem.exists(joinStagingPath) }

    /// The message for a home whose join did not finish.
    static let joinInterruptedMessage = "a join into this home did not finish (it was interrupted, or is still running): run the same `kidledger join CODE` again (ask the owner for a new code if that one has expired or was used)"

    /// Opens the replica. With `creating` false, a home without a store is "no household yet"
    /// and nothing is created on disk. `readingZone`: read the household's time zone for ``time``
    /// (a change reads it in its own transaction instead).
    public func openReplica(creating: Bool = false, readingZone: Bool = true) throws -> Replica {
        try openReplica(at: storePath, creating: creating, readingZone: readingZone)
    }

    /// Opens the replica stored in `path` (a directory inside the home).
    func openReplica(at path: String, creating: Bool, readingZone: Bool = true) throws -> Replica {
        if !creating && !FileSystem.exists(path + "/data.mdb") {
            if path == storePath && joinInterrupted { throw CLIError(Self.joinInterruptedMessage, code: .temporaryFailure) }
            throw LedgerError.noHousehold
        }
        if creating { try FileSystem.makeDirectory(home) }
        let limit = try mapSizeMax()
        let environment = try (path == storePath ? sharedStore : nil)
            ?? LMDBEnvironment(directory: path, tables: Tables.all, mapSizeBytes: min(64 << 20, limit), mapSizeBytesMax: limit, mustExist: !creating)
        // The claim signer (which needs the key file) is installed only for changes:
        // see configure(_:identity:); read commands never touch the key.
        let replica = try Replica(store: environment, clock: clock, random: SystemRandomNumberGenerator(), verifier: SodiumVerifier()) { schema in
            try MigrationBackups.save(environment, schema: schema, home: self.home, now: self.clock.nowMillis())
        }
        replica.workSplitter = ThreadedWork.forThisMachine()
        replica.zones = FoundationZones()
        if path == storePath && readingZone { householdZone.withLock { $0 = try? replica.householdTimeZone() } }
        return replica
    }

    /// The environment variable capping the store's map (bytes; the store grows up to it).
    static let mapSizeMaxVariable = "KIDLEDGER_MAP_SIZE_MAX"

    /// The largest size the store may grow to: ``mapSizeMaxVariable`` (256 KiB to 1 TiB), else 1 TiB.
    func mapSizeMax() throws -> Int {
        guard let raw = environment[Self.mapSizeMaxVariable] else { return 1 << 40 }
        guard let value = Int(raw), (256 << 10 ... 1 << 40).contains(value) else {
            throw CLIError.usage("\(Self.mapSizeMaxVariable) must be a whole number of bytes from 262144 to 1099511627776, got \"\(raw)\"")
        }
        return value
    }

    /// Prints a line of text (or nothing in JSON mode).
    public func say(_ text: String) {
        let line = TextEscaping.terminalLines(text)
        if !json { console.out(line + "\n") } else { messages?.out(line + "\n") }
    }

    /// Prints a JSON document (only in JSON mode).
    public func emit(_ value: JSON) {
        if json { console.out(value.rendered() + "\n") }
    }
}

/// Small file-system helpers over Glibc.
enum FileSystem {
    static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    static func makeDirectory(_ path: String) throws {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw CLIError("\(path) exists and is not a directory", code: .ioError) }
            return
        }
        let parent = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !parent.isEmpty && !exists(parent) { try makeDirectory(parent) }
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw CLIError("cannot create \(path): \(String(cString: strerror(errno)))", code: .ioError)
        }
    }

    /// Removes a directory of plain files (a store directory); a missing path is fine.
    static func removeTree(_ path: String) throws {
        guard exists(path) else { return }
        guard let dir = opendir(path) else { throw CLIError("cannot open \(path): \(String(cString: strerror(errno)))", code: .ioError) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(dir)
        for name in names where unlink(path + "/" + name) != 0 {
            throw CLIError("cannot remove \(path)/\(name): \(String(cString: strerror(errno)))", code: .ioError)
        }
        guard rmdir(path) == 0 else { throw CLIError("cannot remove \(path): \(String(cString: strerror(errno)))", code: .ioError) }
    }

    static func readFile(_ path: String) throws -> String {
        guard let file = fopen(path, "rb") else {
            throw CLIError("cannot read \(path): \(String(cString: strerror(errno)))", code: .ioError)
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n > 0 { bytes.append(contentsOf: buffer[0..<n]) }
            if n < buffer.count { break }
        }
        if ferror(file) != 0 { throw CLIError("cannot read \(path)", code: .ioError) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Copies the file `source` to `destination` (created with mode 0600).
    static func copyFile(_ source: String, to destination: String) throws {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw CLIError("cannot read \(source): \(String(cString: strerror(errno)))", code: .ioError) }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw CLIError("cannot write \(destination): \(String(cString: strerror(errno)))", code: .ioError) }
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = retryWhileInterrupted { buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) } }
            guard n >= 0 else { throw CLIError("cannot read \(source): \(String(cString: strerror(errno)))", code: .ioError) }
            if n == 0 { return }
            var done = 0
            while done < n {
                let w = retryWhileInterrupted { buffer.withUnsafeBytes { Glibc.write(output, $0.baseAddress! + done, n - done) } }
                guard w > 0 else { throw CLIError("cannot write \(destination): \(String(cString: strerror(errno)))", code: .ioError) }
                done += w
            }
        }
    }

    /// Writes `text` to `path` atomically (temporary file, fsync, rename).
    static func writeFile(_ path: String, _ text: String) throws {
        let temporary = path + ".tmp-\(getpid())"
        guard let file = fopen(temporary, "wb") else {
            throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))", code: .ioError)
        }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        let flushed = fflush(file) == 0 && fsync(fileno(file)) == 0
        fclose(file)
        guard written == bytes.count, flushed, rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw CLIError("cannot write \(path): \(reason)", code: .ioError)
        }
    }
}

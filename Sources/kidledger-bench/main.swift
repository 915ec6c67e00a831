// kidledger-bench: the benchmark helper behind Scripts/bench.sh (not a user command).
//
//   kidledger-bench append --store DIR --count N [--seed S] [--tsv FILE]
//       appends N transactions (one local change each, spread over the home's active children)
//       through the store API in one batch (`Replica.postBatch`, one durable LMDB write
//       transaction) and times it; then measures the floor: the records the store now holds,
//       read back and put raw into a fresh LMDB environment through the C API in one durable
//       write transaction. Prints one JSON line. --tsv writes the appended transactions
//       (id, child, cents, createdAt, note, source) for the Yrs comparison.
//   kidledger-bench run [--runs R] [--warmup W] [--out FILE] -- PROGRAM ARGS...
//       runs a whole process R times (after W unmeasured runs) and prints one JSON line: the
//       median and every sample of its wall time, the median CPU time (user + system) and its peak
//       resident memory (ru_maxrss).
//       --out keeps the standard output of the last run; a failing exit status stops the bench
//       unless --any-status.
#if canImport(Glibc)
import Glibc
#endif
import CLMDB
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB
import KidLedgerSecurity
import KidLedgerSystem

struct WallClockNow: WallClock {
    func nowMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}

func fail(_ message: String) -> Never {
    let text = Array("kidledger-bench: \(message)\n".utf8)
    _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(64)
}

func option(_ name: String, _ args: inout [String]) -> String? {
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
    let value = args[i + 1]
    args.removeSubrange(i...(i + 1))
    return value
}

func median(_ samples: [Double]) -> Double {
    let s = samples.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func fmt(_ x: Double) -> String { String(Int((x * 1e6).rounded())) + "e-6" }

// MARK: append

/// The identity the CLI signs in with for the home that holds `store` (HOME/ledger): the account
/// named in HOME/account ("default" when absent), from HOME/identities; nil when there is none.
func homeIdentity(ofStore store: String) -> Identity? {
    var home = store
    while home.hasSuffix("/") { home.removeLast() }
    home = String(home[..<(home.lastIndex(of: "/") ?? home.startIndex)])
    if home.isEmpty { home = "." }
    var account = "default"
    if let file = fopen(home + "/account", "r") {
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 256)
        if fgets(&buffer, Int32(buffer.count), file) != nil {
            let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            let name = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
            if !name.isEmpty { account = name }
        }
    }
    do { return try KeyStore(directory: home + "/identities").load(account: account) } catch { fail("identity \(account): \(error)") }
}

/// Notes of a plausible household; most transactions have one.
let notes = ["chores", "weekly allowance", "", "birthday", "tooth fairy", "ice cream", "saved for a bike", "lost bet", "", "library fine"]

func append(_ args: [String]) {
    var args = args
    guard let store = option("--store", &args) else { fail("append needs --store DIR") }
    guard let count = option("--count", &args).flatMap(Int.init), count > 0 else { fail("append needs --count N") }
    let seed = option("--seed", &args).flatMap(UInt64.init) ?? 8
    let tsv = option("--tsv", &args)
    guard args.isEmpty else { fail("unexpected \(args)") }

    let environment: LMDBEnvironment
    let replica: Replica
    do {
        // A large initial map, so the one big write transaction never has to start over after
        // growing the map (the CLI adopts the recorded size when it opens the home).
        environment = try LMDBEnvironment(directory: store, tables: Tables.all, mapSizeBytes: 16 << 30)
        replica = try Replica(store: environment, clock: WallClockNow(), random: SplitMix64(seed: seed ^ 0x5eed),
                              verifier: SodiumVerifier())
    } catch { fail("cannot open \(store): \(error)") }
    // The home's signed-in identity signs, as the CLI's would: in an owned household only the
    // changes of an origin its member key claims count.
    replica.signer = homeIdentity(ofStore: store)?.signer
    let children = (try? replica.children()) ?? []
    guard !children.isEmpty else { fail("the home has no active children") }
    var random = SplitMix64(seed: seed)
    var drafts: [Replica.Draft] = []
    drafts.reserveCapacity(count)
    for i in 0..<count {
        let child = children[i % children.count].id
        let cents = Int64(random.next() % 2_000) + 1
        let take = random.next() % 10 == 0
        drafts.append(Replica.Draft(childID: child, signedCents: take ? -cents : cents, note: notes[Int(random.next() % UInt64(notes.count))]))
    }
    let started = Monotonic.seconds()
    let changes: [Change]
    do { changes = try replica.postBatch(drafts, source: "give") } catch { fail("append failed: \(error)") }
    let seconds = Monotonic.seconds() - started

    if let tsv {
        guard let file = fopen(tsv, "w") else { fail("cannot write \(tsv)") }
        for change in changes {
            for case .addTransaction(let t) in change.operations {
                fputs("\(t.id)\t\(t.childID)\t\(t.amountCents)\t\(t.createdAtMillis)\t\(t.note)\t\(t.source)\n", file)
            }
        }
        fclose(file)
    }

    // The floor: the same records, pre-encoded, put raw through the C API.
    var tables: [(Table, [([UInt8], [UInt8])])] = []
    var recordCount = 0, recordBytes = 0
    do {
        try environment.read { r in
            for table in Tables.all {
                var records: [([UInt8], [UInt8])] = []
                try r.scan(table) { key, value in
                    records.append((key, value))
                    return true
                }
                recordCount += records.count
                recordBytes += records.reduce(0) { $0 + $1.0.count + $1.1.count }
                tables.append((table, records))
            }
        }
    } catch { fail("cannot read back \(store): \(error)") }
    environment.close()
    let floorSeconds = rawLMDBPuts(tables, directory: store + ".floor")
    print("{\"count\":\(count),\"seconds\":\(fmt(seconds)),\"floorSeconds\":\(fmt(floorSeconds)),\"records\":\(recordCount),\"recordBytes\":\(recordBytes)}")
}

/// Puts `tables` into a fresh environment in `directory` in one durable write transaction (each
/// table's records in key order, as `mdb_load` would) and returns the seconds from the
/// transaction's start to its durable commit. Removes the environment afterwards.
func rawLMDBPuts(_ tables: [(Table, [([UInt8], [UInt8])])], directory: String) -> Double {
    mkdir(directory, 0o700)
    defer {
        unlink(directory + "/data.mdb")
        unlink(directory + "/lock.mdb")
        rmdir(directory)
    }
    func check(_ rc: Int32, _ what: String) {
        if rc != 0 { fail("floor: \(what): \(String(cString: mdb_strerror(rc)))") }
    }
    var env: OpaquePointer?
    check(mdb_env_create(&env), "env_create")
    check(mdb_env_set_maxdbs(env, MDB_dbi(tables.count + 4)), "maxdbs")
    check(mdb_env_set_mapsize(env, 16 << 30), "mapsize")
    check(mdb_env_open(env, directory, UInt32(MDB_NOTLS), 0o600), "env_open")
    defer { mdb_env_close(env) }
    let started = Monotonic.seconds()
    var txn: OpaquePointer?
    check(mdb_txn_begin(env, nil, 0, &txn), "txn_begin")
    for (table, records) in tables {
        var dbi: MDB_dbi = 0
        check(mdb_dbi_open(txn, table.name, UInt32(MDB_CREATE), &dbi), "dbi_open")
        for (key, value) in records {
            key.withUnsafeBytes { k in
                value.withUnsafeBytes { v in
                    var kv = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                    var vv = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress ?? k.baseAddress))
                    check(mdb_put(txn, dbi, &kv, &vv, 0), "put")
                }
            }
        }
    }
    check(mdb_txn_commit(txn), "commit")
    return Monotonic.seconds() - started
}

// MARK: run

/// `RssAnon` of a process (KiB), 0 when it can't be read.
func anonKiB(_ pid: Int32) -> Int {
    guard let file = fopen("/proc/\(pid)/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("RssAnon:") {
            return Int(String(text.dropFirst(8).filter(\.isNumber))) ?? 0
        }
    }
    return 0
}

func run(_ args: [String]) {
    guard let dash = args.firstIndex(of: "--"), dash + 1 < args.count else { fail("run needs -- PROGRAM ARGS...") }
    var options = Array(args[..<dash])
    let command = Array(args[(dash + 1)...])
    let runs = option("--runs", &options).flatMap(Int.init) ?? 5
    let warmup = option("--warmup", &options).flatMap(Int.init) ?? 0
    let out = option("--out", &options)
    // With --watch PID (the daemon), the child's and that process's anonymous memory (heap, not
    // the mapped LMDB file) is sampled every 2 ms while the child runs.
    let watch = option("--watch", &options).flatMap { Int32($0) }
    let anyStatus = options.contains("--any-status")
    options.removeAll { $0 == "--any-status" }
    guard options.isEmpty, runs >= 1, warmup >= 0 else { fail("unexpected \(options)") }
    var samples: [Double] = []
    var cpuSamples: [Double] = []
    var maxRSS = 0
    var lastStatus: Int32 = 0
    /// The highest anonymous resident memory (KiB) seen of the child and of the watched process.
    var peakAnon = (child: 0, watched: 0)
    for i in 0..<(warmup + runs) {
        let last = i == warmup + runs - 1
        let (seconds, cpu, rss, status) = spawn(command, stdoutPath: last ? out : nil, watch: watch, peakAnon: &peakAnon)
        lastStatus = status
        guard status == 0 || anyStatus else { fail("\(command.joined(separator: " ")) exited with \(status)") }
        if i >= warmup {
            samples.append(seconds)
            cpuSamples.append(cpu)
            maxRSS = max(maxRSS, rss)
        }
    }
    print("{\"median\":\(fmt(median(samples))),\"samples\":[\(samples.map(fmt).joined(separator: ","))],\"cpuMedian\":\(fmt(median(cpuSamples))),\"maxRSSKiB\":\(maxRSS),\"status\":\(lastStatus)\(watch == nil ? "" : ",\"peakAnonKiB\":\(peakAnon.child),\"watchPeakAnonKiB\":\(peakAnon.watched)")}")
}

/// Runs `command` (an absolute path and its arguments), waits for it, and returns its wall time,
/// CPU time (user + system), peak resident set (KiB) and exit status. With `watch`, raises
/// `peakAnon` to the highest anonymous memory seen of the child and of that process.
func spawn(_ command: [String], stdoutPath: String?, watch: Int32? = nil,
           peakAnon: inout (child: Int, watched: Int)) -> (Double, Double, Int, Int32) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, stdoutPath ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv = command.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let started = Monotonic.seconds()
    let rc = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
    guard rc == 0 else { fail("cannot run \(command[0]): \(String(cString: strerror(rc)))") }
    var status: Int32 = 0
    var usage = rusage()
    if let watch {
        while true {
            peakAnon.child = max(peakAnon.child, anonKiB(pid))
            peakAnon.watched = max(peakAnon.watched, anonKiB(watch))
            let rc = retryWhileInterrupted { wait4(pid, &status, WNOHANG, &usage) }
            if rc == pid || rc < 0 { break }
            usleep(2_000)
        }
    } else {
        _ = retryWhileInterrupted { wait4(pid, &status, 0, &usage) }
    }
    let seconds = Monotonic.seconds() - started
    let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    return (seconds, cpu, Int(usage.ru_maxrss), exitStatus)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { fail("usage: kidledger-bench append|run ...") }
arguments.removeFirst()
switch command {
case "append": append(arguments)
case "run": run(arguments)
default: fail("unknown command \(command)")
}

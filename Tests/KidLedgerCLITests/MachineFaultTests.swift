import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
import KidLedgerSystem
@testable import KidLedgerDaemon

/// Faults of the machine under real `kidledger` processes: SIGKILL at random points during writes
/// (of `give` and of a daemon receiving a sync), a full disk (a tmpfs the test mounts) and a capped
/// LMDB map, and damaged store files (truncated, overwritten, zeroed header, garbage lock file).
/// Every random choice comes from a `SplitMix64` with a fixed seed; no assertion depends on speed.
@Suite("Machine faults: kills, full disks, damaged files")
struct MachineFaultTests {
    /// How a finished `kidledger` process ended.
    struct Ended: CustomStringConvertible {
        var code: Int32
        var signal: Int32?
        var stdout: String
        var stderr: String
        var description: String { "\(signal.map { "killed by signal \($0)" } ?? "exit \(code)")\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }
    }

    /// Runs `kidledger ARGS` as a process (posix_spawn), waits at most 60 s, and reports how it ended
    /// (a normal exit or a signal).
    static func run(_ ledger: TestLedger, _ arguments: [String], environment: [String: String] = [:],
                    sourceLocation: SourceLocation = #_sourceLocation) throws -> Ended {
        let p = try BackgroundProcess(ledger, arguments, extraEnvironment: environment)
        defer { try? FileManager.default.removeItem(atPath: p.outPath); try? FileManager.default.removeItem(atPath: p.errPath) }
        if !p.wait(timeout: 60) {
            p.killAndReap()
            Issue.record("kidledger \(arguments.joined(separator: " ")) hung", sourceLocation: sourceLocation)
        }
        return Ended(code: p.exitCode, signal: p.terminationSignal,
                     stdout: p.stdout, stderr: p.stderr)
    }

    /// Runs a command in this process with `environment` added to the ledger's, on the system clock
    /// (as the processes it runs beside).
    static func inProcess(_ ledger: TestLedger, _ arguments: [String], environment: [String: String] = [:]) -> Outcome {
        ledger.run(arguments, adding: environment, clock: SystemClock())
    }

    /// Notes of every transaction in the history (newest first), from `history --json`.
    static func notes(_ ledger: TestLedger) throws -> [String] {
        let outcome = ledger.run(["--json", "history", "--limit", "0"])
        try #require(outcome.code == 0, "\(outcome)")
        let object = parseJSON(outcome.stdout) as? [String: Any]
        let list = object?["transactions"] as? [[String: Any]] ?? []
        return list.compactMap { ($0["transaction"] as? [String: Any])?["note"] as? String }
    }

    // MARK: a) SIGKILL during writes

    /// 50 `give` processes, each killed with SIGKILL after a seeded random delay below a ceiling
    /// that halves whenever a give finished first and grows by a quarter whenever one was killed,
    /// so kills keep landing before, during and after the write transaction whatever the speed.
    /// After every kill the store opens and `verify` passes; at the end every give that reported
    /// success is in the history exactly once, nothing is there twice, and the balance is the sum.
    @Test func killedGivesLoseNoAcknowledgedChangeAndDuplicateNothing() throws {
        let ledger = TestLedger()
        defer { ledger.remove() }
        ledger.ok("init", "Smiths")
        ledger.ok("child", "add", "Ava")
        // One unkilled give gives the scale of the delays (not asserted on).
        let started = Monotonic.millis()
        let first = try Self.run(ledger, ["give", "Ava", "0.01", "--note", "k-first"])
        try #require(first.code == 0 && first.signal == nil, "\(first)")
        var ceilingMicros = max(UInt64(Monotonic.millis() - started) * 1_000, 20_000)

        var random = SplitMix64(seed: 0x6B69_6C6C)
        var acknowledged = ["k-first"]
        var killed = 0
        for i in 0..<50 {
            let note = "k\(i)"
            let p = try BackgroundProcess(ledger, ["give", "Ava", "0.01", "--note", note])
            defer { try? FileManager.default.removeItem(atPath: p.outPath); try? FileManager.default.removeItem(atPath: p.errPath) }
            usleep(useconds_t(random.next() % ceilingMicros))
            let exitedFirst = p.hasExited
            if !exitedFirst { kill(p.pid, SIGKILL); killed += 1 }
            ceilingMicros = exitedFirst ? max(ceilingMicros / 2, 1) : min(ceilingMicros + ceilingMicros / 4 + 1, 2_000_000)
            #expect(p.wait(timeout: 60), "give \(i) did not end")
            if exitedFirst || !p.killedBySignal {
                // It finished before the kill: it must have succeeded.
                #expect(p.exitCode == 0 && !p.killedBySignal, "give \(i) failed on its own: \(p.stderr)")
                if p.exitCode == 0 && !p.killedBySignal { acknowledged.append(note) }
            }
            let verify = ledger.run(["verify"])
            #expect(verify.code == 0 && verify.stdout.hasPrefix("ok: "), "verify after kill \(i): \(verify)")
            if verify.code != 0 { break }
        }
        let notes = try Self.notes(ledger)
        var counts: [String: Int] = [:]
        for n in notes { counts[n, default: 0] += 1 }
        for note in acknowledged { #expect(counts[note] == 1, "acknowledged give \(note) is there \(counts[note] ?? 0) times") }
        #expect(counts.values.allSatisfy { $0 == 1 }, "duplicates: \(counts.filter { $0.value > 1 })")
        let balance = try #require(parseJSON(ledger.run(["--json", "balance", "Ava"]).stdout) as? [String: Any])
        #expect((balance["balanceCents"] as? NSNumber)?.int64Value == Int64(notes.count), "\(balance)")
        #expect(notes.count >= acknowledged.count && notes.count <= 51)
        // The ceiling halves after every give that finished first, so kills do find live processes.
        #expect(killed > 0)
        print("killed gives: \(killed) of 50 killed, \(acknowledged.count - 1) acknowledged, \(notes.count - 1) present")
    }

    /// A daemon receiving a member's sync is killed with SIGKILL after a seeded random delay (below
    /// a ceiling adapted like the gives' one), ten times; the member adds changes before each round. After each kill the daemon's store
    /// verifies, a sync that reported success delivered everything, and nothing is duplicated;
    /// at the end a clean sync makes both digests equal.
    @Test func killedDaemonDuringSyncLosesNothing() throws {
        let a = TestLedger(), b = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove() }
        var daemon = try smithsServing(a, in: group)
        try ok(b, "join", try inviteCode(a))
        var random = SplitMix64(seed: 0xDAE_4011)
        var given = 0, completed = 0
        var ceilingMicros: UInt64 = 400_000
        for round in 0..<10 {
            for _ in 0..<3 {
                given += 1
                let g = Self.inProcess(b, ["give", "Ava", "0.01", "--note", "b\(given)"])
                try #require(g.code == 0, "\(g)")
            }
            let sync = try BackgroundProcess(b, ["sync", daemon.address])
            group.add(sync)
            usleep(useconds_t(random.next() % ceilingMicros))
            let syncEndedFirst = sync.hasExited
            kill(daemon.background.pid, SIGKILL)
            #expect(daemon.background.wait(timeout: 30))
            #expect(sync.wait(timeout: 60), "sync of round \(round) did not end")
            // As with the gives: a ceiling that halves when the sync had ended before the kill.
            ceilingMicros = syncEndedFirst ? max(ceilingMicros / 2, 1) : min(ceilingMicros + ceilingMicros / 4 + 1, 2_000_000)
            let verify = Self.inProcess(a, ["verify"])
            #expect(verify.code == 0, "verify on the killed daemon's home, round \(round): \(verify)")
            let notes = try Self.notes(a)
            #expect(Set(notes).count == notes.count, "duplicates after round \(round): \(notes)")
            if sync.exitCode == 0 && !sync.killedBySignal {
                completed += 1
                #expect(notes.filter { $0.hasPrefix("b") }.count == given, "a sync that succeeded lost changes (round \(round)): \(notes)")
            }
            daemon = try #require(try DaemonProcess.start(a, in: group, port: daemon.port))
        }
        print("killed daemon: \(completed) of 10 syncs completed before the kill")
        let last = try runKidledger(b, ["sync", daemon.address])
        #expect(last.code == 0, "\(last)")
        #expect(try digest(a) == digest(b))
        #expect(try Self.notes(a).filter { $0.hasPrefix("b") }.count == given)
    }

    // MARK: b) Full disk and full map

    /// A 2 MiB tmpfs (mounted here; root only) is filled with a file, then gives run until one
    /// fails: exit 75 with the disk-full message, `verify` passes and the balance holds exactly the
    /// gives that succeeded; after the filler is deleted, giving works again.
    @Test(.enabled(if: getuid() == 0, "needs root to mount a tmpfs (CI runs as root); skipped otherwise"))
    func fullDiskFailsCleanlyAndRecovers() throws {
        let ledger = TestLedger()
        defer { ledger.remove() }
        let mountPoint = ledger.file("tmpfs")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mount = try runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", mountPoint], environment: [:], timeout: 30)
        try #require(mount.code == 0, "mount: \(mount)")
        defer { _ = try? runProcess("/bin/umount", ["-l", mountPoint], environment: [:], timeout: 30) }
        let home = TestLedger(directory: ledger.directory, home: mountPoint + "/home")
        home.ok("init", "Smiths")
        home.ok("child", "add", "Ava")
        home.ok("give", "Ava", "1.00")

        // Fill the file system.
        let filler = mountPoint + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(fd >= 0)
        let chunk = [UInt8](repeating: 0x5A, count: 16 << 10)
        var full = false
        for _ in 0..<1024 where !full {
            full = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } < chunk.count
        }
        fsync(fd)
        close(fd)
        try #require(full, "the tmpfs never filled up")

        var succeeded = 0
        var failure: Ended?
        for i in 0..<300 {
            let give = try Self.run(home, ["give", "Ava", "0.01", "--note", String(repeating: "n", count: 900) + "\(i)"])
            #expect(give.signal == nil, "\(give)")
            if give.code == 0 { succeeded += 1 } else { failure = give; break }
        }
        let failed = try #require(failure, "300 gives fit on a full 2 MiB file system")
        #expect(failed.code == 75, "\(failed)")
        #expect(failed.stderr.hasPrefix("kidledger: the disk is full") && failed.stderr.contains("nothing was written"), "\(failed)")
        let verify = try Self.run(home, ["verify"])
        #expect(verify.code == 0 && verify.stdout.hasPrefix("ok: "), "verify on the full disk: \(verify)")
        let balance = try Self.run(home, ["--json", "balance", "Ava"])
        let cents = ((parseJSON(balance.stdout) as? [String: Any])?["balanceCents"] as? NSNumber)?.int64Value
        #expect(cents == 100 + Int64(succeeded), "\(balance)")

        // Free space: the ledger works again.
        unlink(filler)
        let again = try Self.run(home, ["give", "Ava", "0.01", "--note", "after freeing space"])
        #expect(again.code == 0, "\(again)")
        #expect(try Self.run(home, ["verify"]).code == 0)
        #expect(try Self.notes(home).contains("after freeing space"))
    }

    /// With the store's map capped at 256 KiB (`KIDLEDGER_MAP_SIZE_MAX`), gives with long notes run
    /// until some fail: each with exit 75 and the size-limit message (also from the real binary,
    /// never a signal), none writing anything, `verify` passing; without the cap the store grows
    /// and the give succeeds.
    @Test func cappedMapFailsCleanlyAndGrowsWithoutTheCap() throws {
        let ledger = TestLedger()
        defer { ledger.remove() }
        let cap = [Context.mapSizeMaxVariable: "262144"]
        for arguments in [["init", "Smiths"], ["child", "add", "Ava"]] {
            let o = Self.inProcess(ledger, arguments, environment: cap)
            try #require(o.code == 0, "\(o)")
        }
        // In process: gives until three have failed (a failed give may free room that the next
        // smaller one can use, so failures need not be consecutive).
        var succeeded = 0
        var failures: [Outcome] = []
        for i in 0..<400 where failures.count < 3 {
            let give = Self.inProcess(ledger, ["give", "Ava", "0.01", "--note", String(repeating: "m", count: 990) + "\(i)"], environment: cap)
            if give.code == 0 { succeeded += 1 } else { failures.append(give) }
        }
        #expect(failures.count == 3, "400 gives with long notes fit in a 256 KiB map")
        #expect(succeeded > 0)
        for failed in failures {
            #expect(failed.code == 75, "\(failed)")
            #expect(failed.stderr.contains("reached its size limit") && failed.stderr.contains("nothing was written"), "\(failed)")
        }
        // The real binary on the full map: the same exit code, never a signal.
        var processFailure: Ended?
        for i in 0..<50 where processFailure == nil {
            let give = try Self.run(ledger, ["give", "Ava", "0.01", "--note", String(repeating: "p", count: 990) + "\(i)"], environment: cap)
            #expect(give.signal == nil, "\(give)")
            if give.code == 0 { succeeded += 1 } else { processFailure = give }
        }
        #expect(processFailure?.code == 75, "\(processFailure.map { "\($0)" } ?? "50 more gives fit")")
        // Failed gives wrote nothing: exactly the successful ones are there, and the store verifies.
        let verify = Self.inProcess(ledger, ["verify"], environment: cap)
        #expect(verify.code == 0, "\(verify)")
        #expect(try Self.notes(ledger).count == succeeded)
        // Without the cap the map grows.
        let grown = Self.inProcess(ledger, ["give", "Ava", "0.01", "--note", "grown"])
        #expect(grown.code == 0, "\(grown)")
        #expect(try Self.notes(ledger).count == succeeded + 1)
        #expect(Self.inProcess(ledger, ["verify"]).code == 0)
    }

    // MARK: c) Damaged files

    /// One way of damaging a copy of a home's store.
    struct Damage: CustomStringConvertible {
        enum Kind { case truncated, header, lock, pages }
        var name: String
        var kind: Kind
        var apply: (_ data: String, _ lock: String) throws -> Void
        var description: String { name }
    }

    /// Truncations, zeroed meta pages, a garbage lock file, and seeded random overwrites of page
    /// headers, page tails (where LMDB packs its nodes) and page middles.
    static func damages(pages: Int) -> [Damage] {
        func truncate(_ path: String, to size: Int) throws {
            guard Glibc.truncate(path, off_t(size)) == 0 else { throw POSIXError(.EIO) }
        }
        func overwrite(_ path: String, at offset: Int, _ bytes: [UInt8]) throws {
            let fd = open(path, O_WRONLY)
            guard fd >= 0 else { throw POSIXError(.EIO) }
            defer { close(fd) }
            guard bytes.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }) == bytes.count else { throw POSIXError(.EIO) }
        }
        let page = 4096
        var list: [Damage] = [
            Damage(name: "data.mdb truncated to 0 bytes", kind: .truncated) { d, _ in try truncate(d, to: 0) },
            Damage(name: "data.mdb truncated to one page", kind: .truncated) { d, _ in try truncate(d, to: page) },
            Damage(name: "data.mdb truncated to half", kind: .truncated) { d, _ in try truncate(d, to: pages / 2 * page) },
            Damage(name: "data.mdb missing its last page", kind: .truncated) { d, _ in try truncate(d, to: (pages - 1) * page) },
            Damage(name: "data.mdb cut inside its last page", kind: .truncated) { d, _ in try truncate(d, to: pages * page - 100) },
            Damage(name: "meta page 0 zeroed", kind: .header) { d, _ in try overwrite(d, at: 0, [UInt8](repeating: 0, count: page)) },
            Damage(name: "both meta pages zeroed", kind: .header) { d, _ in try overwrite(d, at: 0, [UInt8](repeating: 0, count: 2 * page)) },
            Damage(name: "meta page 1 magic overwritten", kind: .header) { d, _ in try overwrite(d, at: page + 16, [0xDE, 0xAD, 0xBE, 0xEF]) },
        ]
        var random = SplitMix64(seed: 0xC022)
        list.append(Damage(name: "lock.mdb filled with garbage", kind: .lock) { _, l in
            var r = SplitMix64(seed: 7)
            try overwrite(l, at: 0, (0..<8192).map { _ in UInt8(truncatingIfNeeded: r.next()) })
        })
        // Pages from 2 on (0 and 1 are the meta pages), at the head, the tail or a random middle: a
        // seeded sample of 30 of those places.
        var places: [(page: Int, label: String, offset: Int)] = []
        for p in 2..<pages {
            for (label, offset) in [("head", 0), ("tail", page - 48), ("middle", 16 + Int(random.next() % UInt64(page - 64)))] {
                places.append((p, label, offset))
            }
        }
        places.shuffle(using: &random)
        for place in places.prefix(30) {
            let bytes = (0..<48).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            list.append(Damage(name: "48 random bytes at the \(place.label) of page \(place.page)", kind: .pages) { d, _ in
                try overwrite(d, at: place.page * page + place.offset, bytes)
            })
        }
        return list
    }

    /// Each damage is applied to a fresh copy of one home; then `verify`, `digest`, `balance`,
    /// `history`, `children` and `give` run as processes. None may die by a signal; each exits 0
    /// or with a documented code and a `kidledger: ` message. Truncated and zeroed-header stores
    /// are refused by every command (exit 70, "the ledger store is damaged"); a garbage lock file is
    /// rebuilt and changes nothing; for overwritten pages, either `verify` reports the damage
    /// (65 or 70) or the ledger reads exactly as before.
    @Test func damagedStoreIsReportedAndNeverCrashes() throws {
        let pristine = TestLedger()
        defer { pristine.remove() }
        pristine.ok("init", "Smiths")
        pristine.ok("child", "add", "Ava")
        pristine.ok("child", "add", "Ben")
        for i in 0..<6 { pristine.ok("give", i % 2 == 0 ? "Ava" : "Ben", "1.25", "--note", "chore \(i)") }
        pristine.ok("take", "Ava", "0.50", "--note", "snack")
        let originalDigest = pristine.run("digest").stdout
        let originalHistory = pristine.run("history", "--limit", "0").stdout
        let size = Int((try FileManager.default.attributesOfItem(atPath: pristine.home + "/ledger/data.mdb")[.size] as? NSNumber)?.intValue ?? 0)
        try #require(size >= 8 * 4096 && size % 4096 == 0, "unexpected data.mdb size \(size)")

        let allowed: Set<Int32> = [0, 65, 70, 75, 77]
        var detected = 0, harmless = 0
        for damage in Self.damages(pages: size / 4096) {
            let copy = TestLedger()
            defer { copy.remove() }
            try FileManager.default.copyItem(atPath: pristine.home, toPath: copy.home)
            try damage.apply(copy.home + "/ledger/data.mdb", copy.home + "/ledger/lock.mdb")

            var results: [String: Ended] = [:]
            for command in [["verify"], ["digest"], ["balance"], ["history", "--limit", "0"], ["children", "--all"], ["give", "Ava", "0.01"]] {
                let ended = try Self.run(copy, command)
                results[command[0]] = ended
                #expect(ended.signal == nil, "\(damage): \(command[0]) died: \(ended)")
                #expect(allowed.contains(ended.code), "\(damage): \(command[0]) exited \(ended.code): \(ended)")
                if ended.code != 0 {
                    #expect(ended.stderr.hasPrefix("kidledger: ") && !ended.stderr.contains("Fatal error"), "\(damage): \(command[0]): \(ended)")
                }
            }
            let verify = results["verify"]!
            switch damage.kind {
            case .truncated, .header:
                for (command, ended) in results {
                    #expect(ended.code == 70 && ended.stderr.contains("the ledger store is damaged"), "\(damage): \(command): \(ended)")
                }
            case .lock:
                #expect(results.values.allSatisfy { $0.code == 0 }, "\(damage): \(results)")
                #expect(results["digest"]?.stdout == originalDigest)
            case .pages:
                if verify.code == 0 {
                    // Nothing verify can see: the bytes were unused (free space in a page, a freed page).
                    harmless += 1
                    #expect(results["digest"]?.stdout == originalDigest, "\(damage): verify passed but the digest changed")
                    #expect(results["history"]?.stdout == originalHistory, "\(damage): verify passed but the history changed")
                } else {
                    detected += 1
                    #expect(verify.code == 65 || verify.code == 70, "\(damage): \(verify)")
                }
            }
        }
        // The seeded overwrites hit live data often enough to be seen.
        #expect(detected > 0 && harmless > 0, "detected \(detected), harmless \(harmless)")
    }
}

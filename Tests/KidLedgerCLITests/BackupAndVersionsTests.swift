import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerReplica
@testable import KidLedgerDaemon

/// Issue 43, points 2 to 4, with real processes on 127.0.0.1: mixed protocol versions, backup
/// while a large sync runs, and a laptop restored from a backup that is behind its earlier self.
@Suite("Backups, restores and mixed versions", .serialized)
struct BackupAndVersionsTests {
    /// Runs `kidledger ARGS` on `ledger` with `extra` in its environment.
    static func run(_ ledger: TestLedger, _ arguments: [String], extra: [String: String] = [:]) throws -> ProcessOutcome {
        let binary = try #require(Binary.path)
        var environment = ["KIDLEDGER_HOME": ledger.home, "HOME": ledger.directory, "PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"]
        for (k, v) in extra { environment[k] = v }
        return try runProcess(binary, arguments, environment: environment, timeout: 120)
    }

    /// A household of Mom (owner, daemon running) and a joined member.
    static func pair(_ group: ProcessGroup, _ mom: TestLedger, _ dad: TestLedger, name: String = "Dad",
                     momEnvironment: [String: String] = [:]) throws -> DaemonProcess {
        try ok(mom, "init", "Smiths", "--name", "Mom")
        try ok(mom, "child", "add", "Ava")
        let daemon = try #require(try DaemonProcess.start(mom, in: group, extraEnvironment: momEnvironment))
        try ok(dad, "join", try inviteCode(mom), "--name", name)
        return daemon
    }

    /// Runs `body` on Mom's home (daemon running) and Dad's, joined and synced once.
    static func syncedPair(_ body: (_ mom: TestLedger, _ dad: TestLedger, _ daemon: DaemonProcess) throws -> Void) throws {
        let group = ProcessGroup()
        defer { group.stopAll() }
        let mom = TestLedger(), dad = TestLedger()
        defer { mom.remove(); dad.remove() }
        let daemon = try pair(group, mom, dad)
        try ok(dad, "sync", daemon.address)
        try body(mom, dad, daemon)
    }

    /// Dad's replica, opened in this process (what `status` reads), and Mom's member key.
    static func open(_ dad: TestLedger) throws -> (replica: Replica, mom: [UInt8]) {
        let ctx = Context(home: dad.home, json: false, console: BufferConsole(), clock: SystemClock())
        let replica = try ctx.openReplica()
        let mom = try #require(try replica.members().first { $0.isOwner }).key
        return (replica, mom)
    }

    // The sessions of two real releases (0.1.0 from git and this one) are run by
    // Scripts/mixed-versions.sh; a release without a common version does not exist yet, so its
    // refusal is injected here as the sessions report it (``SyncSession/failure``, the error text
    // ``VersionRefusal`` writes), and the session rules by ``OlderPeerTests``.
    @Test("a newer laptop's refusal: the older one is attentionRequired in plain words until a sync with that laptop works",
          .timeLimit(.minutes(3)))
    func refusedByANewerLaptop() throws {
        try Self.syncedPair { mom, dad, daemon in
            do {
                let (replica, momKey) = try Self.open(dad)
                let text = VersionRefusal.text(product: "9.0.0", mine: 6...7, peer: protocolVersionMin...protocolVersionMax)
                let gap = try #require(VersionGap(.peer(code: 3, message: text), mine: protocolVersionMin...protocolVersionMax, product: KidLedgerVersion.current))
                #expect(gap.peerIsNewer && gap.peerProduct == "9.0.0")
                let message = gap.message(laptop: VersionGap.laptop(replica, key: momKey, address: daemon.address))
                #expect(message.hasPrefix("Mom's laptop runs kidledger 9.0.0, newer than this laptop's kidledger \(KidLedgerVersion.current): update kidledger on this laptop to sync with it"))
                VersionGap.record(gap, message: message, peerKey: momKey, succeeded: false, in: replica)
                // The older side's own refusal of a newer hello names the versions as the newer side reads them.
                let theirs = try #require(VersionGap(.versionMismatch(peerMin: 6, peerMax: 7), mine: protocolVersionMin...protocolVersionMax, product: KidLedgerVersion.current))
                #expect(theirs.peerIsNewer && theirs.peerProduct == nil)
            }
            let status = try json(dad, "status")
            #expect(status["state"] as? String == "attentionRequired")
            #expect((status["updateRequired"] as? String)?.contains("Mom's laptop runs kidledger 9.0.0") == true, "\(status)")
            #expect(try ok(dad, "status").contains("update required: Mom's laptop runs kidledger 9.0.0"))
            try ok(dad, "give", "Ava", "0.5")  // changes go on
            // A sync with Mom's laptop that works clears it.
            try ok(dad, "sync", daemon.address)
            let after = try json(dad, "status")
            #expect(after["state"] as? String != "attentionRequired" && after["updateRequired"] is NSNull, "\(after)")
            #expect(try digest(mom) == digest(dad))
        }
    }

    @Test("what a session held back from an older laptop shows on status, peers and in --json, and clears once it gets everything",
          .timeLimit(.minutes(3)))
    func heldBackFromAnOlderLaptop() throws {
        try Self.syncedPair { mom, dad, daemon in
            try ok(dad, "peer", "add", daemon.address)
            do {
                let (replica, momKey) = try Self.open(dad)
                var summary = SessionSummary()
                summary.protocolVersion = 3
                summary.changesWithheld = 3
                VersionGap.recordWithheld(summary, of: momKey, in: replica)
            }
            let expected = "Mom's laptop runs kidledger 0.1.0: update it to get 3 changes it can't read yet"
            #expect(try ok(dad, "status").contains("update needed: " + expected))
            #expect(try ok(dad, "peers").contains(expected))
            let status = try json(dad, "status")
            let older = try #require((status["olderLaptops"] as? [[String: Any]])?.first)
            #expect(older["changesWithheld"] as? Int == 3 && older["kidledger"] as? String == "0.1.0" && older["protocolVersion"] as? Int == 3, "\(older)")
            #expect(((status["peers"] as? [[String: Any]])?.first?["updateNeeded"] as? String)?.hasPrefix(expected) == true)
            // A session at this release's version holds nothing back: the note goes.
            try ok(dad, "sync", daemon.address)
            #expect(try !ok(dad, "status").contains("update needed"))
            #expect((try json(dad, "status")["olderLaptops"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("backups taken while a large sync runs each restore to a verified ledger; the last equals the synced one",
          .timeLimit(.minutes(8)))
    func backupDuringSync() throws {
        let group = ProcessGroup()
        defer { group.stopAll() }
        let mom = TestLedger(), dad = TestLedger()
        defer { mom.remove(); dad.remove() }
        let daemon = try Self.pair(group, mom, dad)
        // Dad's laptop holds 30,000 transactions Mom's has not seen.
        let ava = try #require(try json(dad, "children")["children"] as? [[String: Any]]).first?["id"] as? String ?? "?"
        var csv = "id,createdAt,child,childId,amountCents,amount,note,source,reverses\n"
        for i in 0..<30_000 {
            csv += "\(UUID().uuidString.lowercased()),2026-12-01T10:00:00.000Z,Ava,\(ava),\(i % 9 + 1),,,give,\n"
        }
        try csv.write(toFile: dad.file("many.csv"), atomically: true, encoding: .utf8)
        try ok(dad, "import", "--csv", dad.file("many.csv"))
        let sync = group.add(try BackgroundProcess(dad, ["sync", daemon.address]))
        var taken = 0
        for i in 0..<20 {
            let path = mom.file("during-\(i).klbackup")
            let outcome = try Self.run(mom, ["backup", path])
            #expect(outcome.code == 0, "\(outcome)")
            taken += 1
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            if sync.hasExited { break }
        }
        #expect(sync.wait(timeout: 300) && sync.exitCode == 0, "\(sync.stderr)")
        try ok(mom, "backup", mom.file("after.klbackup"))
        for name in (0..<taken).map({ "during-\($0)" }) + ["after"] {
            let restored = TestLedger()
            defer { restored.remove() }
            try ok(restored, "restore", mom.file(name + ".klbackup"))
            try expectVerified(restored, name)
            if name == "after" { #expect(try digest(restored) == digest(mom)) }
        }
        #expect(try digest(mom) == digest(dad))
    }

    @Test("a laptop restored from an old backup on a new disk reuses no (replica, sequence), catches up from both others and syncs on",
          .timeLimit(.minutes(5)))
    func restoreOnNewLaptop() throws {
        let group = ProcessGroup()
        defer { group.stopAll() }
        let mom = TestLedger(), dad = TestLedger(), gran = TestLedger(), newDisk = TestLedger()
        defer { mom.remove(); dad.remove(); gran.remove(); newDisk.remove() }
        let momDaemon = try Self.pair(group, mom, dad)
        try ok(gran, "join", try inviteCode(mom), "--name", "Gran")
        try ok(dad, "give", "Ava", "1", "--note", "before the backup")
        try ok(dad, "sync", momDaemon.address)
        let backup = dad.file("dad.klbackup")
        try ok(dad, "backup", backup)
        // After the backup Dad's laptop goes on, and its changes reach Mom's laptop only.
        try ok(dad, "give", "Ava", "2", "--note", "after the backup")
        try ok(dad, "child", "add", "Ben")
        try ok(dad, "sync", momDaemon.address)
        let oldReplica = try json(dad, "digest")["replicaId"] as? String
        // Dad's disk dies. A new one, restored from the backup.
        let busy = try Self.run(mom, ["restore", backup])
        #expect(busy.code == 75 && busy.stderr.contains("the daemon runs for this home"), "\(busy)")
        let refusal = try Self.run(gran, ["restore", backup])
        #expect(refusal.code == 65 && refusal.stderr.contains("already holds a ledger or keys"), "\(refusal)")
        let restored = try json(newDisk, "restore", backup)
        let newReplica = restored["replicaId"] as? String
        #expect(newReplica != nil && newReplica != oldReplica && restored["previousReplicaId"] as? String == oldReplica, "\(restored)")
        #expect(try childTable(newDisk)["Ben"] == nil, "the backup is from before Ben")
        #expect(try ok(newDisk, "members").contains("Dad"))
        // A change before catching up: under the fresh id, it can't collide with the lost ones.
        try ok(newDisk, "give", "Ava", "0.25", "--note", "restored, not caught up")
        let granDaemon = try #require(try DaemonProcess.start(gran, in: group))
        try ok(newDisk, "sync", momDaemon.address)
        try ok(newDisk, "sync", granDaemon.address)
        try ok(gran, "sync", momDaemon.address)
        #expect(try childTable(newDisk)["Ben"] != nil, "caught up with what its earlier self made after the backup")
        let digests = try [digest(mom), digest(gran), digest(newDisk)]
        #expect(Set(digests).count == 1, "\(digests)")
        for home in [mom, gran, newDisk] {
            try expectVerified(home, home.home)
            #expect(try childTable(home)["Ava"]?[0] == 325)
            let conflicts = try json(home, "conflicts")
            #expect(conflicts["transactionConflicts"] as? NSNumber == 0 && (conflicts["sameIdConflicts"] as? [Any])?.isEmpty == true, "\(conflicts)")
        }
        // The restored laptop's keys work: it writes on and the others take it.
        try ok(newDisk, "give", "Ava", "1")
        try ok(newDisk, "sync", momDaemon.address)
        #expect(try digest(mom) == digest(newDisk))
    }
}

/// `backup schedule`: the setting, and the daemon writing and rotating the files.
@Suite("Scheduled backups", .serialized)
struct ScheduledBackupTests {
    @Test("one setting; the daemon writes a backup into the folder and keeps the newest N of its own files", .timeLimit(.minutes(3)))
    func daemonWritesAndRotates() throws {
        let group = ProcessGroup()
        defer { group.stopAll() }
        let mom = TestLedger()
        defer { mom.remove() }
        try ok(mom, "init", "Smiths")
        let folder = mom.file("backups")
        #expect(try ok(mom, "backup", "schedule").contains("Scheduled backups: off"))
        #expect(try ok(mom, "backup", "schedule", folder, "--keep", "2").contains("every day and keeps the newest 2"))
        // Older files of the schedule, and one that is not its own.
        for name in ["kidledger-backup-20200101-000000.klbackup", "kidledger-backup-20200102-000000.klbackup", "notes.txt"] {
            try "old".write(toFile: folder + "/" + name, atomically: true, encoding: .utf8)
        }
        let bad = try BackupAndVersionsTests.run(mom, ["backup", "schedule", "relative/folder"])
        #expect(bad.code == 64, "\(bad)")
        let daemon = try #require(try DaemonProcess.start(mom, in: group))
        let files = { (try? FileManager.default.contentsOfDirectory(atPath: folder).sorted()) ?? [] }
        #expect(eventually(timeout: 30, interval: 0.2) { files().count == 3 && !files().contains("kidledger-backup-20200101-000000.klbackup") }, "\(files()) \(daemon.log)")
        #expect(files().contains("notes.txt") && files().contains("kidledger-backup-20200102-000000.klbackup"))
        #expect(daemon.log.contains("scheduled backup written: \(folder)/kidledger-backup-"))
        let written = try #require(files().first { $0.hasPrefix("kidledger-backup-") && $0 != "kidledger-backup-20200102-000000.klbackup" })
        let restored = TestLedger()
        defer { restored.remove() }
        try ok(restored, "restore", folder + "/" + written)
        #expect(try digest(restored) == digest(mom))
        let shown = try json(mom, "backup", "schedule")
        #expect(shown["folder"] as? String == folder && shown["keep"] as? NSNumber == 2 && shown["lastError"] is NSNull, "\(shown)")
        #expect(try ok(mom, "backup", "schedule", "--off").contains("off"))
    }
}

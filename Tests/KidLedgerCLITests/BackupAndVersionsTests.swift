import Foundation
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain

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

    @Test("laptops without a common protocol version say which to update; nothing is half-applied; after the update they sync",
          .timeLimit(.minutes(5)))
    func mixedVersions() throws {
        let group = ProcessGroup()
        defer { group.stopAll() }
        let mom = TestLedger(), dad = TestLedger()
        defer { mom.remove(); dad.remove() }
        var momDaemon: DaemonProcess? = try Self.pair(group, mom, dad)
        try ok(dad, "sync", try #require(momDaemon).address)  // Dad's laptop dials in (it runs no daemon yet)
        try ok(dad, "give", "Ava", "1")
        try ok(mom, "give", "Ava", "2")
        let (momBefore, dadBefore) = (try digest(mom), try digest(dad))
        _ = momDaemon?.stop()
        // Mom's laptop updated to a kidledger that no longer speaks Dad's protocol.
        let newer = [VersionGap.versionsVariable: "4-5", VersionGap.productVariable: "9.0.0"]
        momDaemon = try DaemonProcess.start(mom, in: group, extraEnvironment: newer)
        let address = try #require(momDaemon).address
        let refused = try Self.run(dad, ["sync", address])
        #expect(refused.code == 69, "\(refused)")
        #expect(refused.stderr.contains("Mom's laptop runs kidledger 9.0.0, newer than this laptop's kidledger \(KidLedgerVersion.current): update kidledger on this laptop to sync with it"),
                "\(refused)")
        let status = try json(dad, "status")
        #expect(status["state"] as? String == "attentionRequired")
        #expect((status["updateRequired"] as? String)?.contains("Mom's laptop runs kidledger 9.0.0") == true, "\(status)")
        #expect(try ok(dad, "status").contains("update required: Mom's laptop runs kidledger 9.0.0"))
        // Changes go on on the older laptop; nothing crossed either way.
        try ok(dad, "give", "Ava", "0.5")
        #expect(try digest(mom) == momBefore)
        #expect(try digest(dad) != dadBefore)
        // The newer side names the older laptop, in its log and on its peer.
        let newerDaemon = try #require(momDaemon)
        #expect(eventually(10) { newerDaemon.log.contains("Dad's laptop runs kidledger 0.2.0 or earlier: update it to sync") }, "\(newerDaemon.log)")
        // Dad's laptop only dials in: Mom's `peers` says why its last session was refused.
        #expect(try Self.run(mom, ["peers"]).stdout.contains("its last session was refused: Dad's laptop runs kidledger 0.2.0 or earlier: update it to sync"))
        let dadDaemon = try #require(try DaemonProcess.start(dad, in: group))
        try ok(mom, "peer", "add", dadDaemon.address)
        let fromNewer = try Self.run(mom, ["sync", dadDaemon.address], extra: newer)
        #expect(fromNewer.code == 69 && fromNewer.stderr.contains("Dad's laptop runs kidledger \(KidLedgerVersion.current): update it to sync"), "\(fromNewer)")
        let peers = try Self.run(mom, ["peers"], extra: newer)
        #expect(peers.stdout.contains("Dad's laptop runs kidledger \(KidLedgerVersion.current): update it to sync"), "\(peers)")
        #expect(try digest(mom) == momBefore)
        _ = dadDaemon.stop()

        // Mom's kidledger speaks the previous version too (the compatibility rule): the highest
        // common one is used, they sync, and Dad's attention clears.
        _ = momDaemon?.stop()
        momDaemon = try DaemonProcess.start(mom, in: group, extraEnvironment: [VersionGap.versionsVariable: "3-5"])
        try ok(dad, "sync", try #require(momDaemon).address)
        #expect(try digest(mom) == digest(dad))
        let after = try json(dad, "status")
        #expect(after["state"] as? String != "attentionRequired" && after["updateRequired"] is NSNull, "\(after)")
        #expect(try childTable(mom)["Ava"]?[0] == 350)
        let peersAfter = try Self.run(mom, ["peers"]).stdout
        #expect(!peersAfter.contains("its last session was refused"), "a session that works clears the note: \(peersAfter)")
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
        #expect(eventually(30) { files().count == 3 && !files().contains("kidledger-backup-20200101-000000.klbackup") }, "\(files()) \(daemon.log)")
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

import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerReplica
import KidLedgerDomain
import KidLedgerLMDB

/// Issue 43, point 1 and 4: every released store opens in this version. Each fixture under
/// Tests/Fixtures/homes was made by the release that wrote it (`Scripts/make-fixture.sh`); these
/// tests open it with the current code, check it against the state its fixture.json recorded,
/// and sync it with a new home. A schema change adds a fixture (made by the release before it) to
/// ``Fixture/all``.
@Suite("Migrating released stores", .serialized)
struct MigrationFixtureTests {
    /// One fixture: its folder and what fixture.json says.
    struct Fixture: CustomTestStringConvertible, Sendable {
        static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/homes").path
        /// Every fixture, oldest first.
        static let all = ["schema3", "schema4"]

        let name: String
        var folder: String { Self.root + "/" + name }
        var testDescription: String { name }

        var document: [String: Any] {
            get throws {
                let data = try Data(contentsOf: URL(fileURLWithPath: folder + "/fixture.json"))
                return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            }
        }

        /// Copies one of its homes ("mom" or "dad") to `home`: the key files get mode 0600 again
        /// (git keeps no modes but the executable bit).
        func copy(_ who: String, to home: String) throws {
            let fm = FileManager.default
            try fm.createDirectory(atPath: (home as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try fm.copyItem(atPath: folder + "/" + who, toPath: home)
            for key in try fm.contentsOfDirectory(atPath: home + "/identities") {
                try fm.setAttributes([.posixPermissions: 0o600], ofItemAtPath: home + "/identities/" + key)
            }
            try fm.setAttributes([.posixPermissions: 0o700], ofItemAtPath: home + "/identities")
        }
    }

    /// The schema version (and writer) of the store in `home`, read in a short-lived environment.
    static func storedSchema(_ home: String) throws -> (version: UInt64, writer: String?)? {
        let environment = try LMDBEnvironment(directory: home + "/ledger", tables: Tables.all, mustExist: true)
        defer { environment.close() }
        return try Replica.storedSchema(environment)
    }

    /// `children --all --json` as the fixture records children.
    static func children(_ doc: [String: Any]) -> [[String: String]] {
        let list = doc["children"] as? [[String: Any]] ?? []
        return list.map { c in
            ["id": c["id"] as? String ?? "?", "name": c["name"] as? String ?? "?",
             "balanceCents": "\((c["balanceCents"] as? NSNumber)?.int64Value ?? -1)",
             "mergedInto": c["mergedInto"] as? String ?? "-"]
        }.sorted { $0["id"]! < $1["id"]! }
    }

    @Test("a released home opens, migrates once, and shows what its release recorded", arguments: Fixture.all.map(Fixture.init))
    func opensAndMigrates(fixture: Fixture) throws {
        let recorded = try fixture.document
        let directory = TemporaryDirectory(prefix: "kidledger-fixture").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let l = TestLedger(directory: directory, home: directory + "/mom")
        try fixture.copy("mom", to: l.home)
        let version = try #require((recorded["schemaVersion"] as? NSNumber)?.uint64Value)
        #expect(try Self.storedSchema(l.home)?.version == version)
        // The clock of the fixture's making: no allowance period falls due meanwhile.
        l.setClock(try #require((recorded["madeAtMillis"] as? NSNumber)?.int64Value) + 60_000)

        let children = try #require(parseJSON(l.ok("--json", "children", "--all")) as? [String: Any])
        #expect(Self.children(children) == Self.children(recorded), "\(children)")
        // The migration happened once, after a copy of the old store was saved beside it.
        #expect(try Self.storedSchema(l.home)?.version == Replica.schemaVersion)
        #expect(try Self.storedSchema(l.home)?.writer == KidLedgerVersion.current)
        let saved = try FileManager.default.contentsOfDirectory(atPath: MigrationBackups.folder(home: l.home))
        #expect(saved.count == 1 && saved[0].hasPrefix("schema-\(version)-"), "\(saved)")
        try FileManager.default.createDirectory(atPath: directory + "/saved", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: MigrationBackups.folder(home: l.home) + "/" + saved[0], toPath: directory + "/saved/data.mdb")
        let old = try LMDBEnvironment(directory: directory + "/saved", tables: Tables.all, mustExist: true)
        #expect(try Replica.storedSchema(old)?.version == version, "the saved copy is the store as it was")
        old.close()

        #expect(l.ok("digest").trimmingCharacters(in: .whitespacesAndNewlines) == recorded["digest"] as? String)
        #expect(l.ok("verify").hasPrefix("ok: \(recorded["transactionCount"] as? NSNumber ?? -1) transactions"))
        let members = try #require(parseJSON(l.ok("--json", "members")) as? [String: Any])["members"] as? [[String: Any]] ?? []
        let names = members.map { [$0["name"] as? String ?? "?", ($0["owner"] as? Bool ?? false) ? "owner" : "member"] }.sorted { $0[0] < $1[0] }
        let recordedMembers = (recorded["members"] as? [[Any]] ?? []).map { [$0[0] as? String ?? "?", ($0[1] as? Bool ?? false) ? "owner" : "member"] }
        #expect(names == recordedMembers)
        let schedules = try #require(parseJSON(l.ok("--json", "allowance", "list")) as? [String: Any])["schedules"] as? [[String: Any]] ?? []
        let recordedSchedules = recorded["allowances"] as? [[String: Any]] ?? []
        #expect(schedules.map { "\($0["childName"] ?? "") \($0["amountCents"] ?? "") \($0["every"] ?? "") \($0["on"] ?? "")" }
                == recordedSchedules.map { "\($0["childName"] ?? "") \($0["amountCents"] ?? "") \($0["every"] ?? "") \($0["on"] ?? "")" })
        // Opening again migrates nothing and saves no second copy.
        l.ok("balance")
        #expect(try FileManager.default.contentsOfDirectory(atPath: MigrationBackups.folder(home: l.home)).count == 1)
        // Changes go on: the owner gives, undoes, merges no more than it did.
        #expect(l.ok("give", "Max", "1").hasPrefix("Gave $1.00 to Max. Balance: $4.25"))
        #expect(l.ok("undo").hasPrefix("Undid +$1.00 for Max"))
    }

    @Test("a ledger written by a newer kidledger is refused, naming it, and left alone")
    func newerStoreRefused() throws {
        try withLedger { l in
            l.ok("init", "Home")
            let environment = try LMDBEnvironment(directory: l.home + "/ledger", tables: Tables.all, mustExist: true)
            try environment.write { w in
                try w.put(Tables.meta, Keys.schema, Bytes.u64(99))
                try w.put(Tables.meta, Keys.writer, Array("9.0.0".utf8))
            }
            environment.close()
            let refused = l.run("balance")
            #expect(refused.code == 70)
            #expect(refused.stderr == "kidledger: the ledger was written by kidledger 9.0.0 (schema version 99); this is kidledger \(KidLedgerVersion.current), which reads up to schema version \(Replica.schemaVersion): update kidledger to open it. Nothing was changed\n")
            #expect(try Self.storedSchema(l.home)?.version == 99)
            #expect(!FileManager.default.fileExists(atPath: MigrationBackups.folder(home: l.home)))
        }
    }

    @Test("a released pair syncs after the update, and a new laptop joins it", .timeLimit(.minutes(5)), arguments: Fixture.all.map(Fixture.init))
    func syncsWithNewHome(fixture: Fixture) throws {
        let recorded = try fixture.document
        let group = ProcessGroup()
        defer { group.stopAll() }
        let mom = TestLedger(), dad = TestLedger(), newcomer = TestLedger()
        defer { mom.remove(); dad.remove(); newcomer.remove() }
        try FileManager.default.removeItem(atPath: mom.directory)
        try FileManager.default.removeItem(atPath: dad.directory)
        try fixture.copy("mom", to: mom.home)
        try fixture.copy("dad", to: dad.home)
        let daemon = try #require(try DaemonProcess.start(mom, in: group))
        // Dad's laptop (its store migrated by this sync's open) syncs with Mom's.
        try ok(dad, "sync", daemon.address)
        let code = try inviteCode(mom)
        try ok(newcomer, "join", code, "--name", "Gran")
        try ok(dad, "sync", daemon.address)
        let digests = try [digest(mom), digest(dad), digest(newcomer)]
        #expect(Set(digests).count == 1, "\(digests)")
        var balances: [String: Int64] = [:]
        for c in recorded["children"] as? [[String: Any]] ?? [] {
            balances[c["name"] as? String ?? "?"] = (c["balanceCents"] as? NSNumber)?.int64Value
        }
        let allowance = try #require((recorded["allowances"] as? [[String: Any]])?.first)
        let period = try #require((allowance["amountCents"] as? NSNumber)?.int64Value)
        let recordedNames = Set((recorded["members"] as? [[Any]] ?? []).compactMap { $0.first as? String })
        for home in [mom, dad, newcomer] {
            try expectVerified(home, home.home)
            let table = try childTable(home)
            // Max and max stay merged (max's own entries counted in Max).
            #expect(table["Max"]?[0] == balances["Max"] && table["max"]?[0] == balances["max"], "\(table)")
            // Ava: the recorded balance, plus any allowance periods that fell due since.
            let ava = try #require(table["Ava"]?[0]), recordedAva = try #require(balances["Ava"])
            #expect(ava >= recordedAva && (ava - recordedAva) % period == 0, "\(table)")
            let members = try json(home, "members")["members"] as? [[String: Any]] ?? []
            #expect(Set(members.compactMap { $0["name"] as? String }) == recordedNames.union(["Gran"]))
            let schedules = try json(home, "allowance", "list")["schedules"] as? [[String: Any]] ?? []
            #expect(schedules.map { $0["childName"] as? String } == [allowance["childName"] as? String])
        }
    }

    @Test("a migration killed at random points leaves the old store or the migrated one; the next open equals an uninterrupted migration",
          .timeLimit(.minutes(8)))
    func killedMigration() throws {
        let directory = TemporaryDirectory(prefix: "kidledger-migration-kill").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A bigger store of the old layout: the fixture with 20,000 more transactions, written by
        // this version and set back to schema 3 (the 3 -> 4 step changes no layout: it adds
        // meta/writer and rebuilds the derived tables).
        let l = TestLedger(directory: directory, home: directory + "/template")
        try Fixture(name: "schema3").copy("mom", to: l.home)
        l.setClock(1_796_611_575_510 + 60_000)
        var csv = "id,createdAt,child,childId,amountCents,amount,note,source,reverses\n"
        for i in 0..<20_000 {
            csv += "\(UUID().uuidString.lowercased()),2026-12-07T01:00:00.000Z,Ava,cba33839-bbcd-45d7-976d-d8a3459d6eb1,\(i % 7 + 1),,,give,\n"
        }
        try csv.write(toFile: directory + "/many.csv", atomically: true, encoding: .utf8)
        l.ok("import", "--csv", directory + "/many.csv")
        let environment = try LMDBEnvironment(directory: l.home + "/ledger", tables: Tables.all, mustExist: true)
        try environment.write { w in
            try w.put(Tables.meta, Keys.schema, Bytes.u64(3))
            try w.delete(Tables.meta, Keys.writer)
        }
        environment.close()
        let fm = FileManager.default
        func fresh(_ name: String) throws -> TestLedger {
            let home = directory + "/" + name
            try fm.copyItem(atPath: l.home, toPath: home)
            return TestLedger(directory: directory, home: home)
        }
        // The uninterrupted migration, and how long a process takes for it (`digest` does
        // little more than open the store, which saves a copy and migrates).
        let reference = try fresh("reference")
        let started = Date()
        let expected = try digest(reference)
        let elapsed = Date().timeIntervalSince(started)
        try expectVerified(reference, "the uninterrupted migration")

        // Each trial: a fresh copy of the old store, a process opening it killed (SIGKILL, by its
        // pid) after a random delay within the uninterrupted run's time, then the store opened again.
        var generator = SystemRandomNumberGenerator()
        var kills = 0, oldSeen = 0, newSeen = 0
        for trial in 0..<10 {
            let victim = try fresh("victim-\(trial)")
            let p = try BackgroundProcess(victim, ["digest"])
            usleep(useconds_t(Double.random(in: 0...elapsed, using: &generator) * 1_000_000))
            if !p.hasExited { kills += 1 }
            p.send(SIGKILL)
            #expect(p.wait(timeout: 30))
            // Either the old store, whole, or the migrated one.
            let schema = try #require(try Self.storedSchema(victim.home))
            if schema.version == 3 { oldSeen += 1 } else { newSeen += 1 }
            #expect(schema.version == 3 && schema.writer == nil || schema.version == Replica.schemaVersion && schema.writer == KidLedgerVersion.current,
                    "\(schema)")
            // The next open finishes it; the result equals the uninterrupted migration.
            #expect(try digest(victim) == expected)
            #expect(try Self.storedSchema(victim.home)?.version == Replica.schemaVersion)
            // A migration copy under its final name is a whole store of the old version (a killed
            // copy leaves only a `.partial-` file, which the next copy's name never collides with).
            for name in try fm.contentsOfDirectory(atPath: MigrationBackups.folder(home: victim.home)) where name.hasPrefix("schema-") {
                let check = directory + "/check-\(trial)-" + name
                try fm.createDirectory(atPath: check, withIntermediateDirectories: true)
                try fm.copyItem(atPath: MigrationBackups.folder(home: victim.home) + "/" + name, toPath: check + "/data.mdb")
                let env = try LMDBEnvironment(directory: check, tables: Tables.all, mustExist: true)
                #expect(try Replica.storedSchema(env)?.version == 3)
                env.close()
            }
            #expect(try fm.contentsOfDirectory(atPath: MigrationBackups.folder(home: victim.home)).allSatisfy { !$0.hasPrefix(".partial-") })
            if trial == 9 { try expectVerified(victim, "a store whose migration was killed") }
            try fm.removeItem(atPath: victim.home)
        }
        print("killed migration: \(kills) kills while running, \(oldSeen) left the old store, \(newSeen) the migrated one")
    }
}

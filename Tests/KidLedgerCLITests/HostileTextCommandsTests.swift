import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
import KidLedgerLMDB
@testable import KidLedgerReplica
@testable import KidLedgerDaemon

/// Issue 39, point 4: every command that prints text someone else wrote (names, notes, a
/// transaction's source, a peer's error, an address learned from the network) prints it through
/// `TextEscaping.terminal`: a new line, an escape sequence and a right-to-left override in it
/// are shown as `\n`, `\u{1b}` and `\u{202e}`, never act on the terminal and never start a line
/// of their own. Each command really runs, on a ledger holding such text everywhere.
@Suite("Others' text in every text command")
struct HostileTextCommandsTests {
    /// A name as a store written before names were checked may hold one (a name from a peer with
    /// a control character is refused now: `PeerNameRuleTests`): a new line with a fake line
    /// ("Z9…") after it, an escape sequence and a right-to-left override. Short enough that a
    /// table shows it whole once escaped (23 columns; tables cut names at 24).
    static func name(_ n: Int) -> String { "Z\nZ9\u{1B}[1m\u{202E}\(n)" }
    /// A note (notes may hold any character): a fake line "INJECTED", an escape sequence, a
    /// carriage return and a right-to-left override.
    static let note = "red\u{1B}[31m\r\nINJECTED\u{202E}cba"
    /// The escapes a command printing one of them shows.
    static let shownEscapes = ["\\u{1b}", "\\u{202e}"]

    /// Every character of `text` that would act on a terminal (its own new lines aside).
    static func unsafe(_ text: String) -> [Unicode.Scalar] {
        text.unicodeScalars.filter { $0 != "\n" && TextEscaping.isUnsafeForTerminal($0) }
    }

    /// Checks one command's output: nothing unsafe, no injected line, and (`shows`) the escapes.
    static func check(_ command: [String], _ outcome: Outcome, shows: Bool = true, bidiOnly: Bool = false,
                      sourceLocation: SourceLocation = #_sourceLocation) {
        let all = outcome.stdout + outcome.stderr
        let label = command.joined(separator: " ")
        #expect(unsafe(all).isEmpty, "\(label): raw control or bidi characters: \(all.debugDescription)", sourceLocation: sourceLocation)
        let injected = all.split(separator: "\n").filter { $0.hasPrefix("Z9") || $0.hasPrefix("INJECTED") || $0.hasPrefix("status: synced") }
        #expect(injected.isEmpty, "\(label): text started a line of its own: \(all)", sourceLocation: sourceLocation)
        guard shows else { return }
        for escape in bidiOnly ? ["\\u{202e}"] : shownEscapes {
            #expect(all.contains(escape), "\(label): \(escape) not shown: \(all)", sourceLocation: sourceLocation)
        }
        if !bidiOnly {
            #expect(all.contains("\\nZ9") || all.contains("\\r\\nINJECTED"), "\(label): the new line not shown escaped: \(all)",
                    sourceLocation: sourceLocation)
        }
    }

    /// The ids of the fixture's children, by the name they were added with.
    struct Fixture {
        let ledger: TestLedger
        let ids: [String: String]
        let giveID: String
    }

    /// A household "Smiths" with Ava, Ben and Cy, a give to Ava and a give-all with the hostile
    /// note, Ava's weekly allowance with it, a peer whose last error holds it and a peer at an
    /// address learned from the network that holds it; then, through a change of the kind a
    /// peer sends, Ava's allowance note, name and the household's name rewritten (conflicting
    /// with the writes before: `conflicts` lists them), a transaction whose source holds control
    /// characters; and last, every child, household and member name rewritten in the store to
    /// ``name(_:)``.
    static func fixture() throws -> Fixture {
        let l = TestLedger()
        l.ok("init", "Smiths")
        for child in ["Ava", "Ben", "Cy"] { l.ok("child", "add", child) }
        l.ok("give", "Ava", "5", "--note", note)
        l.ok("give-all", "1", "--note", note)
        l.ok("allowance", "set", "Ava", "1", "--every", "week", "--note", note)
        l.ok("peer", "add", "127.0.0.1:1")
        let children = try #require(checkJSON(l, "children") as? [String: Any])
        var ids: [String: String] = [:]
        for c in children["children"] as? [[String: Any]] ?? [] { ids[c["name"] as? String ?? ""] = c["id"] as? String }
        let history = try #require(checkJSON(l, "history", "Ava") as? [String: Any])
        let giveID = try #require(((history["transactions"] as? [[String: Any]])?.last?["transaction"] as? [String: Any])?["id"] as? String)
        try withReplica(l) { replica in
            let avaText = try #require(ids["Ava"])
            let ava = try #require(RecordID(string: avaText))
            let household = try #require(try replica.household()).id
            try replica.applyOwnChange([
                .setField(entity: ava, field: .childName, value: .text("Ava\u{202E}avA")),
                .setField(entity: household, field: .householdName, value: .text("Smiths\u{202E}")),
                .setField(entity: ava, field: .allowanceNote, value: .text(note)),
                .addTransaction(LedgerTransaction(id: RecordID(high: 0x5EED, low: 1), childID: ava, amountCents: 7,
                                                  createdAtMillis: TestLedger.startMillis, note: note, source: "gift\n\u{1B}[1m\u{202E}")),
            ])
            try replica.device.updatePeer("127.0.0.1:1") { p in
                p.lastAttemptMillis = 1_795_000_000_000
                p.lastError = "peer reported: " + note
            }
            _ = try replica.device.addPeer("evil\n\u{1B}[2J\u{202E}:4717")
            try replica.plantNames { n in name(n) }
        }
        return Fixture(ledger: l, ids: ids, giveID: giveID)
    }

    static func withReplica(_ l: TestLedger, _ body: (Replica) throws -> Void) throws {
        let replica = try Context(home: l.home, json: false, console: BufferConsole(), clock: SystemClock()).openReplicaForChanges()
        defer { (replica.store as? LMDBEnvironment)?.close() }
        try body(replica)
    }

    /// The commands that only read: each prints some of the fixture's hostile text.
    @Test func readingCommands() throws {
        let f = try Self.fixture()
        defer { f.ledger.remove() }
        let l = f.ledger
        let ava = try #require(f.ids["Ava"]).prefix(8), ben = try #require(f.ids["Ben"]).prefix(8)
        let csv = l.file("import.csv")
        try "createdAt,child,amountCents,note\n2026-11-20,New\u{202E}kid,5,x\n".write(toFile: csv, atomically: true, encoding: .utf8)
        let badCSV = l.file("bad.csv")
        try "createdAt,child,amountCents\n\"two\nZ9\u{1B}[2J\u{202E}\",Ava,2\n".write(toFile: badCSV, atomically: true, encoding: .utf8)
        let commands: [(arguments: [String], code: Int32, shows: Bool, bidiOnly: Bool)] = [
            (["children"], 0, true, false),
            (["children", "--all"], 0, true, false),
            (["balance"], 0, true, false),
            (["balance", String(ava)], 0, true, false),
            (["history"], 0, true, false),
            (["history", String(ben)], 0, true, false),
            (["conflicts"], 0, true, false),
            (["conflicts", String(ava)], 0, true, false),
            (["status"], 0, true, false),
            (["peers"], 0, true, false),
            (["members"], 0, true, false),
            (["undo", "--dry-run"], 0, true, false),                 // the newest: the give-all, its author and children
            (["undo", f.giveID, "--dry-run"], 0, true, false),       // one child's entry
            (["allowance", "list"], 0, true, false),
            (["import", "--csv", csv, "--dry-run"], 0, true, true),  // a new child's name from a file
            (["import", "--csv", badCSV, "--dry-run"], 65, true, false),
            (["give", "Zed", "1"], 65, false, false),                // "did you mean" a hostile name
            (["verify"], 65, false, false),                          // the planted names are found out
            (["account", "show"], 0, false, false),                  // the owner: "owner", no name
            (["account", "list"], 0, false, false),
        ]
        for c in commands {
            let outcome = l.run(c.arguments)
            #expect(outcome.code == c.code, "\(c.arguments): \(outcome)")
            Self.check(c.arguments, outcome, shows: c.shows, bidiOnly: c.bidiOnly)
        }
        // The sources of these lines, one by one (the check above passes if any one shows).
        #expect(l.ok("history").contains("gift\\n\\u{1b}[1m\\u{202e}"))
        #expect(l.ok("conflicts").contains("allowanceNote \"red\\u{1b}[31m\\r\\nINJECTED\\u{202e}cba\""))
        #expect(l.ok("conflicts").contains("Z\\nZ9\\u{1b}[1m\\u{202e}"))
        #expect(l.ok("peers").contains("evil\\n\\u{1b}[2J\\u{202e}:4717"))
        #expect(l.ok("peers").contains("peer reported: red\\u{1b}[31m\\r\\nINJECTED"))
        #expect(l.ok("members").contains("Z\\nZ9\\u{1b}[1m\\u{202e}"))
        #expect(l.ok("undo", "--dry-run").contains("made by Z\\nZ9\\u{1b}[1m\\u{202e}"))
        // --json keeps the text as it is.
        let children = try #require(checkJSON(l, "children") as? [String: Any])
        let names = (children["children"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
        #expect(names.count == 3 && names.allSatisfy { $0.hasPrefix("Z\nZ9\u{1B}[1m\u{202E}") }, "\(names)")
        let peers = try #require(checkJSON(l, "peers") as? [String: Any])
        let addresses = (peers["peers"] as? [[String: Any]])?.compactMap { $0["address"] as? String } ?? []
        #expect(addresses.contains("evil\n\u{1B}[2J\u{202E}:4717"))
    }

    /// The commands that change the ledger, in an order where each one applies: each echoes a
    /// hostile name.
    @Test func changingCommands() throws {
        let f = try Self.fixture()
        defer { f.ledger.remove() }
        let l = f.ledger
        let ava = String(try #require(f.ids["Ava"]).prefix(8)), ben = String(try #require(f.ids["Ben"]).prefix(8))
        let cy = String(try #require(f.ids["Cy"]).prefix(8))
        let commands: [(arguments: [String], bidiOnly: Bool)] = [
            (["give", ava, "1"], false),
            (["take", ben, "100"], false),                            // and the warning: a negative balance
            (["give-all", "1"], false),
            (["take-all", "1"], false),
            (["allowance", "set", ben, "2", "--every", "week"], false),
            (["allowance", "stop", ben], false),
            (["child", "archive", ben], false),
            (["child", "restore", ben], false),
            (["child", "merge", ben, cy], false),
            (["child", "unmerge", ben], false),
            (["child", "rename", cy, "Cyrus\u{202E}"], false),       // the old name, and the new one's override
            (["undo"], false),
            (["account", "rename", "Mom\u{202E}moM"], true),
        ]
        for c in commands {
            let outcome = l.run(c.arguments)
            #expect(outcome.code == 0, "\(c.arguments): \(outcome)")
            Self.check(c.arguments, outcome, bidiOnly: c.bidiOnly)
        }
        // The owner cannot be revoked: the error names it, escaped, on one line.
        let fingerprint = try #require(((checkJSON(l, "members") as? [String: Any])?["members"] as? [[String: Any]])?.first?["fingerprint"] as? String)
        let revoke = l.run("revoke", fingerprint, "--yes")
        #expect(revoke.code == 65, "\(revoke)")
        Self.check(["revoke"], revoke, bidiOnly: true)
    }

    @Test func syncLinesEscapeAddressAndError() {
        let result = SyncDriver.Result(address: "evil\n\u{1B}[2J\u{202E}:4717", outcome: .failed("peer reported: " + Self.note),
                                       connectError: nil, seconds: 1)
        let line = SyncDriver.line(result)
        Self.check(["sync"], Outcome(code: 0, stdout: line, stderr: ""))
        #expect(!line.contains("\n"))
        #expect(line.hasPrefix("sync with evil\\n\\u{1b}[2J\\u{202e}:4717 failed after "), "\(line)")
        #expect(line.hasSuffix(": peer reported: " + TextEscaping.terminal(Self.note)), "\(line)")
    }
}

extension Replica {
    /// Writes `operations` through a change of this replica's own origin, with its signed head:
    /// what a modified client's records carry, authenticated, and checked as any peer's are.
    func applyOwnChange(_ operations: [KidLedgerDomain.Operation]) throws {
        let origin = replicaID
        guard let held = try versionVector()[origin], let previous = try chain(origin, at: held), let signer else {
            throw LedgerError.invalid("no change of this replica to follow")
        }
        // A minute ahead of the wall clock: newer than every write the CLI made, and within the
        // hour a receiver accepts (Limits.clockAheadMillisMax).
        let soon = Int64(Date().timeIntervalSince1970 * 1000) + 60_000
        let change = Change(origin: origin, sequence: held + 1, hlc: HLC(millis: soon), operations: operations)
        let chain = Replica.chainLink(after: previous, onlyVersion: Array(SHA256.hash(RecordCodec.encode(change)).prefix(8)))
        let head = signer.head(household: try household()!.id, origin: origin, sequence: held + 1, chain: chain)
        let report = try applyRemote([change], heads: [head])
        precondition(report.applied == 1, "the change was not applied")
    }

    /// Rewrites, behind the replica's back, every child, household and member name it holds
    /// (the registers and their history) to `name(i)`, `i` counting the registers: what a store
    /// written before names were checked may hold.
    func plantNames(_ name: (Int) -> String) throws {
        let names: Set<Field> = [.childName, .householdName, .memberName]
        try store.write { w in
            var registers: [[UInt8]: Int] = [:]
            var puts: [(Table, [UInt8], [UInt8])] = []
            try w.scan(Tables.registers, prefix: []) { key, value in
                guard key.count == 17, let field = Field(rawValue: key[16]), names.contains(field) else { return true }
                var stored = try StoredRegister.decode(value)
                registers[key] = registers.count
                stored.value = .text(name(registers[key]!))
                puts.append((Tables.registers, key, stored.encoded()))
                return true
            }
            try w.scan(Tables.registerHistory, prefix: []) { key, value in
                let (entity, field, decoded) = try RegisterWrite.decode(key: key, value: value)
                var write = decoded
                guard names.contains(field), let n = registers[Keys.register(entity, field)] else { return true }
                write.value = .text(name(n))
                let entry = write.entry(entity: entity, field: field)
                puts.append((Tables.registerHistory, entry.key, entry.value))
                return true
            }
            for (table, key, value) in puts { try w.put(table, key, value) }
        }
    }
}

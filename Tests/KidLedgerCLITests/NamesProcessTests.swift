import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
@testable import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerLMDB
@testable import KidLedgerDaemon

/// Issue 20, points 8 and 5 through the built binary: members have display names, `history`
/// names each entry's author, `revoke` names one member exactly and asks first, and a member who
/// reuses another's transaction id does not replace it; both versions and authors are shown.
@Suite("Member names, authors and same-id conflicts between real processes")
struct NamesProcessTests {
    /// `members --json` of `ledger`.
    static func members(_ ledger: TestLedger) throws -> [[String: Any]] {
        try json(ledger, "members")["members"] as? [[String: Any]] ?? []
    }

    /// Runs `kidledger ARGS` on a terminal (through script(1)) that types `answer`.
    static func onTerminal(_ ledger: TestLedger, typing answer: String, _ arguments: [String]) throws -> ProcessOutcome {
        let binary = try #require(Binary.path)
        let command = ([binary] + arguments).map { "'\($0)'" }.joined(separator: " ")
        return try runProcess("/bin/sh", ["-c", "printf '\(answer)\\n' | script -qec \"\(command)\" /dev/null"],
                              environment: ["KIDLEDGER_HOME": ledger.home, "HOME": ledger.directory, "PATH": "/usr/bin:/bin", "LC_ALL": "C"],
                              timeout: 60)
    }

    @Test("names at init and join, members with fingerprints, history authors, rename, revoke by name or prefix with confirmation")
    func namesMembersHistoryAndRevoke() throws {
        let a = TestLedger(), b = TestLedger(), c = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove(); c.remove() }
        try ok(a, "init", "Smiths", "--account", "mom", "--name", "Mom")
        try ok(a, "child", "add", "Ava")
        try ok(a, "give", "Ava", "5.00")
        _ = try #require(try DaemonProcess.start(a, in: group))
        try ok(b, "join", try inviteCode(a), "--name", "Dad")
        try ok(b, "give", "Ava", "1.00", "--note", "from dad")
        try ok(b, "sync")
        try ok(c, "join", try inviteCode(a), "--name", "Dad")
        try ok(c, "sync")

        let list = try Self.members(a)
        #expect(list.compactMap { $0["name"] as? String }.sorted() == ["Dad", "Dad", "Mom"], "\(list)")
        for m in list {
            let key = try #require(m["key"] as? String), fingerprint = try #require(m["fingerprint"] as? String)
            #expect(fingerprint.filter { $0 != "-" } == String(key.prefix(16)), "\(m)")
        }
        let owner = try #require(list.first { $0["owner"] as? Bool == true })
        #expect(owner["name"] as? String == "Mom")
        let text = try ok(a, "members")
        #expect(text.contains("Mom") && text.contains(owner["fingerprint"] as? String ?? "?"), "\(text)")

        // history names each entry's author.
        let history = try json(a, "history")["transactions"] as? [[String: Any]] ?? []
        let authors = history.compactMap { ($0["author"] as? [String: Any])?["name"] as? String }
        #expect(authors == ["Dad", "Mom"], "\(history)")
        #expect(try ok(a, "history").contains("Mom (\(owner["fingerprint"] as? String ?? "?"))"))

        // "Dad" names two members: refused, listing both.
        let ambiguous = try runKidledger(a, ["revoke", "Dad", "--yes"])
        #expect(ambiguous.code == 65 && ambiguous.stderr.contains("matches more than one member"), "\(ambiguous)")
        #expect(try runKidledger(a, ["revoke", "abc", "--yes"]).code == 65)   // 3 digits name nobody

        // C renames itself; the owner sees the new name after a sync.
        try ok(c, "account", "rename", "Grandpa")
        try ok(c, "sync")
        #expect(try Self.members(a).contains { $0["name"] as? String == "Grandpa" })

        // No terminal and no --yes: refused, nothing revoked.
        let unasked = try runKidledger(a, ["revoke", "grandpa"])
        #expect(unasked.code == 64 && unasked.stderr.contains("pass --yes"), "\(unasked)")
        #expect(try Self.members(a).allSatisfy { $0["revoked"] as? Bool == false })
        // By full name (any case) with --yes.
        try ok(a, "revoke", "GRANDPA", "--yes")
        #expect(try Self.members(a).first { $0["name"] as? String == "Grandpa" }?["revoked"] as? Bool == true)

        // By a unique fingerprint prefix, on a terminal: "n" revokes nothing, "y" revokes.
        let dad = try #require(try Self.members(a).first { $0["name"] as? String == "Dad" })
        let prefix = String((dad["fingerprint"] as? String ?? "").prefix(9))
        let declined = try Self.onTerminal(a, typing: "n", ["revoke", prefix])
        #expect(declined.code == 0 && declined.stdout.contains("Revoke Dad (") && declined.stdout.contains("Nothing revoked"), "\(declined)")
        #expect(try Self.members(a).first { $0["name"] as? String == "Dad" }?["revoked"] as? Bool == false)
        let confirmed = try Self.onTerminal(a, typing: "y", ["revoke", prefix])
        #expect(confirmed.code == 0 && confirmed.stdout.contains("Revoked Dad ("), "\(confirmed)")
        #expect(try Self.members(a).first { $0["name"] as? String == "Dad" }?["revoked"] as? Bool == true)
    }

    @Test("a member that matches a name and another's prefix, or two prefixes, is ambiguous")
    func resolveMemberNeedsExactlyOne() throws {
        func member(_ name: String, _ first: UInt8) -> MemberSummary {
            MemberSummary(key: [first, 0xAB] + [UInt8](repeating: 1, count: 30), name: name, chosenName: name,
                          isOwner: false, isRevoked: false, devices: [])
        }
        let list = [member("Dad", 0x12), member("Mom", 0x12), member("Cafe", 0xCA), member("caab", 0x55)]
        #expect(throws: CLIError.self) { try Names.resolveMember("12ab", in: list) }          // two prefixes
        #expect(throws: CLIError.self) { try Names.resolveMember("caab", in: list) }          // a name, and Cafe's prefix
        #expect(try Names.resolveMember("mom", in: list).name == "Mom")
        #expect(try Names.resolveMember("CA-AB", in: list).name == "Cafe")
        #expect(throws: CLIError.self) { try Names.resolveMember("12a", in: list) }           // too short
    }

    @Test("attack: a member reusing the owner's transaction id with another amount does not replace it; status and history show both")
    func reusedTransactionIDShowsBothAuthors() throws {
        let a = TestLedger(), b = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove() }
        try ok(a, "init", "Smiths", "--account", "mom", "--name", "Mom")
        try ok(a, "child", "add", "Ava")
        try ok(a, "give", "Ava", "5.00", "--note", "allowance")
        _ = try #require(try DaemonProcess.start(a, in: group))
        try ok(b, "join", try inviteCode(a), "--name", "Dad")

        // Dad's modified client writes Mom's entry's id with another amount: whichever the old
        // rule (the smaller payload wins) would have kept.
        let ctx = Context(home: b.home, json: false, console: BufferConsole(), clock: SystemClock())
        let replica = try ctx.openReplica()
        let me = try #require(try ctx.identity(creating: false))
        ctx.configure(replica, identity: me)
        let original = try #require(try replica.history().first?.transaction)
        let ownerKey = try #require(try replica.members().first(where: \.isOwner)?.key)
        #expect(Membership.isEntryID(original.id, madeBy: ownerKey), "the CLI marks the ids it makes")
        let forged = [Int64(1), 99_999_900].map { cents in
            var t = original
            t.amountCents = cents
            return t
        }.min { KeyBytes.compare(RecordCodec.encode($0), RecordCodec.encode($1)) < 0 }!
        #expect(KeyBytes.compare(RecordCodec.encode(forged), RecordCodec.encode(original)) < 0)
        try replica.commitLocal { _, _ in ([.addTransaction(forged)], ()) }
        (replica.store as? LMDBEnvironment)?.close()
        try ok(b, "sync")

        for home in [a, b] {
            #expect(try childTable(home)["Ava"]?[0] == 500, "Mom's entry stays")
            let status = try json(home, "status")
            let conflicts = status["sameIdConflicts"] as? [[String: Any]] ?? []
            #expect(conflicts.count == 1, "\(status)")
            let kept = conflicts.first?["kept"] as? [String: Any], lost = conflicts.first?["lost"] as? [String: Any]
            #expect((kept?["author"] as? [String: Any])?["name"] as? String == "Mom")
            #expect((kept?["transaction"] as? [String: Any])?["amountCents"] as? Int == 500)
            #expect((lost?["author"] as? [String: Any])?["name"] as? String == "Dad")
            #expect((lost?["transaction"] as? [String: Any])?["amountCents"] as? Int == Int(forged.amountCents))
            let line = try ok(home, "status")
            #expect(line.contains("conflict on entry") && line.contains("by Mom (") && line.contains("by Dad ("), "\(line)")
            let history = try json(home, "history")["transactions"] as? [[String: Any]] ?? []
            let entry = history.first
            #expect((entry?["author"] as? [String: Any])?["name"] as? String == "Mom")
            let lostInHistory = (entry?["conflicts"] as? [[String: Any]])?.first
            #expect((lostInHistory?["author"] as? [String: Any])?["name"] as? String == "Dad", "\(history)")
            #expect(try ok(home, "history").contains("lost +$"))
            let listed = try json(home, "conflicts")["sameIdConflicts"] as? [[String: Any]] ?? []
            #expect(listed.count == 1, "\(listed)")
        }
        #expect(try digest(a) == digest(b))
    }
}

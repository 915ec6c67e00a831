import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerDaemon

/// The product's relay mailbox (docs/RELAY-DESIGN.md, "Running a relay"): after a new epoch the
/// change that carries its record is sealed under the epoch it announces, so a member that meets
/// the owner only through the relay opens it with the key the owner posted to its mailbox. And
/// when the relay itself is out of date (wiped), `status` says so.
@Suite("The relay's mailbox and its out-of-date line, between real processes")
struct RelayMailboxProcessTests {
    /// Starts an adopted relay in `home` on `listen` and waits at most 30 s for its first log line.
    static func restartRelay(_ home: TestLedger, listen: String, in group: ProcessGroup) throws -> BackgroundProcess {
        let relay = group.add(try BackgroundProcess(home, ["relay", "serve", "--listen", listen]))
        let deadline = Deadline(seconds: 30)
        while !deadline.passed && !relay.hasExited && !relay.stderr.contains("relay serving on ") { usleep(20_000) }
        #expect(relay.stderr.contains("adopted by owner key"), "\(relay.stderr)")
        return relay
    }

    /// Joins `member` as `name` through `mom`'s daemon (for the join only).
    static func join(_ member: TestLedger, _ name: String, owner mom: TestLedger, in group: ProcessGroup) throws {
        let daemon = try #require(try DaemonProcess.start(mom, in: group))
        try ok(member, "join", try inviteCode(mom), "--name", name)
        #expect(daemon.stop() == 0)
    }

    /// Mom adds the relay of `code`; Dad and Gran join through her daemon; everyone syncs with the
    /// relay until all are on its list and hold the same ledger.
    static func gather(_ mom: TestLedger, _ dad: TestLedger, _ gran: TestLedger, relayCode code: String, in group: ProcessGroup,
                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        try ok(mom, "relay", "add", code)
        try join(dad, "Dad", owner: mom, in: group)
        try join(gran, "Gran", owner: mom, in: group)
        try ok(mom, "relay", "sync")
        for member in [dad, gran, mom, dad, gran] { try ok(member, "relay", "sync") }
        #expect(try digest(dad) == digest(mom), sourceLocation: sourceLocation)
        #expect(try digest(gran) == digest(mom), sourceLocation: sourceLocation)
    }

    // long-function: one story in order (join, revoke, give, sync through the relay only, restart, wipe).
    @Test func dadConvergesThroughTheMailboxAndGranReadsNothingNew() throws {
        let mom = TestLedger(), dad = TestLedger(), gran = TestLedger(), aunt = TestLedger(), relayHome = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); [mom, dad, gran, aunt, relayHome].forEach { $0.remove() } }
        try ok(mom, "init", "Smiths")
        try ok(mom, "child", "add", "Zephyrine")
        try ok(mom, "give", "Zephyrine", "10.00", "--note", "before")
        var (relay, code) = try RelayProcessTests.startRelay(relayHome, in: group)
        let port = Int(relay.stderr.split(separator: "127.0.0.1:").dropFirst().first?.prefix { $0.isNumber } ?? "") ?? 0
        try Self.gather(mom, dad, gran, relayCode: code, in: group)
        // From here on Dad and Mom never dial each other.

        // Mom revokes Gran (a new epoch, sealed to Mom and Dad only) and gives; she syncs only with the relay.
        try ok(mom, "revoke", "Gran", "--yes")
        try ok(mom, "give", "Zephyrine", "0.50", "--note", "after-gran")
        let momSync = try json(mom, "relay", "sync")
        #expect((momSync["results"] as? [[String: Any]])?.first?["ok"] as? Bool == true, "\(momSync)")

        // Dad's first session fetches his mailbox but may not open what it refused (as if his
        // process stopped there): the key is kept in his device state, nothing else applied yet.
        try Self.withMember(dad) { replica, identity in
            let granted = try #require(try replica.relays().first)
            let result = RelayDriver.sync(replica, identity: identity, relay: granted, owner: false, now: SystemClock().nowMillis(), again: false)
            #expect(result.succeeded, "\(RelayDriver.line(result))")
            #expect(result.summary.envelopesRefused > 0, "the change carrying the new epoch is sealed under it: \(RelayDriver.line(result))")
            #expect(!(try RelayRecord.mailboxKeys(replica, relay: granted.key)).isEmpty, "the mailbox's key is kept")
        }
        #expect(try digest(dad) != digest(mom))
        // A new process (the restart) opens the envelopes with the kept key.
        try ok(dad, "relay", "sync")
        #expect(try digest(dad) == digest(mom))
        #expect(try childTable(dad)["Zephyrine"]?[0] == 1_050)
        // The ledger gives Dad the epoch now: the mailbox's copy of the key is forgotten.
        try Self.withMember(dad) { replica, _ in
            let granted = try #require(try replica.relays().first)
            #expect(try RelayRecord.mailboxKeys(replica, relay: granted.key).isEmpty)
        }

        // Another epoch (Aunt joins: a member grant); one `relay sync` of Dad fetches the box and opens at once.
        try Self.join(aunt, "Aunt", owner: mom, in: group)
        try ok(mom, "give", "Zephyrine", "0.25", "--note", "after-aunt")
        try ok(mom, "relay", "sync")
        let dadSync = try json(dad, "relay", "sync")
        #expect(try digest(dad) == digest(mom), "\(dadSync)")
        #expect(((dadSync["results"] as? [[String: Any]])?.first?["changesReceived"] as? Int ?? 0) >= 2, "\(dadSync)")
        #expect(try childTable(dad)["Zephyrine"]?[0] == 1_075)
        // Mom's status does not say Dad (last met directly at his join) lacks what the relay shows he holds.
        try ok(mom, "relay", "sync")
        let momStatus = try ok(mom, "status")
        #expect(!momStatus.contains("Dad's laptop: offline") && !momStatus.contains("Dad's laptop: last seen"), "\(momStatus)")
        let laptops = try json(mom, "status")["laptops"] as? [[String: Any]] ?? []
        #expect(laptops.first { $0["name"] as? String == "Dad" }?["theyLack"] as? Int == 0, "\(laptops)")

        // Gran, revoked, still dials the relay: it refuses her, and she holds nothing written after her revocation.
        _ = try runKidledger(gran, ["relay", "sync"])
        #expect(try childTable(gran)["Zephyrine"]?[0] == 1_000)
        var dadsEpoch: UInt32?
        try Self.withMember(dad) { replica, identity in dadsEpoch = try replica.relayKeyring(identity: identity).newestEpoch }
        try Self.withMember(gran) { replica, identity in
            let granted = try #require(try replica.relays().first)
            #expect(try RelayDriver.mergedKeyring(replica, identity: identity, relay: granted.key).newestEpoch ?? 0 < dadsEpoch ?? 0,
                    "Gran holds no key of the epochs after her revocation")
        }

        // Part 2: the relay is wiped (its store deleted, its key and owner kept) and restarted on its port.
        #expect(try json(mom, "status")["relays"].flatMap { ($0 as? [[String: Any]])?.first?["outOfDate"] } is NSNull)
        relay.send(SIGTERM)
        #expect(relay.wait(timeout: 15), "the relay did not stop")
        try FileManager.default.removeItem(atPath: relayHome.home + "/relay")
        relay = try Self.restartRelay(relayHome, listen: "127.0.0.1:\(port)", in: group)
        try ok(mom, "relay", "sync")
        let relays = try json(mom, "status")["relays"] as? [[String: Any]] ?? []
        let reason = relays.first?["outOfDate"] as? String ?? ""
        #expect(reason.contains("lost"), "\(relays)")
        #expect(relays.first?["relayLacks"] as? Int == 0, "Mom sent back what she holds: \(relays)")
        #expect(try ok(mom, "status").contains("is out of date: The relay had lost"))
        #expect(try ok(mom, "relay", "status").contains("out of date: The relay had lost"))
        // Refilled by Mom; Dad converges through it; a later session finds nothing lost.
        try ok(dad, "give", "Zephyrine", "0.01", "--note", "after-wipe")
        // What the daemon's relay round reads: Dad holds a change the relay lacked after his last session.
        func dadIsAhead() throws -> Bool {
            var ahead = false
            try Self.withMember(dad) { replica, _ in
                ahead = RelayRecord.behind(replica, relay: try #require(try replica.relays().first), vector: try replica.versionVector())
            }
            return ahead
        }
        #expect(try dadIsAhead())
        try ok(dad, "relay", "sync")
        #expect(try !dadIsAhead())
        try ok(mom, "relay", "sync")
        #expect(try digest(dad) == digest(mom))
        #expect(try json(mom, "status")["relays"].flatMap { ($0 as? [[String: Any]])?.first?["outOfDate"] } is NSNull)
        _ = code
    }

    /// A member's replica and identity in this process, closed after `body`.
    static func withMember(_ dad: TestLedger, _ body: (Replica, Identity) throws -> Void) throws {
        let ctx = Context(home: dad.home, json: false, console: BufferConsole(), clock: SystemClock())
        let replica = try ctx.openReplicaForChanges()
        defer { (replica.store as? LMDBEnvironment)?.close() }
        let identity = try #require(try ctx.identity(creating: false))
        try body(replica, identity)
    }

    /// The out-of-date rule on records (no processes).
    @Test func outOfDateRule() throws {
        let day = RelayRecord.staleMillis
        var last = RelayRecord.Last()
        #expect(RelayRecord.outOfDate(last, now: 10 * day) == nil, "never synced: the reach line says so")
        last.attemptMillis = 5 * day
        last.successMillis = 5 * day
        #expect(RelayRecord.outOfDate(last, now: 5 * day + 1_000) == nil)
        #expect(RelayRecord.outOfDate(last, now: 6 * day + 1)?.contains("more than a day ago") == true)
        last.lacks = 3
        last.lacksWhy = "its storage for this household is full"
        #expect(RelayRecord.outOfDate(last, now: 5 * day) == "The relay lacks 3 changes this laptop holds: its storage for this household is full.")
        last.lacks = 0
        last.lostMillis = 5 * day
        #expect(RelayRecord.outOfDate(last, now: 5 * day)?.hasPrefix("The relay had lost changes it held") == true)
        last.successMillis = 5 * day + 30_000
        #expect(RelayRecord.outOfDate(last, now: 5 * day + 30_000) == nil, "a later session found nothing lost")

        // Lost: no list or an older one; under the same list a lower held sequence; a newer list may lower it lawfully.
        let tag = try #require(RelayStreamTag(bytes: [UInt8](repeating: 7, count: 16)))
        var previous = RelayRecord.Last()
        previous.listNumber = 9
        previous.held = [Hex.encode(tag.bytes): 40]
        #expect(RelayRecord.lost(since: previous, welcomeList: 0, welcomeHeld: [:]))
        #expect(RelayRecord.lost(since: previous, welcomeList: 8, welcomeHeld: [tag: 40]))
        #expect(RelayRecord.lost(since: previous, welcomeList: 9, welcomeHeld: [tag: 39]))
        #expect(!RelayRecord.lost(since: previous, welcomeList: 9, welcomeHeld: [tag: 40]))
        #expect(!RelayRecord.lost(since: previous, welcomeList: 10, welcomeHeld: [:]))

        // The record survives its encoding.
        previous.attemptMillis = 11
        previous.successMillis = 11
        previous.members = [String(repeating: "ab", count: 32): 5]
        previous.lacks = 2
        previous.lacksWhy = "a change is too large for the relay to carry"
        previous.lostMillis = 11
        #expect(RelayRecord.decode(RelayRecord.encode(previous)) == previous)
    }
}

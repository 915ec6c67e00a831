import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import KidLedgerLMDB
import KidLedgerRelay
import KidLedgerSecurity
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerDaemon

/// A relay follows a recovery (docs/RELAY-DESIGN.md, "Running a relay"; docs/SECURITY.md, "The
/// relay"), between real `kidledger` processes on 127.0.0.1. Mom adopts a relay and Dad joins;
/// Mom's laptop is stolen and the thief, holding the owner key the relay pinned, hands the relay
/// a list naming only itself, numbered at the maximum: the relay refuses Dad. Dad recovers with
/// the paper secret; his next relay sync re-pins the relay's owner with the statement the recovery
/// key signed and installs his list over the thief's. The thief's lists are refused from then on,
/// and Dad's laptop syncs through the relay, which installs Dad's later lists.
@Suite("A relay follows a recovery, between real processes")
struct RelayRecoveryProcessTests {
    /// What the thief's modified client does on Mom's laptop: one relay session, as the product's
    /// driver runs it, handing `list`, signed with the owner key the laptop holds.
    static func thiefSync(_ home: TestLedger, number: UInt64) throws -> RelayDriver.Result {
        let ctx = Context(home: home.home, json: false, console: BufferConsole(), clock: SystemClock())
        let replica = try ctx.openReplicaForChanges()
        defer { (replica.store as? LMDBEnvironment)?.close() }
        let me = try #require(try ctx.identity(creating: false))
        ctx.configure(replica, identity: me)
        let relay = try #require(try replica.relays().first)
        let mine = try #require(RelayMemberKey(bytes: try RelayMemberIdentity.derive(from: me, relay: relay.key).publicKey.bytes))
        let list = SignedRelayAccessList.sign(try RelayAccessList(number: number, quotas: [mine: 1 << 20]),
                                              relay: try #require(PublicKey(bytes: relay.key)), owner: me)
        return RelayDriver.sync(replica, identity: me, relay: relay, owner: true, now: SystemClock().nowMillis(), list: list)
    }

    @Test func theThiefLosesTheRelayOnceTheRecoveryReachesIt() throws {
        let mom = TestLedger(), dad = TestLedger(), relayHome = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); [mom, dad, relayHome].forEach { $0.remove() } }
        let secret = try #require(try json(mom, "init", "Smiths")["recoverySecret"] as? String)
        try ok(mom, "child", "add", "Ava")
        let (relay, code) = try RelayProcessTests.startRelay(relayHome, in: group)
        #expect(try json(mom, "relay", "add", code)["synced"] as? Bool == true)
        #expect(try String(contentsOfFile: relayHome.home + "/relay-owner", encoding: .utf8).split(separator: "\n").count == 3,
                "the relay keeps the owner, the recovery key and the term")
        let daemon = try #require(try DaemonProcess.start(mom, in: group))
        try ok(dad, "join", try inviteCode(mom), "--name", "Dad")
        #expect(daemon.stop() == 0)
        try ok(mom, "relay", "sync")
        try ok(dad, "relay", "sync")

        // Stolen: the thief hands the relay a list naming only itself, numbered at the maximum.
        let attack = try Self.thiefSync(mom, number: UInt64.max)
        #expect(attack.summary.installedAccessList == UInt64.max, "\(RelayDriver.line(attack))")
        let shut = try runKidledger(dad, ["relay", "sync"])
        #expect(shut.code == 77, "the relay refuses Dad: \(shut)")

        // Dad recovers with the paper secret, then syncs through the relay.
        let recovered = try runKidledger(dad, ["recover"], input: secret + "\n")
        #expect(recovered.code == 0, "\(recovered)")
        try ok(dad, "give", "Ava", "3.00", "--note", "after the theft")
        let synced = try json(dad, "relay", "sync")
        let result = (synced["results"] as? [[String: Any]])?.first ?? [:]
        #expect(result["ok"] as? Bool == true && (result["changesSent"] as? Int ?? 0) >= 1, "\(synced)\n\(relay.stderr)")
        #expect(relay.stderr.contains("owner changed to key"), "\(relay.stderr)")
        #expect(try String(contentsOfFile: relayHome.home + "/relay-owner", encoding: .utf8).contains("\n1\n"), "owner term 1")

        // The thief's lists are refused now, whatever their number; Dad still syncs.
        for number in [UInt64.max, 1] {
            let again = try Self.thiefSync(mom, number: number)
            #expect(again.summary.installedAccessList == nil, "\(RelayDriver.line(again))")
        }
        try ok(dad, "relay", "sync")

        // Dad revokes Mom's laptop: his next list (numbered from the clock, below the thief's) installs.
        let momPrint = try #require((try json(dad, "members")["members"] as? [[String: Any]] ?? []).first { $0["formerOwner"] as? Bool == true }?["fingerprint"] as? String)
        try ok(dad, "revoke", momPrint, "--yes")
        let line = try ok(dad, "relay", "sync")
        #expect(line.contains("access list") && line.contains("installed"), "\(line)")
        let revoked = try Self.thiefSync(mom, number: UInt64.max)
        #expect(revoked.refused, "\(RelayDriver.line(revoked))")
        #expect(!relay.hasExited, "\(relay.stderr)")
    }
}

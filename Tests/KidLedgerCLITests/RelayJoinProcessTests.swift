import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerSecurity
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerDaemon

/// A join through the relay (docs/RELAY-DESIGN.md, "Joining through the relay"), between real
/// `kidledger` processes on 127.0.0.1: Mom's invitation names an address nobody answers on and
/// the household's relay; Dad's `join` leaves a sealed request in Mom's mailbox there, Mom's
/// `relay sync` lets him in (as her daemon's relay round would), and Dad takes the whole ledger
/// from the relay alone. A used invitation gets nobody in.
@Suite("Joining through the relay, between real processes")
struct RelayJoinProcessTests {
    /// Runs `mom relay sync` until `joiner` ends (at most `seconds`).
    static func letIn(_ joiner: BackgroundProcess, owner mom: TestLedger, seconds: TimeInterval) throws {
        let deadline = Deadline(seconds: seconds)
        while !joiner.hasExited && !deadline.passed {
            _ = try runKidledger(mom, ["relay", "sync"])
            joiner.wait(timeout: 0.5)
        }
    }

    // long-function: one story in order (invite, join through the relay, give both ways, a used code).
    @Test func dadJoinsThroughTheRelayAlone() throws {
        let mom = TestLedger(), dad = TestLedger(), gran = TestLedger(), relayHome = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); [mom, dad, gran, relayHome].forEach { $0.remove() } }
        try ok(mom, "init", "Smiths")
        try ok(mom, "child", "add", "Ava")
        try ok(mom, "give", "Ava", "10.00", "--note", "before")
        let (relay, relayCode) = try RelayProcessTests.startRelay(relayHome, in: group)
        try ok(mom, "relay", "add", relayCode)
        // Nothing answers on port 9: the code's relay is the only way in.
        let code = try #require(try json(mom, "invite", "--address", "127.0.0.1:9")["code"] as? String)
        let parsed = try #require(InviteCode(text: code))
        #expect(parsed.relay?.addresses.first?.hasPrefix("127.0.0.1:") == true, "\(parsed)")

        let join = group.add(try BackgroundProcess(dad, ["--json", "join", code, "--name", "Dad", "--wait", "120"]))
        try Self.letIn(join, owner: mom, seconds: 120)
        #expect(join.wait(timeout: 5) && join.exitCode == 0, "\(join.stdout)\n\(join.stderr)\n\(relay.stderr)")
        let joined = try #require(try JSONSerialization.jsonObject(with: Data(join.stdout.utf8)) as? [String: Any], "\(join.stdout)")
        #expect(joined["via"] as? String == "relay" && joined["peer"] is NSNull, "\(joined)")
        #expect(joined["transactions"] as? Int == 1, "\(joined)")
        #expect(try childTable(dad)["Ava"]?[0] == 1_000)

        // Mom learns Dad's name and relay key through the relay; her next list names his own key.
        try ok(mom, "relay", "sync")
        #expect(try digest(dad) == digest(mom))
        let members = try json(mom, "members")["members"] as? [[String: Any]] ?? []
        #expect(members.contains { $0["name"] as? String == "Dad" }, "\(members)")

        // Both ways through the relay alone.
        try ok(dad, "give", "Ava", "1.00", "--note", "from-dad")
        try ok(dad, "relay", "sync")
        try ok(mom, "relay", "sync")
        #expect(try childTable(mom)["Ava"]?[0] == 1_100)
        try ok(mom, "give", "Ava", "0.50", "--note", "from-mom")
        try ok(mom, "relay", "sync")
        try ok(dad, "relay", "sync")
        #expect(try digest(dad) == digest(mom))
        // Mom's lists name Dad's own relay key now, and it works: his guest key is forgotten.
        try RelayMailboxProcessTests.withMember(dad) { replica, _ in
            #expect(RelayRecord.guest(replica, relay: parsed.relay!.key) == nil)
        }

        // The used code gets Gran nowhere: nothing answers, the relay no longer lists its guest
        // key, and Mom's sessions let nobody in; her join ends unavailable, leaving no ledger.
        let again = group.add(try BackgroundProcess(gran, ["join", code, "--name", "Gran", "--wait", "6"]))
        try Self.letIn(again, owner: mom, seconds: 60)
        #expect(again.wait(timeout: 5) && again.exitCode == 69, "\(again.stdout)\n\(again.stderr)")
        #expect(again.stderr.contains("must be on and synced with the relay"), "\(again.stderr)")
        #expect(!FileManager.default.fileExists(atPath: gran.home + "/ledger/data.mdb"), "nothing left in Gran's home")
        #expect(try (json(mom, "members")["members"] as? [[String: Any]] ?? []).count == 2)

        // Revoked, Dad's laptop gets no way back in by the guest key he joined with: Mom's list names Mom alone.
        try ok(mom, "revoke", "Dad", "--yes")
        try ok(mom, "relay", "sync")
        try RelayMailboxProcessTests.withMember(mom) { replica, _ in
            let held = try #require(try RelayRecord.heldList(replica, relay: parsed.relay!.key))
            let list = try RelayAccessList.decode(held.listBytes)
            #expect(list.guests.isEmpty && list.quotas.count == 1, "\(list)")
        }
        #expect(try runKidledger(dad, ["relay", "sync"]).code == 77)
        #expect(!relay.hasExited, "\(relay.stderr)")
    }

    /// The owner's side alone (no relay needed): requests that don't open, verify or match an
    /// open invitation are dropped once each with a sentence; a good one is admitted once.
    @Test func theOwnerAdmitsOnlyMatchingRequests() throws {
        let mom = TestLedger(), dad = Identity.generate(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove() }
        try ok(mom, "init", "Smiths")
        let text = try json(mom, "invite", "--address", "127.0.0.1:9")["code"] as? String ?? ""
        let code = try #require(InviteCode(text: text))
        let relay = Identity.generate().publicKey.bytes
        let guest = try RelayGuestIdentity.derive(invitationKey: SecureChannel.invitationKey(secret: code.secret), relay: relay)
        let slot = RelayJoinRequest.slot(of: guest.publicKey.bytes)
        var random = SystemRandomNumberGenerator()
        let owner = try #require(PublicKey(bytes: code.owner))
        let good = try RelayJoinRequest.seal(joiner: dad, owner: owner, household: code.household, guest: guest.publicKey, using: &random)
        let otherHousehold = try RelayJoinRequest.seal(joiner: dad, owner: owner, household: RecordID(high: 1, low: 1), guest: guest.publicKey, using: &random)
        let toSomeoneElse = try RelayJoinRequest.seal(joiner: dad, owner: Identity.generate().publicKey, household: code.household,
                                                      guest: guest.publicKey, using: &random)
        let noInvitation = RelayMailboxBox(epoch: RelayJoinRequest.slotMin | 5, box: good)
        try RelayMailboxProcessTests.withMember(mom) { replica, identity throws in
            var summary = RelayMemberSummary()
            let now = SystemClock().nowMillis()
            let bad = [noInvitation, RelayMailboxBox(epoch: slot, box: otherHousehold), RelayMailboxBox(epoch: slot, box: toSomeoneElse)]
            #expect(RelayDriver.admitJoiners(bad, replica: replica, owner: identity, relay: relay, now: now, summary: &summary).isEmpty)
            #expect(summary.refusals.count == 3, "\(summary.refusals)")
            #expect(summary.refusals.contains { $0.contains("matches no open invitation") }, "\(summary.refusals)")
            #expect(summary.refusals.contains { $0.contains("not signed by its joiner") }, "\(summary.refusals)")
            #expect(summary.refusals.contains { $0.contains("does not open") }, "\(summary.refusals)")
            // Dropped once: the next session says nothing of them.
            var again = RelayMemberSummary()
            _ = RelayDriver.admitJoiners(bad, replica: replica, owner: identity, relay: relay, now: now, summary: &again)
            #expect(again.refusals.isEmpty, "\(again.refusals)")
            // The good one: admitted once, its guest key kept listed until Dad publishes his own key.
            var admitted = RelayMemberSummary()
            #expect(RelayDriver.admitJoiners([RelayMailboxBox(epoch: slot, box: good)], replica: replica, owner: identity, relay: relay,
                                             now: now, summary: &admitted) == [dad.publicKey])
            #expect(try replica.members().contains { $0.key == dad.publicKey.bytes })
            #expect(try RelayDriver.guestKeys(replica, relay: relay, now: now) == [RelayMemberKey(bytes: guest.publicKey.bytes)!])
            #expect(RelayDriver.admitJoiners([RelayMailboxBox(epoch: slot, box: good)], replica: replica, owner: identity, relay: relay,
                                             now: now, summary: &admitted).isEmpty, "the invitation is used up")
            #expect(try RelayDriver.guestKeys(replica, relay: relay, now: now + RelayRecord.admittedKeepMillis).isEmpty, "7 days later")
        }
    }
}

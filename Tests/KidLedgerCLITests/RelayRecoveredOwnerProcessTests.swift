import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import KidLedgerDomain
import KidLedgerRelay
import KidLedgerSecurity
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerDaemon

/// A member meets the recovered owner only through the relay (docs/RELAY-DESIGN.md, "Running a
/// relay", the mailbox), between real `kidledger` processes on 127.0.0.1. After Dad's `recover`
/// the change carrying the owner transfer is sealed under the new owner's epoch, and Gran's ledger
/// still names Mom: she opens the new epoch's box because the relay hands her, with her mailbox,
/// the statement the household's recovery key signed, which she checks against the recovery key
/// of her own genesis. She converges with Dad without ever dialling him.
@Suite("A member follows a recovery through the relay alone, between real processes")
struct RelayRecoveredOwnerProcessTests {
    @Test func granConvergesWithTheRecoveredOwnerThroughTheRelay() throws {
        let mom = TestLedger(), dad = TestLedger(), gran = TestLedger(), relayHome = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); [mom, dad, gran, relayHome].forEach { $0.remove() } }
        let secret = try #require(try json(mom, "init", "Smiths")["recoverySecret"] as? String)
        try ok(mom, "child", "add", "Ava")
        try ok(mom, "give", "Ava", "10.00", "--note", "before")
        let (relay, code) = try RelayProcessTests.startRelay(relayHome, in: group)
        try RelayMailboxProcessTests.gather(mom, dad, gran, relayCode: code, in: group)
        // From here on nobody dials anybody.

        // Mom's laptop is lost; Dad recovers with the paper secret, gives, and syncs with the relay only.
        let recovered = try runKidledger(dad, ["recover"], input: secret + "\n")
        #expect(recovered.code == 0, "\(recovered)")
        try ok(dad, "give", "Ava", "2.50", "--note", "after-recovery")
        // `relay status` says the relay has yet to learn of the recovery, until the next session hands it over.
        let pending = { (home: TestLedger) throws -> Bool? in
            ((try json(home, "relay", "status")["relays"] as? [[String: Any]])?.first?["ownerChangePending"] as? Bool)
        }
        #expect(try pending(dad) == true)
        #expect(try runKidledger(dad, ["relay", "status"]).stdout.contains("recovery: the relay still takes orders from the former owner's key"))
        #expect(try pending(gran) == false, "only the laptop that recovered holds a statement")
        let dadSync = try json(dad, "relay", "sync")
        #expect((dadSync["results"] as? [[String: Any]])?.first?["ok"] as? Bool == true, "\(dadSync)\n\(relay.stderr)")
        #expect(relay.stderr.contains("owner changed to key"), "\(relay.stderr)")
        #expect(try String(contentsOfFile: relayHome.home + "/relay-owner", encoding: .utf8).split(separator: "\n").count == 4,
                "the relay keeps the recovery key's statement to hand members")
        #expect(try digest(gran) != digest(dad))
        #expect(try pending(dad) == false, "the relay confirmed the recovery")

        // Gran meets Dad only through the relay: one `relay sync` opens the new owner's box and applies the transfer.
        let granSync = try json(gran, "relay", "sync")
        let result = (granSync["results"] as? [[String: Any]])?.first ?? [:]
        #expect(result["ok"] as? Bool == true, "\(granSync)")
        #expect(try digest(gran) == digest(dad), "\(granSync)")
        #expect(try childTable(gran)["Ava"]?[0] == 1_250)
        let members = try json(gran, "members")["members"] as? [[String: Any]] ?? []
        #expect(members.contains { $0["formerOwner"] as? Bool == true }, "Gran's ledger names Mom a former owner now: \(members)")
        // And back: what Gran writes now reaches Dad through the relay.
        try ok(gran, "give", "Ava", "0.25", "--note", "from-gran")
        try ok(gran, "relay", "sync")
        try ok(dad, "relay", "sync")
        #expect(try digest(gran) == digest(dad))
        #expect(try childTable(dad)["Ava"]?[0] == 1_275)
        #expect(!relay.hasExited, "\(relay.stderr)")

        // Gran trusts a statement only under her own genesis's recovery key, for this relay, above her ledger's owner term.
        let recovery = try Identity(seed: try #require(RecoverySecret.seed(text: secret)))
        let forger = try Identity(seed: [UInt8](repeating: 0x42, count: 32))
        try RelayMailboxProcessTests.withMember(gran) { replica, _ in
            let relayKey = try #require(try replica.relays().first).key
            let epoch = try #require(try replica.ownership()).epoch
            let other = forger.publicKey
            func owner(_ statement: RelayOwnerStatement, relay: [UInt8] = relayKey, above: UInt64 = 0) -> PublicKey? {
                RelayDriver.recoveredOwner(statement, replica: replica, relay: relay, ownerEpoch: above)
            }
            let good = RelayOwnerStatement.sign(relay: try #require(PublicKey(bytes: relayKey)), newOwner: other, term: epoch + 1, recovery: recovery)
            #expect(owner(good) == other)
            #expect(owner(good, above: epoch + 1) == nil, "a term not above the ledger's owner transfer")
            #expect(owner(good, relay: forger.publicKey.bytes) == nil, "another relay's statement")
            #expect(owner(RelayOwnerStatement.sign(relay: try #require(PublicKey(bytes: relayKey)), newOwner: other, term: epoch + 1, recovery: forger)) == nil,
                    "not signed by the household's recovery key")
        }
    }
}

import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing

/// Issue 22, point 3 (part): one laptop reached under two addresses is one peer in `status`, and
/// the address it had before (a dead alias) keeps nothing pending.
@Suite("One laptop under two addresses")
struct PeerAliasTests {
    @Test func aDeadAliasOfALaptopKeepsNothingPending() throws {
        let mom = TestLedger(), dad = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove() }
        let before = try smithsServing(mom, in: group)
        try ok(dad, "join", try inviteCode(mom))
        #expect(before.stop() == 0)
        // The router gave Mom's laptop another address: her daemon is back on another port.
        let after = try #require(try DaemonProcess.start(mom, in: group))
        #expect(after.port != before.port)
        try ok(dad, "peer", "add", after.address)
        try ok(dad, "give", "Ava", "1.00", "--note", "after the move")
        _ = try runKidledger(dad, ["sync"])  // the old address fails, the new one syncs
        #expect(try digest(mom) == digest(dad))

        // Mom's laptop counts the sessions Dad's opened to her daemon (the join's included).
        let momStatus = try json(mom, "status")
        #expect((momStatus["inboundSessions"] as? Int ?? 0) >= 1 && momStatus["lastInboundMillis"] is NSNumber, "\(momStatus)")
        #expect(try ok(mom, "status").contains("from other laptops to this laptop's daemon, the last "))
        let status = try json(dad, "status")
        #expect(status["state"] as? String == "synced", "\(status)")
        let peers = try json(dad, "peers")["peers"] as? [[String: Any]] ?? []
        let old = peers.first { $0["address"] as? String == before.address }
        let new = peers.first { $0["address"] as? String == after.address }
        #expect(old?["sameDeviceAs"] as? String == after.address, "\(peers)")
        #expect(new?["sameDeviceAs"] is NSNull, "\(peers)")
        let text = try ok(dad, "peers")
        // Each address shows what its laptop holds now (issue 41: never "synced" beside "lacks 1
        // change"), and the old one is marked as the laptop's former address.
        #expect(!text.contains("lacks"), "\(text)")
        #expect(text.contains("\(before.address): has everything (last sync "), "\(text)")
        #expect(text.contains("the same laptop as \(after.address), synced since"), "\(text)")
        #expect(old?["theyLack"] as? Int == 0, "\(peers)")
    }
}

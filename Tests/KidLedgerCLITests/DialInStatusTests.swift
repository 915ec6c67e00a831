import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing

/// The owner's laptop runs the daemon; the joined laptop only ever runs `kidledger sync` (its
/// hello names no port, so the owner's laptop has no address to dial). `status` and `peers` on the
/// owner's laptop show that member as a laptop that dials in, its receipt counts for `pending` and
/// `synced`, and a revoked member is no longer counted.
@Suite("A member whose laptop only syncs in")
struct DialInStatusTests {
    static let dialsInLine = "dials in from 127.0.0.1 (runs no daemon, so this laptop cannot start a sync with it; it gets this laptop's changes when it next syncs)"

    /// The one member that dials in, as `status --json` shows it (nil when there is not exactly one).
    static func dialIn(_ status: [String: Any]) -> [String: Any]? {
        let list = status["dialsIn"] as? [[String: Any]] ?? []
        return list.count == 1 ? list[0] : nil
    }

    @Test func theOwnersStatusShowsAMemberThatOnlySyncsIn() throws {
        let mom = TestLedger(), dad = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove() }
        let daemon = try smithsServing(mom, in: group)
        #expect(try ok(mom, "status").hasPrefix("status: alone\nonly on this laptop"))
        try ok(dad, "join", try inviteCode(mom), "--name", "Dad")
        let members = try json(mom, "members")["members"] as? [[String: Any]] ?? []
        let dadKey = try #require(members.first { $0["name"] as? String == "Dad" }?["key"] as? String, "\(members)")

        // `join` runs two sessions (the join's, then one that brings the member's name), each
        // recorded when it ends on the daemon's side, which may be after `join` exits.
        let joinSessions = 2
        var status: [String: Any] = [:]
        #expect(try eventually(timeout: 30, interval: 0.2) {
            status = try json(mom, "status")
            return Self.dialIn(status)?["memberKey"] as? String == dadKey && Self.dialIn(status)?["sessions"] as? Int == joinSessions
        }, "\(status)\n\(daemon.log)")
        var dial = try #require(Self.dialIn(status))
        #expect(dial["name"] as? String == "Dad" && dial["host"] as? String == "127.0.0.1", "\(dial)")
        #expect(dial["theyLack"] as? Int == 0 && dial["weLack"] as? Int == 0, "\(dial)")
        #expect(dial["lastSyncMillis"] is NSNumber && dial["firstSyncMillis"] is NSNumber && dial["replicaId"] is String, "\(dial)")
        #expect(status["state"] as? String == "synced" && status["pendingChanges"] as? Int == 0, "\(status)")
        #expect((status["peers"] as? [Any])?.isEmpty == true, "no address to dial: \(status)")
        #expect(status["inboundSessions"] as? Int == joinSessions && status["lastInboundMillis"] is NSNumber, "\(status)")
        var text = try ok(mom, "status")
        #expect(!text.contains("no peers yet"), "\(text)")
        #expect(text.contains("status: synced\n"), "\(text)")
        #expect(text.contains("laptop of Dad (") && text.contains(Self.dialsInLine + ": has everything (last sync "), "\(text)")
        #expect(text.contains("all 2 laptops agreed at the last sync"), "\(text)")
        let peers = try ok(mom, "peers")
        #expect(!peers.contains("No peers yet") && peers.contains(Self.dialsInLine + ": has everything"), "\(peers)")
        #expect(Self.dialIn(try json(mom, "peers"))?["memberKey"] as? String == dadKey)

        // A change on Mom's laptop: Dad's laptop lacks it until it syncs in again.
        try ok(mom, "give", "Ava", "1.00")
        status = try json(mom, "status")
        #expect(status["state"] as? String == "pending" && status["pendingChanges"] as? Int == 1, "\(status)")
        #expect(Self.dialIn(status)?["theyLack"] as? Int == 1, "\(status)")
        text = try ok(mom, "status")
        #expect(text.contains("1 change on the way to a laptop that answers") && text.contains(Self.dialsInLine + ": lacks 1 change (last sync "), "\(text)")

        // Dad's laptop syncs (no daemon): both ways, and Mom's laptop counts its receipt.
        try ok(dad, "give", "Ava", "2.00")
        try ok(dad, "sync")
        #expect(try eventually(timeout: 30, interval: 0.2) {
            status = try json(mom, "status")
            return Self.dialIn(status)?["sessions"] as? Int == joinSessions + 1
        }, "\(status)\n\(daemon.log)")
        dial = try #require(Self.dialIn(status))
        #expect(dial["theyLack"] as? Int == 0 && dial["weLack"] as? Int == 0, "\(dial)")
        #expect(status["state"] as? String == "synced" && status["inboundSessions"] as? Int == joinSessions + 1, "\(status)")
        #expect(try digest(mom) == digest(dad))
        #expect(try json(dad, "status")["state"] as? String == "synced")

        // Revoked: no longer a laptop this one waits for, so the ledger is only on this laptop.
        try ok(mom, "revoke", "Dad", "--yes")
        status = try json(mom, "status")
        #expect((status["dialsIn"] as? [Any])?.isEmpty == true && status["state"] as? String == "alone", "\(status)")
        #expect(try ok(mom, "status").hasPrefix("status: alone\nonly on this laptop"))
        #expect(daemon.stop() == 0, "\(daemon.log)")
    }
}

import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
import KidLedgerLMDB
@testable import KidLedgerReplica
@testable import KidLedgerDaemon

/// The sync state (`status`, `status --json`, the page's pill) on an injected clock: every state
/// and the transitions between them, the moment after a reconnect, and revoked members.
@Suite("The sync pill's state")
struct PillStateTests {
    static let t0: Int64 = 1_795_000_000_000
    static let window = StatusReport.answeredWindowMillis
    static let me = ReplicaID(1), dadReplica = ReplicaID(2), dadOther = ReplicaID(3)
    static let dadKey = [UInt8](repeating: 0xDA, count: 32), gmaKey = [UInt8](repeating: 0x6A, count: 32)
    /// What this laptop holds: 10 changes of its own.
    static let holding: VersionVector = [me: 10]

    static func laptop(_ key: [UInt8], synced: Int64, holds: UInt64, unreachable: Bool = false) -> StatusReport.Laptop {
        StatusReport.Laptop(memberKey: key, name: "Dad", lastSyncMillis: synced, last: SyncOutcome(receipt: [me: holds]), unreachable: unreachable)
    }

    static func state(_ laptops: [StatusReport.Laptop], at now: Int64, attention: Bool = false) -> StatusReport.SyncState {
        StatusReport.syncState(laptops, holding: holding, now: now, attention: attention).state
    }

    @Test func theWindowOutlastsSeveralDaemonRounds() {
        #expect(Self.window >= 4 * Daemon.gossipIntervalMillis)
    }

    @Test func eachStateFromWhatTheLaptopsHoldAndWhenTheyAnswered() {
        let t0 = Self.t0
        #expect(Self.state([], at: t0) == .alone, "no other laptop")
        #expect(Self.state([], at: t0, attention: true) == .attentionRequired)
        #expect(Self.state([Self.laptop(Self.dadKey, synced: t0, holds: 10)], at: t0) == .synced)
        // Holding everything, Dad's laptop is synced however long ago it last answered.
        #expect(Self.state([Self.laptop(Self.dadKey, synced: t0, holds: 10)], at: t0 + 30 * 86_400_000) == .synced)
        #expect(Self.state([Self.laptop(Self.dadKey, synced: t0, holds: 8)], at: t0 + 1_000) == .pending)
        #expect(Self.state([Self.laptop(Self.dadKey, synced: t0, holds: 8)], at: t0 + Self.window - 1) == .pending)
        #expect(Self.state([Self.laptop(Self.dadKey, synced: t0, holds: 8)], at: t0 + Self.window) == .offline, "the window ended")
        #expect(Self.state([Self.laptop(Self.dadKey, synced: t0, holds: 8, unreachable: true)], at: t0 + 1_000) == .offline,
                "an attempt failed after its last session")
        #expect(Self.state([Self.laptop(Self.dadKey, synced: t0, holds: 8)], at: t0 + 1_000, attention: true) == .attentionRequired)
    }

    @Test func aMembersOtherLaptopThatAnswersKeepsItPending() {
        let t0 = Self.t0, later = t0 + 3 * 86_400_000
        let old = Self.laptop(Self.dadKey, synced: t0, holds: 4), fresh = Self.laptop(Self.dadKey, synced: later - 1_000, holds: 10)
        let result = StatusReport.syncState([old, fresh], holding: Self.holding, now: later, attention: false)
        #expect(result.state == .pending && result.laptops.map(\.state) == [.pending, .synced])
        // Grandma's laptop is off and lacks changes; Dad's answers and lacks some too: pending wins
        // while the changes move, then offline once Dad's laptop has them.
        let gma = Self.laptop(Self.gmaKey, synced: t0, holds: 4)
        #expect(Self.state([gma, Self.laptop(Self.dadKey, synced: later - 1_000, holds: 9)], at: later) == .pending)
        #expect(Self.state([gma, fresh], at: later) == .offline)
    }

    /// Dad's laptop answers (pending), goes away (offline after the window), comes back and syncs
    /// (synced): each moment on the clock.
    @Test func transitionsOnTheClock() throws {
        let t0 = Self.t0
        var dad = PeerRecord(address: "192.168.1.21:4717", addedAtMillis: t0)
        dad.memberKey = Self.dadKey
        dad.lastAttemptMillis = t0
        dad.lastSuccessMillis = t0
        dad.peerReplica = Self.dadReplica
        dad.receipt = [Self.me: 4]
        let members = [MemberSummary(key: Self.dadKey, name: "Dad", isOwner: false, isRevoked: false, devices: [])]
        func state(_ peers: [PeerRecord], _ inbound: [InboundRecord] = [], at now: Int64) -> StatusReport.SyncState {
            let (laptops, _) = StatusReport.laptops(peers, inbound: inbound, members: members)
            return StatusReport.syncState(laptops, holding: Self.holding, now: now, attention: false).state
        }
        #expect(state([dad], at: t0 + 1_000) == .pending)
        #expect(state([dad], at: t0 + 3 * 86_400_000) == .offline)
        // A failed attempt: offline at once, not after the window.
        var failed = dad
        failed.lastAttemptMillis = t0 + 2_000
        failed.lastError = "connection refused"
        #expect(state([failed], at: t0 + 3_000) == .offline)
        // It syncs in (its daemon dialed this one) after the failed attempt: it answers again.
        var back = InboundRecord(memberKey: Self.dadKey, host: "192.168.1.21", firstMillis: t0)
        back.lastMillis = t0 + 4_000
        back.last = SyncOutcome(peerReplica: Self.dadReplica, receipt: [Self.me: 10])
        #expect(state([failed], [back], at: t0 + 5_000) == .synced)
        back.last = SyncOutcome(peerReplica: Self.dadReplica, receipt: [Self.me: 9])
        #expect(state([failed], [back], at: t0 + 5_000) == .pending)
        // A session in before the failed attempt does not make it answer.
        back.lastMillis = t0 + 1_500
        #expect(state([failed], [back], at: t0 + 5_000) == .offline)
    }

    /// Dad's laptop is off for this laptop (it lacks changes, its direct attempts fail) but Dad synced
    /// through the relay a minute ago: `relayed`, not offline; once the relay saw him last longer ago
    /// than the window, offline. Grandma's laptop off and not relayed: offline wins; one that answers: pending.
    @Test func aLaptopThatSyncsThroughTheRelayIsRelayedNotOffline() {
        let t0 = Self.t0, later = t0 + 86_400_000
        let off = Self.laptop(Self.dadKey, synced: t0, holds: 8, unreachable: true)
        let relayed = [Self.dadKey: later - 60_000]
        func state(_ laptops: [StatusReport.Laptop], at now: Int64, _ seen: [[UInt8]: Int64]) -> StatusReport.SyncState {
            StatusReport.syncState(laptops, holding: Self.holding, now: now, attention: false, relayed: seen).state
        }
        #expect(state([off], at: later, [:]) == .offline)
        #expect(state([off], at: later, relayed) == .relayed)
        #expect(StatusReport.syncState([off], holding: Self.holding, now: later, attention: false, relayed: relayed).laptops.map(\.state) == [.relayed])
        #expect(state([off], at: later - 60_000 + Self.window, relayed) == .offline, "the relay saw Dad longer ago than the window")
        #expect(state([Self.laptop(Self.dadKey, synced: t0, holds: 10, unreachable: true)], at: later, relayed) == .synced, "it lacks nothing")
        #expect(state([off], at: later, [Self.gmaKey: later - 60_000]) == .offline, "another member synced through the relay")
        var gma = Self.laptop(Self.gmaKey, synced: t0, holds: 4)
        #expect(state([off, gma], at: later, relayed) == .offline, "Grandma's laptop is off and not relayed")
        gma.lastSyncMillis = later - 1_000
        #expect(state([off, gma], at: later, relayed) == .pending)
        #expect(StatusReport.syncState([off], holding: Self.holding, now: later, attention: true, relayed: relayed).state == .attentionRequired)
    }

    @Test func revokedMembersAndAddressesThatNeverSyncedAreNotCounted() {
        let t0 = Self.t0
        var dad = PeerRecord(address: "192.168.1.21:4717", addedAtMillis: t0)
        dad.memberKey = Self.dadKey
        dad.lastSuccessMillis = t0
        dad.receipt = [Self.me: 1]
        let typo = PeerRecord(address: "192.168.1.99:4717", addedAtMillis: t0)
        let revoked = [MemberSummary(key: Self.dadKey, name: "Dad", isOwner: false, isRevoked: true, devices: [])]
        let (laptops, dialsIn) = StatusReport.laptops([dad, typo], inbound: [], members: revoked)
        #expect(laptops.isEmpty && dialsIn.isEmpty)
        #expect(StatusReport.syncState(laptops, holding: Self.holding, now: t0, attention: false).state == .alone)
    }

    @Test func agoReadsAsThePageReadsIt() {
        let t0 = Self.t0
        #expect(Render.ago(t0, now: t0 + 10_000) == "just now")
        #expect(Render.ago(t0, now: t0 + 4 * 60_000) == "4 minutes ago")
        #expect(Render.ago(t0, now: t0 + 3 * 3_600_000) == "3 hours ago")
        #expect(Render.ago(t0, now: t0 + 3 * 86_400_000) == "3 days ago")
        #expect(Render.ago(t0 + 5_000, now: t0) == "just now", "a clock set back")
    }

    /// The household on one laptop reads `alone`; a second address of one laptop reconnects (the
    /// router gave it a new address) with everything, while its old address's receipt lacks 6
    /// changes: `status` says synced and no line says "lacks"; an hour without it after a new
    /// change reads offline with when it was last seen.
    @Test func statusTextAndJSONAgreeAtTheReconnectMoment() throws {
        try withLedger { l in
            l.ok("init", "Smiths")
            l.ok("child", "add", "Ava")
            var status = try statusJSON(l)
            #expect(status["state"] as? String == "alone", "\(status)")
            #expect(l.ok("status").contains("status: alone\nonly on this laptop"))
            for _ in 0..<6 { l.ok("give", "Ava", "1") }
            let other = ReplicaID(0xD0D)
            var vector: VersionVector = [:]
            try withReplica(l) { replica in
                vector = try replica.versionVector()
                let mine = try #require(vector[replica.replicaID])
                try #require(try replica.device.addPeer("10.0.0.5:4717"))
                try replica.device.updatePeer("10.0.0.5:4717") {
                    $0.peerReplica = other
                    $0.lastAttemptMillis = l.millis - 86_400_000
                    $0.lastSuccessMillis = l.millis - 86_400_000
                    $0.receipt = [replica.replicaID: mine - 6]
                }
            }
            #expect(try statusJSON(l)["state"] as? String == "offline", "lacks 6, last answered a day ago")
            #expect(l.ok("status").contains("the laptop at 10.0.0.5:4717: offline, last seen 24 hours ago ("))
            try withReplica(l) { replica in
                try #require(try replica.device.addPeer("10.0.0.6:4717"))
                try replica.device.updatePeer("10.0.0.6:4717") {
                    $0.peerReplica = other
                    $0.lastAttemptMillis = l.millis
                    $0.lastSuccessMillis = l.millis
                    $0.receipt = vector
                }
            }
            status = try statusJSON(l)
            #expect(status["state"] as? String == "synced" && status["pendingChanges"] as? Int == 0, "\(status)")
            let peers = status["peers"] as? [[String: Any]] ?? []
            #expect(peers.count == 2 && peers.allSatisfy { $0["theyLack"] as? Int == 0 }, "\(peers)")
            let laptops = status["laptops"] as? [[String: Any]] ?? []
            #expect(laptops.count == 1 && laptops[0]["state"] as? String == "synced", "\(laptops)")
            let text = l.ok("status")
            #expect(text.hasPrefix("status: synced\n") && !text.contains("lacks"), "\(text)")

            // A change, and an hour without an answer: offline, with when it was last seen.
            l.ok("give", "Ava", "1")
            l.setClock(l.millis + 3_600_000)
            status = try statusJSON(l)
            #expect(status["state"] as? String == "offline" && status["pendingChanges"] as? Int == 1, "\(status)")
            l.setClock(l.millis - 60_000)  // statusJSON advanced it one step
            let offline = l.ok("status")
            #expect(offline.hasPrefix("status: offline\n1 change waiting for a laptop that has not answered recently"), "\(offline)")
            #expect(offline.contains("the laptop at 10.0.0.5:4717: offline, last seen 1 hour ago ("), "\(offline)")
        }
    }

    /// Runs `body` on the ledger's replica (opened and closed around it, so commands run in between).
    func withReplica(_ l: TestLedger, _ body: (Replica) throws -> Void) throws {
        let ctx = Context(home: l.home, json: false, console: BufferConsole(), clock: FixedClock(millis: l.millis))
        let replica = try ctx.openReplica()
        defer { (replica.store as? LMDBEnvironment)?.close() }
        try body(replica)
    }

    func statusJSON(_ l: TestLedger) throws -> [String: Any] {
        let text = l.ok("status", "--json")
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }
}

@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerInMemory
import KidLedgerTestSupport

@Suite("Device-local state: peers, invitations, settings")
struct DeviceStateTests {
    @Test("peers: added once, updated, removed; an update of a removed peer leaves it removed")
    func peers() throws {
        let clock = TestClock(3)
        let device = DeviceState(store: MemoryStore(), clock: clock)
        #expect(try device.peers().isEmpty)
        #expect(try device.addPeer("b:2"))
        clock.millis = 4
        #expect(try device.addPeer("a:1"))
        #expect(try !device.addPeer("b:2"))
        #expect(try device.peers() == [PeerRecord(address: "a:1", addedAtMillis: 4), PeerRecord(address: "b:2", addedAtMillis: 3)])

        try device.updatePeer("a:1") { p in
            p.lastAttemptMillis = 9
            p.lastError = "refused"
        }
        let updated = try #require(try device.peers().first)
        #expect(updated.lastAttemptMillis == 9 && updated.lastError == "refused" && updated.addedAtMillis == 4)

        #expect(try device.removePeer("a:1"))
        #expect(try !device.removePeer("a:1"))
        try device.updatePeer("a:1") { $0.lastAttemptMillis = 10 }
        #expect(try device.peers().map(\.address) == ["b:2"])
    }

    static func key(_ n: UInt8) -> [UInt8] { Array(repeating: n, count: 32) }

    @Test("short codes: the lowest free slot, 5 tries counted down, gone with their invitation, expired, or all 16 slots taken")
    func shortInvitations() throws {
        let clock = TestClock(1_000)
        let device = DeviceState(store: MemoryStore(), clock: clock)
        #expect(try device.addInvite(key: Self.key(1), expiresAtMillis: 5_000))
        let first = try device.addShortInvite(invitationKey: Self.key(1), code: "KL1-one", expiresAtMillis: 5_000) { Self.key(100 + $0) }
        let second = try device.addShortInvite(invitationKey: Self.key(2), code: "KL1-two", expiresAtMillis: 2_000) { Self.key(100 + $0) }
        #expect(first == 0 && second == 1)
        #expect(try device.openShortInvites().map(\.slot) == [0, 1] && device.openShortInvites()[1].password == Self.key(101))
        #expect(try device.shortInvite(slot: 0)?.code == "KL1-one" && device.shortInvite(slot: 5) == nil)
        for left in (0..<DeviceState.shortCodeTries).reversed() {
            let taken = try #require(try device.takeShortTry(slot: 1))
            #expect(taken.password == Self.key(101) && taken.triesLeft == left)
        }
        #expect(try device.takeShortTry(slot: 1) == nil && device.takeShortTry(slot: 7) == nil)
        #expect(try device.openShortInvites().map(\.slot) == [0], "no try left: not announced")
        // Using the invitation (its long code) takes its short code with it.
        #expect(try device.consumeInvite(key: Self.key(1)))
        #expect(try device.shortInvite(slot: 0) == nil)
        // Expired ones are not offered and their slots are reused.
        clock.millis = 3_000
        #expect(try device.takeShortTry(slot: 1) == nil)
        for n in 0..<16 {
            #expect(try device.addShortInvite(invitationKey: Self.key(UInt8(n)), code: "KL1-\(n)", expiresAtMillis: 9_000) { _ in Self.key(7) } == UInt8(n))
        }
        #expect(try device.addShortInvite(invitationKey: Self.key(20), code: "KL1-full", expiresAtMillis: 9_000) { _ in Self.key(7) } == nil)
        try device.removeShortInvite(slot: 4)
        #expect(try device.openShortInvites().count == 15)
    }

    @Test("an invitation works once, until it expires; expired ones are swept; 16 open at most")
    func invitations() throws {
        let clock = TestClock(1_000)
        let store = MemoryStore()
        let device = DeviceState(store: store, clock: clock)
        #expect(try device.addInvite(key: Self.key(1), expiresAtMillis: 2_000))
        #expect(try device.addInvite(key: Self.key(2), expiresAtMillis: 1_500))
        #expect(try device.addInvite(key: Self.key(3), expiresAtMillis: 5_000))
        #expect(try device.openInvites().map(\.key) == [Self.key(1), Self.key(2), Self.key(3)])
        #expect(try !device.consumeInvite(key: Self.key(9)))
        #expect(try device.consumeInvite(key: Self.key(1)))
        #expect(try !device.consumeInvite(key: Self.key(1)))
        clock.millis = 2_000
        #expect(try device.openInvites().map(\.key) == [Self.key(3)])
        #expect(try !device.consumeInvite(key: Self.key(2)))
        // key 2 expired and was swept; key 3 is still open.
        #expect(try store.read { r in try r.count(Tables.invites) } == 1)
        #expect(try device.consumeInvite(key: Self.key(3)))

        // At most 16 open: the 17th is not recorded until one is used or expires.
        for n in 0..<UInt8(DeviceState.openInvitesMax) { #expect(try device.addInvite(key: Self.key(100 + n), expiresAtMillis: 9_000 + Int64(n))) }
        #expect(try !device.addInvite(key: Self.key(99), expiresAtMillis: 9_000))
        #expect(try device.openInvites().count == DeviceState.openInvitesMax)
        #expect(try device.consumeInvite(key: Self.key(100)))
        #expect(try device.addInvite(key: Self.key(99), expiresAtMillis: 9_000))
        clock.millis = 9_005
        #expect(try device.openInvites().count == 11)
    }

    @Test("settings: set, replaced, removed with nil")
    func settings() throws {
        let device = DeviceState(store: MemoryStore(), clock: FixedClock(millis: 0))
        #expect(try device.setting("listen") == nil)
        try device.setSetting("listen", "0.0.0.0:7000")
        try device.setSetting("listen", "127.0.0.1:7001")
        #expect(try device.setting("listen") == "127.0.0.1:7001")
        try device.setSetting("listen", nil)
        #expect(try device.setting("listen") == nil)
    }

    @Test("inbound sessions: counted in all and per member, the first time kept, the last host, time and outcome taken")
    func inboundSessions() throws {
        let clock = TestClock(1_000)
        let store = MemoryStore()
        let device = DeviceState(store: store, clock: clock)
        #expect(try device.inbound().isEmpty)
        #expect(try device.inboundTotals() == (0, 0))
        let early = SyncOutcome(peerReplica: ReplicaID(5), receipt: [ReplicaID(5): 2], childrenAgreeing: 1)
        try device.recordInbound(member: Self.key(8), from: "10.0.0.2", early)
        clock.millis = 2_000
        try device.recordInbound(member: Self.key(7), from: "10.0.0.3", SyncOutcome())
        clock.millis = 3_000
        let late = SyncOutcome(peerReplica: ReplicaID(5), receipt: [ReplicaID(5): 4, ReplicaID(6): 1], childrenAgreeing: 1,
                               childrenDiffering: [RecordID(high: 1, low: 2)])
        let stored = try device.recordInbound(member: Self.key(8), from: "10.0.0.4", late)

        var expected = InboundRecord(memberKey: Self.key(8), host: "10.0.0.4", firstMillis: 1_000)
        expected.lastMillis = 3_000
        expected.sessions = 2
        expected.last = late
        #expect(stored == expected)
        var other = InboundRecord(memberKey: Self.key(7), host: "10.0.0.3", firstMillis: 2_000)
        other.sessions = 1
        #expect(try device.inbound() == [other, expected], "by member key")
        #expect(try device.inboundTotals() == (3, 3_000))
        // The totals are the settings `status` read before members were recorded.
        #expect(try device.setting(DeviceState.inboundSessionsSetting) == "3" && device.setting(DeviceState.lastInboundSetting) == "3000")
        // A row that does not decode is reported, not skipped.
        try store.write { w in try w.put(Tables.inbound, Self.key(9), [1, 200]) }
        #expect(throws: LedgerError.self) { try device.inbound() }
    }

    @Test("not replicated: the digest, vector and change log stay as they were")
    func notReplicated() throws {
        let r = try householdWithChildren(["Ava"], seed: 21)
        let digest = try r.digest()
        let vector = try r.versionVector()
        let log = try r.changeLog()
        try r.device.addPeer("a:1")
        try r.device.updatePeer("a:1") { $0.lastSuccessMillis = 5 }
        try r.device.addInvite(key: Self.key(1), expiresAtMillis: 5)
        try r.device.setSetting("listen", "a:1")
        try r.device.recordInbound(member: Self.key(2), from: "a", SyncOutcome(receipt: vector))
        #expect(try r.digest() == digest)
        #expect(try r.versionVector() == vector)
        #expect(try r.changeLog() == log)
    }

    /// A peer record as the store held it before `DeviceState` (written byte by byte: address,
    /// added, last attempt, last success (zigzag varints), error, peer replica (8), receipt,
    /// children agreeing and differing).
    static let storedPeer: [UInt8] = [3] + Array("h:1".utf8) + [6, 10, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8,
                                      1, 0, 0, 0, 0, 0, 0, 0, 9, 7, 2,
                                      1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    static var expectedPeer: PeerRecord {
        var p = PeerRecord(address: "h:1", addedAtMillis: 3)
        p.lastAttemptMillis = 5
        p.lastSuccessMillis = 4
        p.peerReplica = ReplicaID(0x0102_0304_0506_0708)
        p.receipt = [ReplicaID(9): 7]
        p.childrenAgreeing = 2
        p.childrenDiffering = [RecordID(high: 1, low: 2)]
        return p
    }
    /// An invitation's expiry, 2 000 ms, as a big-endian integer with the sign bit flipped.
    static let storedExpiry: [UInt8] = [0x80, 0, 0, 0, 0, 0, 0x07, 0xD0]

    @Test("a home written in the old layout reads the same after reopening, and is written in it (peers with the discovery fields added)")
    func storedLayout() throws {
        // Today's tables and bytes, put directly, read back through a reopened replica.
        let old = MemoryStore()
        _ = try makeReplica(seed: 5, store: old)
        try old.write { w in
            try w.put(Tables.peers, Array("h:1".utf8), Self.storedPeer)
            try w.put(Tables.invites, SHA256.hash([7]), Self.storedExpiry)
            try w.put(Tables.settings, Array("listen".utf8), Array("h:2".utf8))
        }
        let reopened = try makeReplica(seed: 6, clock: FixedClock(millis: 2_000), store: old).device
        #expect(try reopened.peers() == [Self.expectedPeer])
        #expect(try reopened.setting("listen") == "h:2")
        // An invitation row of version 1 (the secret's SHA-256, an expiry alone) no longer opens
        // a join: it is ignored, and swept by the next invitation change.
        #expect(try reopened.openInvites().isEmpty)
        #expect(try !reopened.consumeInvite(key: SHA256.hash([7])))
        #expect(try old.read { r in try r.count(Tables.invites) } == 0)

        // Writing through the new type gives the same bytes under the same keys.
        let fresh = MemoryStore()
        let device = DeviceState(store: fresh, clock: FixedClock(millis: 3))
        try device.addPeer("h:1")
        let expected = Self.expectedPeer
        try device.updatePeer("h:1") { $0 = expected }
        try device.addInvite(key: Self.key(7), expiresAtMillis: 2_000)
        try device.setSetting("listen", "h:2")
        let stored = try fresh.read { r in
            (peer: try r.get(Tables.peers, Array("h:1".utf8)), invite: try r.get(Tables.invites, Self.key(7)),
             setting: try r.get(Tables.settings, Array("listen".utf8)),
             counts: [try r.count(Tables.peers), try r.count(Tables.invites), try r.count(Tables.settings)])
        }
        // Since LAN discovery a peer record ends with three more fields: no member key yet (0), not
        // learned from an announcement (0), never announced (zigzag 0).
        #expect(stored.peer == Self.storedPeer + [0, 0, 0])
        #expect(stored.invite == [2] + Self.storedExpiry)
        #expect(stored.setting == Array("h:2".utf8))
        #expect(stored.counts == [1, 1, 1])
    }
}

/// Issue 22, points 1 and 3: addresses learned from LAN announcements.
@Suite("Device-local state: addresses learned by discovery")
struct LearnedAddressTests {
    static let mom = [UInt8](repeating: 7, count: 32), dad = [UInt8](repeating: 8, count: 32)

    @Test("a new address is learned once; a typed one keeps its record and gets the key")
    func learnedOnce() throws {
        let clock = TestClock(1_000)
        let device = DeviceState(store: MemoryStore(), clock: clock)
        try device.addPeer("10.0.0.2:4717")
        #expect(try device.learnAddress("10.0.0.3:4717", member: Self.mom))
        #expect(try !device.learnAddress("10.0.0.3:4717", member: Self.mom))
        #expect(try !device.learnAddress("10.0.0.2:4717", member: Self.dad))
        let peers = try device.peers()
        let typed = try #require(peers.first { $0.address == "10.0.0.2:4717" })
        let learned = try #require(peers.first { $0.address == "10.0.0.3:4717" })
        #expect(!typed.discovered && typed.memberKey == Self.dad && typed.announcedAtMillis == 1_000)
        #expect(learned.discovered && learned.memberKey == Self.mom && learned.addedAtMillis == 1_000)
    }

    @Test("an address change replaces the old learned address once it is quiet; typed ones stay")
    func addressChange() throws {
        let clock = TestClock(1_000)
        let device = DeviceState(store: MemoryStore(), clock: clock)
        try device.addPeer("10.0.0.9:4717")
        _ = try device.learnAddress("10.0.0.9:4717", member: Self.mom)
        _ = try device.learnAddress("10.0.0.3:4717", member: Self.mom)
        _ = try device.learnAddress("10.0.0.4:4717", member: Self.dad)
        // Two interfaces at once: both kept while both announce.
        clock.millis += 10_000
        #expect(try device.learnAddress("10.0.0.5:4717", member: Self.mom))
        #expect(try device.peers().count == 4)
        // The router renumbered Mom's laptop: the quiet old address goes, Dad's stays.
        clock.millis += DeviceState.learnedAliasKeepMillis + 1
        #expect(try device.learnAddress("10.0.0.6:4717", member: Self.mom))
        #expect(Set(try device.peers().map(\.address)) == ["10.0.0.9:4717", "10.0.0.4:4717", "10.0.0.6:4717"])
        // A week without a word: any learned address goes, the typed one stays.
        clock.millis += DeviceState.learnedAddressKeepMillis + 1
        _ = try device.learnAddress("10.0.0.7:4717", member: Self.mom)
        #expect(Set(try device.peers().map(\.address)) == ["10.0.0.9:4717", "10.0.0.7:4717"])
    }

    @Test("an address learned from a session is not 'discovered' until an announcement names it; a typed one stays typed")
    func learnedFromASession() throws {
        let clock = TestClock(1_000)
        let device = DeviceState(store: MemoryStore(), clock: clock)
        try device.addPeer("10.0.0.2:4717")
        #expect(try device.learnAddress("10.0.0.3:4717", member: Self.mom, from: .session))
        #expect(try !device.learnAddress("10.0.0.2:4717", member: Self.dad, from: .session))
        var peers = try device.peers()
        #expect(peers.first { $0.address == "10.0.0.3:4717" }.map { ($0.learnedFrom, $0.discovered, $0.isLearned) } ?? (.typed, true, false) == (.session, false, true))
        #expect(peers.first { $0.address == "10.0.0.2:4717" }?.learnedFrom == .typed)
        // An announcement names it: discovery found it. A later session does not undo that.
        #expect(try device.learnAddress("10.0.0.3:4717", member: Self.mom, from: .announcement))
        #expect(try !device.learnAddress("10.0.0.3:4717", member: Self.mom, from: .announcement))
        #expect(try !device.learnAddress("10.0.0.3:4717", member: Self.mom, from: .session))
        _ = try device.learnAddress("10.0.0.2:4717", member: Self.dad, from: .announcement)
        peers = try device.peers()
        #expect(peers.first { $0.address == "10.0.0.3:4717" }?.learnedFrom == .announcement)
        #expect(peers.first { $0.address == "10.0.0.2:4717" }?.learnedFrom == .typed)
        for source in [AddressSource.typed, .announcement, .session] {
            var record = PeerRecord(address: "a:1", addedAtMillis: 3)
            record.memberKey = Self.mom
            record.learnedFrom = source
            #expect(try PeerRecord.decode(record.encoded()).learnedFrom == source)
        }
    }

    @Test("a record written before discovery decodes, and the new fields survive a round trip")
    func recordCompatibility() throws {
        var record = PeerRecord(address: "a:1", addedAtMillis: 3)
        record.memberKey = Self.mom
        record.discovered = true
        record.announcedAtMillis = 99
        #expect(try PeerRecord.decode(record.encoded()) == record)
        let old = PeerRecord(address: "a:1", addedAtMillis: 3)
        let legacy = Array(old.encoded().dropLast(1 + 1 + 1))  // the empty key, the flag, the zero time
        #expect(try PeerRecord.decode(legacy) == old)
    }
}

/// A damaged invitation row of this version is reported, not passed off as "no invitation".
@Suite("Device-local state: damaged invitation rows")
struct DamagedInvitationRowTests {
    @Test func aDamagedRowOfThisVersionIsCorruptionAndAnOlderOneIsSwept() throws {
        let store = MemoryStore()
        let device = DeviceState(store: store, clock: FixedClock(millis: 1_000))
        try store.write { w in try w.put(Tables.invites, [UInt8](repeating: 1, count: 32), [0x80, 0, 0, 0, 0, 0, 0x07, 0xD0]) }
        #expect(try device.openInvites().isEmpty)  // an older version's row: ignored
        try store.write { w in try w.put(Tables.invites, [UInt8](repeating: 2, count: 32), [DeviceState.inviteRowVersion, 0x80, 0]) }
        #expect(throws: LedgerError.self) { try device.openInvites() }
        try store.write { w in
            try w.delete(Tables.invites, [UInt8](repeating: 2, count: 32))
            try w.put(Tables.shortInvites, [3], [DeviceState.shortRowVersion, 0x80])
        }
        #expect(throws: LedgerError.self) { try device.openShortInvites() }
    }
}

import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerTransport
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerDaemon

/// Issue 22: the pure parts of discovery, on an injected clock and made-up interfaces (no
/// sockets, no sleeps): when it announces, when it joins the IPv6 group again, which members get
/// a box, and the order a device's addresses are dialled in.
@Suite("LAN discovery: schedule, interfaces, recipients, dial order")
struct DiscoveryUnitTests {
    static func interface(_ name: String, index: UInt32, ipv4: [String] = [], ipv6: [String] = [], up: Bool = true) -> LocalInterface {
        LocalInterface(name: name, index: index, isUsable: up, ipv4: ipv4, broadcast: ipv4.isEmpty ? [] : ["10.0.0.255"],
                       ipv6: ipv6, multicast: true)
    }

    @Test func theGroupIsJoinedOnEveryInterfaceWithIPv6AndAgainAfterAReconnect() {
        var watch = InterfaceWatch()
        let wifi = Self.interface("wlan0", index: 3, ipv4: ["10.0.0.7"], ipv6: ["fe80::7%wlan0"])
        let cable = Self.interface("eth0", index: 2, ipv4: ["10.0.1.7"])  // no IPv6: broadcast only
        var change = watch.update([wifi, cable], multicast: true)
        #expect(change == .init(addressesChanged: true, first: true, join: [3], leave: []))
        #expect(watch.update([wifi, cable], multicast: true) == .init(addressesChanged: false, first: false, join: [], leave: []))
        // Wi-Fi drops: leave. It reconnects under a new index with a new address: join again, announce.
        var down = wifi
        down.isUsable = false
        change = watch.update([down, cable], multicast: true)
        #expect(change.leave == [3] && change.join.isEmpty && change.addressesChanged)
        let back = Self.interface("wlan0", index: 5, ipv4: ["10.0.0.8"], ipv6: ["fe80::8%wlan0"])
        change = watch.update([back, cable], multicast: true)
        #expect(change.join == [5] && change.leave.isEmpty && change.addressesChanged)
        // Same index, new IPv6 address (a reconnect that kept the index): joined again.
        let renumbered = Self.interface("wlan0", index: 5, ipv4: ["10.0.0.8"], ipv6: ["fe80::9%wlan0"])
        change = watch.update([renumbered, cable], multicast: true)
        #expect(change.join == [5] && change.leave.isEmpty)
        // No IPv6 socket (a host without IPv6, or an IPv4 listener): nothing joined, addresses still watched.
        var v4only = InterfaceWatch()
        change = v4only.update([wifi, cable], multicast: false)
        #expect(change.join.isEmpty && change.addressesChanged)
    }

    @Test func announcementsFollowTheirJitteredIntervalAndInterfacesAreCheckedEveryTwoSeconds() {
        var schedule = AnnounceSchedule()
        var now: Int64 = 50_000
        #expect(schedule.announceDue(now: now) && schedule.checkDue(now: now))
        schedule.sent(now: now, jitter: 1_500)
        #expect(!schedule.checkDue(now: now + 1_999) && schedule.checkDue(now: now + 2_000))
        #expect(!schedule.announceDue(now: now + 11_499) && schedule.announceDue(now: now + 11_500))
        now += 11_500
        schedule.sent(now: now, jitter: -99_999)  // clamped to the spread
        #expect(!schedule.announceDue(now: now + 7_999) && schedule.announceDue(now: now + 8_000))
    }

    @Test func aFullHouseholdGetsBoxesForTheMemberAnsweredFirstThenTheOnesMetLast() throws {
        let me = try Identity(seed: Array(repeating: 1, count: 32))
        let household = RecordID(bytes: Array(repeating: 2, count: 16))
        let others = try (0..<20).map { try Identity(seed: Array(repeating: UInt8(10 + $0), count: 32)).publicKey.bytes }
        let keys = others.compactMap { AnnouncementKeys(identity: me, member: $0, household: household) }
        #expect(keys.count == 20)
        #expect(Discovery.recipients(Array(keys.prefix(16)), peers: [], first: nil).count == 16)
        var peer = PeerRecord(address: "10.0.0.9:4717", addedAtMillis: 1)
        peer.memberKey = others[19]
        peer.lastSuccessMillis = 500
        let chosen = Discovery.recipients(keys, peers: [peer], first: others[18]).map(\.member)
        #expect(chosen.count == Announcement.recipientsMax)
        #expect(Array(chosen.prefix(2)) == [others[18], others[19]] && Array(chosen.dropFirst(2)) == Array(others.prefix(14)))
    }

    /// The IPv4 and IPv6 copies of one announcement carry one stamp: both are heard (a renumbered
    /// laptop is found at its new IPv4 address even when the IPv6 copy came first); a replay of
    /// an older or the same stamp in one family is dropped, and members are kept apart.
    @Test func bothCopiesOfAnAnnouncementAreHeardAndReplaysAreNot() {
        var fresh = AnnouncementFreshness()
        let mom = [UInt8](repeating: 1, count: 32), gran = [UInt8](repeating: 2, count: 32)
        let heard = [
            fresh.accept(member: mom, host: "fe80::79:1%veth1", sentAtMillis: 100),
            fresh.accept(member: mom, host: "10.79.0.11", sentAtMillis: 100),
            fresh.accept(member: mom, host: "10.79.0.11", sentAtMillis: 100),
            fresh.accept(member: mom, host: "10.79.0.99", sentAtMillis: 99),
            fresh.accept(member: mom, host: "fe80::66", sentAtMillis: 100),
            fresh.accept(member: gran, host: "10.79.0.11", sentAtMillis: 100),
            fresh.accept(member: mom, host: "10.79.0.11", sentAtMillis: 101),
        ]
        #expect(heard == [true, true, false, false, false, true, true])
    }

    /// Issue 22: a typed address is an override: tried first for its laptop, whatever was learned.
    @Test func aTypedAddressIsDialledFirstForItsLaptop() {
        let member = [UInt8](repeating: 7, count: 32)
        var peers: [PeerRecord] = (1...5).map { n in
            var p = PeerRecord(address: "10.0.0.\(n):4717", addedAtMillis: 1)
            p.memberKey = member
            p.learnedFrom = n % 2 == 0 ? .session : .announcement
            p.announcedAtMillis = Int64(100 + n)
            p.lastSuccessMillis = n == 3 ? 900 : 0
            return p
        }
        var typed = PeerRecord(address: "192.168.1.20:4717", addedAtMillis: 1)
        typed.memberKey = member
        peers.append(typed)
        let groups = SyncDriver.dialGroups(peers)
        #expect(groups.count == 1)
        #expect(groups.first?.addresses.prefix(Daemon.addressesPerDialMax) == ["192.168.1.20:4717", "10.0.0.3:4717", "10.0.0.5:4717", "10.0.0.4:4717"])
    }
}

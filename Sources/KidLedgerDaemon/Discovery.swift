#if canImport(Glibc)
import Glibc
#endif
import Foundation
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerTransport
import KidLedgerSecurity
import Synchronization
import KidLedgerSystem

/// LAN discovery (issue 22, point 1): the daemon announces on the local network where it accepts
/// peers, and learns where the other members' daemons do, so nobody types addresses at home.
///
/// About every ``announceIntervalMillis`` (jittered, and at once when this laptop's addresses
/// change) it sends one ``Announcement`` by UDP to port ``portDefault`` (`--discovery-port`): an
/// IPv4 broadcast on each interface that is up and, when the daemon accepts peers over IPv6 (the
/// default `--listen :PORT` is dual-stack `[::]`), an IPv6 multicast to ``group`` on each
/// interface with IPv6, like Syncthing's local discovery. It listens on the same port, and joins
/// the group on every such interface, again whenever the interfaces change (a Wi-Fi reconnect:
/// ``InterfaceWatch``). The packet holds one box per other current member, sealed under the key
/// this laptop shares with that member (``AnnouncementKeys``): a revoked member gets none. A
/// packet that opens under one of this laptop's keys with a current member teaches "that
/// member's daemon accepts peers at the packet's source address, on the announced port"
/// (``DeviceState/learnAddress(_:member:from:)``); a new address makes the gossip loop dial that
/// member at once. Packets of other households, strangers, revoked members and replays of older
/// packets of a member are dropped without a word, and at most ``packetsPerSecondMax`` a second
/// are opened.
///
/// A daemon listening on loopback only announces nowhere (nothing off the machine could reach it)
/// and listens on 127.0.0.1, unless `--announce-to` names where to send (unicast: a laptop on
/// another subnet, or tests on one machine).
public final class Discovery: Sendable {
    /// The UDP port announcements go to and are heard on.
    public static let portDefault: UInt16 = 4717
    /// The IPv6 link-local multicast group announcements go to.
    public static let group = "ff12::4717"
    /// How often a daemon announces itself, on average: each interval is drawn from
    /// ``announceIntervalMillis`` ± ``announceJitterMillis`` (so the rhythm of one laptop's packets
    /// does not carry over from one of its addresses to the next).
    static let announceIntervalMillis: Int64 = 10_000
    /// The spread of an announcement interval either side of ``announceIntervalMillis``.
    static let announceJitterMillis: Int64 = 2_000
    /// How often an open short code is announced (``InvitationAnnouncement``).
    static let invitationIntervalMillis: Int64 = 1_000
    /// How often the interfaces are checked for a changed address (which announces at once) when
    /// the kernel can't tell (no netlink); with netlink (``AddressWatch``) they are checked when it
    /// tells of a change, and on this interval only as a backstop.
    static let interfaceCheckMillis: Int64 = 2_000
    /// The backstop interval of the interface check while netlink tells of changes.
    static let interfaceCheckWatchedMillis: Int64 = 60_000
    /// The most packets opened per second per socket; more are dropped (a flood costs little).
    static let packetsPerSecondMax = 200
    /// Packets stamped further than this from this laptop's clock are dropped (old replays).
    static let clockWindowMillis: Int64 = 24 * 3_600_000

    /// What `serve` asked for.
    public struct Settings: Sendable {
        /// The UDP port.
        public var port: UInt16 = Discovery.portDefault
        /// Where to send announcements instead of broadcasting (`--announce-to`), or nil.
        public var targets: [PeerAddress]?
        /// Whether the daemon listens on loopback only.
        public var loopbackOnly = false
        /// Whether the daemon accepts peers over IPv6 (listens on `[::]`, the default, or an IPv6
        /// address): only then does it announce by IPv6 multicast (a peer dials the address an
        /// announcement came from).
        public var ipv6 = false

        public init() {}
    }

    let settings: Settings
    let household: RecordID
    let identity: Identity
    /// The TCP port the daemon accepts peers on (announced).
    let tcpPort: UInt16
    let sockets: [UDPSocket]
    let log: @Sendable (String) -> Void
    /// Opens the replica (each thread its own).
    public let makeReplica: @Sendable () throws -> Replica
    /// Called with a member key whose daemon was found at a new address.
    let found: @Sendable ([UInt8]) -> Void
    /// The newest announcement times seen (replays of older ones are dropped).
    private let newest = Mutex(AnnouncementFreshness())
    /// The keys shared with each member met so far (an X25519 per member, computed once).
    private let keyCache = Mutex<[[UInt8]: AnnouncementKeys]>([:])
    /// Wakes the announcing thread for ``stop()``.
    private let wakeup = Wakeup()
    private let threads = Atomic<Int>(0)

    /// Starts nothing yet; nil (with a log line saying why) when discovery can't run: a household
    /// without an owner, or no socket could be bound. A family of addresses that can't be bound
    /// (no IPv6 on this host) is a logged note: the other one still works.
    init?(settings: Settings, household: Household, identity: Identity, tcpPort: UInt16,
          log: @escaping @Sendable (String) -> Void, makeReplica: @escaping @Sendable () throws -> Replica,
          found: @escaping @Sendable ([UInt8]) -> Void) {
        guard household.signature.count == 64 else {
            log("discovery off: this household has no owner (no signed genesis), so no members to announce to; add peers with `kidledger peer add`")
            return nil
        }
        var sockets: [UDPSocket] = []
        var problems: [String] = []
        let hosts = settings.loopbackOnly ? ["127.0.0.1"] : settings.ipv6 ? ["0.0.0.0", "::"] : ["0.0.0.0"]
        for host in hosts {
            do {
                sockets.append(try UDPSocket(binding: PeerAddress(host: host, port: settings.port)))
            } catch {
                problems.append("\(PeerAddress(host: host, port: settings.port)): \(error)")
            }
        }
        guard !sockets.isEmpty else {
            log("discovery off: cannot listen on UDP port \(settings.port) (\(problems.joined(separator: "; "))); add peers with `kidledger peer add`")
            return nil
        }
        for problem in problems { log("discovery: cannot listen on \(problem) (the other family of addresses still works)") }
        self.settings = settings
        self.household = household.id
        self.identity = identity
        self.tcpPort = tcpPort
        self.sockets = sockets
        self.log = log
        self.makeReplica = makeReplica
        self.found = found
    }

    /// Starts the announcing thread and one listening thread per socket; they end once `stopping`
    /// says so (within about a quarter of a second).
    public func start(stopping: @escaping @Sendable () -> Bool) {
        let where_ = settings.targets.map { "to " + $0.map(\.description).joined(separator: ", ") }
            ?? (settings.loopbackOnly ? "nowhere (this daemon listens on loopback only; --announce-to sends elsewhere)"
                : settings.ipv6 && sockets.contains(where: { $0.family == AF_INET6 })
                    ? "by IPv4 broadcast and IPv6 multicast (\(Self.group)) on every interface"
                    : "by IPv4 broadcast on every interface")
        log("discovery: listening on UDP port \(settings.port), announcing \(where_)")
        for socket in sockets {
            threads.add(1, ordering: .relaxed)
            Thread.detachNewThread { [self] in
                defer { threads.subtract(1, ordering: .relaxed) }
                listen(on: socket, stopping: stopping)
            }
        }
        threads.add(1, ordering: .relaxed)
        Thread.detachNewThread { [self] in
            defer { threads.subtract(1, ordering: .relaxed) }
            announce(stopping: stopping)
        }
    }

    /// Closes the sockets (waking the threads that listen), wakes the announcing thread, and waits
    /// up to a second for the threads to end.
    public func stop() {
        for socket in sockets { socket.close() }
        wakeup.signal()
        let deadline = Monotonic.millis() + 1_000
        while threads.load(ordering: .relaxed) > 0 && Monotonic.millis() < deadline { usleep(20_000) }
    }

    /// Where announcements go now: the `--announce-to` targets, else each usable interface's IPv4
    /// broadcast address and, for interfaces with IPv6, the multicast group scoped to it.
    func targets(_ interfaces: [LocalInterface]) -> [PeerAddress] {
        if let targets = settings.targets { return targets }
        if settings.loopbackOnly { return [] }
        var out: [PeerAddress] = []
        for interface in interfaces where interface.isUsable {
            out += interface.broadcast.map { PeerAddress(host: $0, port: settings.port) }
            if settings.ipv6 && interface.multicast && !interface.ipv6.isEmpty {
                out.append(PeerAddress(host: "\(Self.group)%\(interface.name)", port: settings.port))
            }
        }
        return out
    }

    /// The IPv6 socket (multicast joins), if there is one.
    private var socket6: UDPSocket? { sockets.first { $0.family == AF_INET6 } }

    private func announce(stopping: @Sendable () -> Bool) {
        var watch = InterfaceWatch()
        var schedule = AnnounceSchedule()
        var interfaces: [LocalInterface] = []
        var invitationsSent: Int64?
        var invitationsOpen = false
        let addressWatch = AddressWatch()
        schedule.checkMillis = addressWatch.fd >= 0 ? Self.interfaceCheckWatchedMillis : Self.interfaceCheckMillis
        let replica = try? makeReplica()
        var random = SystemRandomNumberGenerator()
        while !stopping() {
            let now = Monotonic.millis()
            var due = schedule.announceDue(now: now)
            if schedule.checkDue(now: now) {
                interfaces = LocalInterface.all()
                let change = watch.update(interfaces, multicast: settings.ipv6 && socket6 != nil && settings.targets == nil && !settings.loopbackOnly)
                if change.addressesChanged {
                    if !change.first { log("discovery: this laptop's addresses changed (\(watch.addresses.joined(separator: ", "))): announcing now") }
                    due = true
                }
                if let socket6 {
                    for index in change.leave { socket6.leave(group: Self.group, interface: index) }
                    for index in change.join {
                        socket6.leave(group: Self.group, interface: index)
                        if !socket6.join(group: Self.group, interface: index) {
                            log("discovery: cannot join \(Self.group) on interface \(interfaces.first { $0.index == index }?.name ?? String(index)) (IPv4 broadcast still works there)")
                        }
                    }
                }
            }
            if due {
                schedule.sent(now: now, jitter: Int64.random(in: -Self.announceJitterMillis...Self.announceJitterMillis, using: &random))
                if let replica {
                    let packet = announcement(replica)
                    for target in targets(interfaces) {
                        for socket in sockets { socket.send(packet, to: target) }
                    }
                }
            }
            // An open short code is announced every second, so a `join` finds it at once.
            invitationsOpen = false
            if invitationsSent.map({ now - $0 >= Self.invitationIntervalMillis }) ?? true,
               let open = try? replica?.device.openShortInvites(), !open.isEmpty {
                invitationsSent = now
                invitationsOpen = true
                for invitation in open {
                    let packet = InvitationAnnouncement(slot: invitation.slot, password: invitation.password, port: tcpPort).packet
                    for target in targets(interfaces) {
                        for socket in sockets { socket.send(packet, to: target) }
                    }
                }
            }
            // Asleep until the next announcement, interface check or (while a short code is open)
            // invitation is due, or ``stop()``.
            let woke = wakeup.wait(timeoutMillis: Int(schedule.waitMillis(now: Monotonic.millis(), invitationsDue: invitationsOpen ? (invitationsSent ?? 0) + Self.invitationIntervalMillis : nil)),
                                   also: addressWatch.fd >= 0 ? [addressWatch.fd] : [])
            if !woke.ready.isEmpty {
                // An address or link changed: look at the interfaces now.
                addressWatch.drain()
                schedule.lastCheck = nil
            }
        }
    }

    private func listen(on socket: UDPSocket, stopping: @Sendable () -> Bool) {
        let replica: Replica
        do { replica = try makeReplica() } catch {
            log("discovery: cannot open the ledger to record what it hears: \(error)")
            return
        }
        var second: Int64 = 0
        var opened = 0
        var dropped = 0
        while !stopping() {
            let datagram: (bytes: [UInt8], from: PeerAddress)?
            // ``stop()`` closes the socket, which wakes this wait.
            do { datagram = try socket.receive(timeoutMillis: 60_000) } catch { return }
            guard let datagram else { continue }
            let now = Monotonic.millis()
            if now / 1000 != second {
                if dropped > 0 { log("discovery: dropped \(dropped) packets over \(Self.packetsPerSecondMax) a second") }
                second = now / 1000
                opened = 0
                dropped = 0
            }
            guard opened < Self.packetsPerSecondMax else {
                dropped += 1
                continue
            }
            opened += 1
            if let member = hear(datagram.bytes, from: datagram.from.host, in: replica) {
                // A daemon new here (just started, or at a new address) hears this one's
                // announcement at once instead of at the next interval.
                socket.send(announcement(replica, first: member), to: datagram.from)
            }
        }
    }

    /// The keys this laptop shares with each current member of the household (not revoked, not
    /// itself), in key order.
    func memberKeys(_ replica: Replica) -> [AnnouncementKeys] {
        let members = SyncDriver.admissibleKeys(replica).members.filter { $0 != identity.publicKey.bytes }.sorted { $0.lexicographicallyPrecedes($1) }
        return keyCache.withLock { cache in
            members.compactMap { member in
                if let keys = cache[member] { return keys }
                let keys = AnnouncementKeys(identity: identity, member: member, household: household)
                cache[member] = keys
                return keys
            }
        }
    }

    /// This daemon's announcement, with a box for each current member (at most
    /// ``Announcement/recipientsMax``: `first`, then those met most recently), fresh randomness.
    func announcement(_ replica: Replica, first: [UInt8]? = nil) -> [UInt8] {
        let recipients = Self.recipients(memberKeys(replica), peers: (try? replica.device.peers()) ?? [], first: first)
        return Announcement(member: identity.publicKey.bytes, port: tcpPort, sentAtMillis: SystemClock().nowMillis())
            .sealed(to: recipients, random: Sodium.randomBytes(Announcement.randomBytes))
    }

    /// Which members get a box when there are more than ``Announcement/recipientsMax``: `first`
    /// (the member whose announcement is being answered), then by the last time a session or an
    /// announcement met each (``PeerRecord``), then by key.
    static func recipients(_ keys: [AnnouncementKeys], peers: [PeerRecord], first: [UInt8]?) -> [AnnouncementKeys] {
        guard keys.count > Announcement.recipientsMax else { return keys }
        var met: [[UInt8]: Int64] = [:]
        for p in peers where !p.memberKey.isEmpty { met[p.memberKey] = max(met[p.memberKey] ?? 0, p.lastSuccessMillis, p.announcedAtMillis) }
        let ordered = keys.enumerated().sorted { a, b in
            if (a.element.member == first) != (b.element.member == first) { return a.element.member == first }
            let ma = met[a.element.member] ?? 0, mb = met[b.element.member] ?? 0
            return ma != mb ? ma > mb : a.offset < b.offset
        }
        return Array(ordered.prefix(Announcement.recipientsMax).map(\.element))
    }

    /// Handles one received packet: learns the address it names when it is a fresh announcement
    /// of another current member of this household. The member, when that address is new here.
    @discardableResult
    func hear(_ packet: [UInt8], from host: String, in replica: Replica) -> [UInt8]? {
        guard packet.count == Announcement.packetBytes,
              let announcement = Announcement.open(packet, from: memberKeys(replica)) else { return nil }
        let member = announcement.member
        // The stamp is the sender's: checked arithmetic (a member's modified client may send any number).
        let (skew, overflow) = announcement.sentAtMillis.subtractingReportingOverflow(SystemClock().nowMillis())
        guard member != identity.publicKey.bytes, !overflow, skew.magnitude <= UInt64(Self.clockWindowMillis) else { return nil }
        guard newest.withLock({ $0.accept(member: member, host: host, sentAtMillis: announcement.sentAtMillis) }) else { return nil }
        let address = PeerAddress(host: host, port: announcement.port).description
        do {
            guard try replica.device.learnAddress(address, member: member, from: .announcement) else { return nil }
            let who = PublicKey(bytes: member)?.fingerprint ?? "?"
            log("discovery: found member \(who) at \(address)")
            found(member)
            return member
        } catch {
            log("discovery: cannot record \(address): \(error)")
            return nil
        }
    }
}

/// Which announcements are fresh: one newer than the last seen from that member over the same
/// address family. A daemon sends each announcement twice, as an IPv4 broadcast and an IPv6
/// multicast, with one stamp: both copies are heard, so a laptop learns the member's address in
/// each family (whichever copy comes first), while a replay of an older packet is dropped.
struct AnnouncementFreshness {
    private var newest: [[UInt8]: Int64] = [:]

    /// Whether an announcement of `member` stamped `sentAtMillis` and heard from `host` is fresh;
    /// records it when it is.
    mutating func accept(member: [UInt8], host: String, sentAtMillis: Int64) -> Bool {
        let key = member + [host.contains(":") ? 6 : 4]
        guard sentAtMillis > newest[key, default: .min] else { return false }
        newest[key] = sentAtMillis
        return true
    }
}

/// When the announcing thread announces and looks at the interfaces (pure: the thread passes its
/// monotonic clock and a jitter drawn from its generator; tests pass their own).
struct AnnounceSchedule: Equatable {
    /// When the next announcement is due (nil: at once).
    var nextAnnounce: Int64?
    /// When the interfaces were last checked (nil: never, or to be checked now).
    var lastCheck: Int64?
    /// How often the interfaces are checked (``Discovery/interfaceCheckMillis``, or the backstop
    /// ``Discovery/interfaceCheckWatchedMillis`` while netlink tells of changes).
    var checkMillis = Discovery.interfaceCheckMillis

    /// Whether an announcement is due at `now`.
    func announceDue(now: Int64) -> Bool { nextAnnounce.map { now >= $0 } ?? true }

    /// Whether the interfaces are to be checked at `now` (every ``Discovery/interfaceCheckMillis``); records the check.
    mutating func checkDue(now: Int64) -> Bool {
        guard lastCheck.map({ now - $0 >= checkMillis }) ?? true else { return false }
        lastCheck = now
        return true
    }

    /// Records an announcement sent at `now`; the next is due an interval later, give or take `jitter`.
    mutating func sent(now: Int64, jitter: Int64) {
        nextAnnounce = now + Discovery.announceIntervalMillis + max(-Discovery.announceJitterMillis, min(Discovery.announceJitterMillis, jitter))
    }

    /// How long the announcing thread may sleep at `now`: until the next announcement, interface
    /// check, or invitation (`invitationsDue`, while a short code is open); 10 ms at least.
    func waitMillis(now: Int64, invitationsDue: Int64?) -> Int64 {
        var until = min(nextAnnounce ?? now, (lastCheck ?? now) + checkMillis)
        if let invitationsDue { until = min(until, invitationsDue) }
        return max(10, until - now)
    }
}

/// This laptop's interfaces as discovery last saw them: which addresses it has (a change
/// announces at once) and on which interfaces the IPv6 socket has joined the multicast group.
///
/// An interface whose IPv6 addresses changed, or that came back under another index (a Wi-Fi
/// reconnect, a cable plugged in), is joined again: the membership a socket held on an interface
/// that went away does not come back with it.
struct InterfaceWatch: Equatable {
    /// The usable interfaces' addresses, sorted (the last check's).
    var addresses: [String] = []
    /// The interfaces joined: index → its IPv6 addresses when joined.
    var joined: [UInt32: [String]] = [:]
    private var checked = false

    struct Change: Equatable {
        /// Whether this laptop's addresses differ from the last check's (or this is the first check).
        var addressesChanged: Bool
        /// Whether this was the first check.
        var first: Bool
        /// Interfaces to join the group on (leave first, then join: a stale membership is dropped).
        var join: [UInt32]
        /// Interfaces to leave (gone, down, or without IPv6 now).
        var leave: [UInt32]
    }

    /// Compares `interfaces` with the last check; `multicast` says whether IPv6 multicast is used.
    mutating func update(_ interfaces: [LocalInterface], multicast: Bool) -> Change {
        let usable = interfaces.filter(\.isUsable)
        let current = usable.flatMap { $0.ipv4 + $0.ipv6 }.sorted()
        let first = !checked
        checked = true
        let changed = first || current != addresses
        addresses = current
        var wanted: [UInt32: [String]] = [:]
        if multicast {
            for interface in usable where interface.multicast && !interface.ipv6.isEmpty && interface.index != 0 {
                wanted[interface.index] = interface.ipv6.sorted()
            }
        }
        let join = wanted.filter { joined[$0.key] != $0.value }.map(\.key).sorted()
        let leave = joined.keys.filter { wanted[$0] == nil }.sorted()
        joined = wanted
        return Change(addressesChanged: changed, first: first, join: join, leave: leave)
    }
}

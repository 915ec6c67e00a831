#if canImport(Glibc)
import Glibc
#endif
import Foundation
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerTransport
import KidLedgerSecurity
import Synchronization

/// LAN discovery (issue 22, point 1): the daemon announces on the local network where it accepts
/// peers, and learns where the other members' daemons do, so nobody types addresses at home.
///
/// Every ``announceIntervalMillis`` (and at once when this laptop's addresses change) it sends
/// one sealed ``Announcement`` by UDP to port ``portDefault`` (`--discovery-port`): an IPv4
/// broadcast on each interface that is up, and, when the daemon accepts peers over IPv6, an IPv6
/// multicast to ``group`` on each interface with IPv6, like Syncthing's local discovery. It listens on the same port. A packet that opens
/// under the household's ``DiscoveryKey`` and names a member (not revoked, not this laptop)
/// teaches "that member's daemon accepts peers at the packet's source address, on the announced
/// port" (``DeviceState/learnAddress(_:member:)``); a new address makes the gossip loop dial
/// that member at once. Packets of other households, strangers and replays of older packets of a
/// member are dropped without a word, and at most ``packetsPerSecondMax`` a second are opened.
///
/// A daemon listening on loopback only announces nowhere (nothing off the machine could reach it)
/// and listens on 127.0.0.1, unless `--announce-to` names where to send (unicast: a laptop on
/// another subnet, or tests on one machine).
final class Discovery: Sendable {
    /// The UDP port announcements go to and are heard on.
    static let portDefault: UInt16 = 4717
    /// The IPv6 link-local multicast group announcements go to.
    static let group = "ff12::4717"
    /// How often a daemon announces itself.
    static let announceIntervalMillis: Int64 = 10_000
    /// How often an open short code is announced (``InvitationAnnouncement``).
    static let invitationIntervalMillis: Int64 = 1_000
    /// How often the interfaces are checked for a changed address (which announces at once).
    static let interfaceCheckMillis: Int64 = 2_000
    /// The most packets opened per second per socket; more are dropped (a flood costs little).
    static let packetsPerSecondMax = 200
    /// Packets stamped further than this from this laptop's clock are dropped (old replays).
    static let clockWindowMillis: Int64 = 24 * 3_600_000

    /// What `serve` asked for.
    struct Settings: Sendable {
        /// The UDP port.
        var port: UInt16 = Discovery.portDefault
        /// Where to send announcements instead of broadcasting (`--announce-to`), or nil.
        var targets: [PeerAddress]?
        /// Whether the daemon listens on loopback only.
        var loopbackOnly = false
        /// Whether the daemon accepts peers over IPv6 (listens on `[::]` or an IPv6 address): only
        /// then does it announce by IPv6 multicast (a peer dials the address an announcement came from).
        var ipv6 = false
    }

    let settings: Settings
    let key: DiscoveryKey
    let identity: Identity
    /// The TCP port the daemon accepts peers on (announced).
    let tcpPort: UInt16
    let sockets: [UDPSocket]
    let log: @Sendable (String) -> Void
    /// Opens the replica (each thread its own).
    let makeReplica: @Sendable () throws -> Replica
    /// Called with a member key whose daemon was found at a new address.
    let found: @Sendable ([UInt8]) -> Void
    /// The newest announcement time seen per member (replays of older ones are dropped).
    private let newest = Mutex<[[UInt8]: Int64]>([:])
    private let threads = Atomic<Int>(0)

    /// Starts nothing yet; nil (with a log line saying why) when discovery can't run: a household
    /// without an owner, or no socket could be bound.
    init?(settings: Settings, household: Household, identity: Identity, tcpPort: UInt16,
          log: @escaping @Sendable (String) -> Void, makeReplica: @escaping @Sendable () throws -> Replica,
          found: @escaping @Sendable ([UInt8]) -> Void) {
        guard let key = DiscoveryKey(household: household) else {
            log("discovery off: this household has no owner's signature to derive its key from; add peers with `kidledger peer add`")
            return nil
        }
        var sockets: [UDPSocket] = []
        var problems: [String] = []
        let hosts = settings.loopbackOnly ? ["127.0.0.1"] : settings.ipv6 ? ["0.0.0.0", "::"] : ["0.0.0.0"]
        for host in hosts {
            do {
                let socket = try UDPSocket(binding: PeerAddress(host: host, port: settings.port))
                if socket.family == AF_INET6 {
                    for interface in LocalInterface.all() where interface.isUsable && interface.multicast && !interface.ipv6.isEmpty {
                        socket.join(group: Self.group, interface: interface.index)
                    }
                }
                sockets.append(socket)
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
        self.key = key
        self.identity = identity
        self.tcpPort = tcpPort
        self.sockets = sockets
        self.log = log
        self.makeReplica = makeReplica
        self.found = found
    }

    /// Starts the announcing thread and one listening thread per socket; they end once `stopping`
    /// says so (within about a quarter of a second).
    func start(stopping: @escaping @Sendable () -> Bool) {
        let where_ = settings.targets.map { "to " + $0.map(\.description).joined(separator: ", ") }
            ?? (settings.loopbackOnly ? "nowhere (this daemon listens on loopback only; --announce-to sends elsewhere)"
                : settings.ipv6 ? "by IPv4 broadcast and IPv6 multicast on every interface" : "by broadcast on every interface")
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

    /// Closes the sockets (waking the threads) and waits up to a second for the threads to end.
    func stop() {
        for socket in sockets { socket.close() }
        let deadline = monotonicMillis() + 1_000
        while threads.load(ordering: .relaxed) > 0 && monotonicMillis() < deadline { usleep(20_000) }
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

    private func announce(stopping: @Sendable () -> Bool) {
        var lastSent: Int64?
        var lastCheck: Int64?
        var fingerprint: [String] = []
        var interfaces: [LocalInterface] = []
        var invitationsSent: Int64?
        let replica = try? makeReplica()
        while !stopping() {
            let now = monotonicMillis()
            var due = lastSent.map { now - $0 >= Self.announceIntervalMillis } ?? true
            if lastCheck.map({ now - $0 >= Self.interfaceCheckMillis }) ?? true {
                lastCheck = now
                interfaces = LocalInterface.all()
                let current = interfaces.filter(\.isUsable).flatMap { $0.ipv4 + $0.ipv6 }.sorted()
                if current != fingerprint {
                    if !fingerprint.isEmpty { log("discovery: this laptop's addresses changed (\(current.joined(separator: ", "))): announcing now") }
                    fingerprint = current
                    due = true
                }
                if due {
                    lastSent = now
                    let packet = announcement()
                    for target in targets(interfaces) {
                        for socket in sockets { socket.send(packet, to: target) }
                    }
                }
            }
            // An open short code is announced every second, so a `join` finds it at once.
            if invitationsSent.map({ now - $0 >= Self.invitationIntervalMillis }) ?? true,
               let open = try? replica?.device.openShortInvites(), !open.isEmpty {
                invitationsSent = now
                for invitation in open {
                    let packet = InvitationAnnouncement(slot: invitation.slot, password: invitation.password, port: tcpPort).packet
                    for target in targets(interfaces) {
                        for socket in sockets { socket.send(packet, to: target) }
                    }
                }
            }
            usleep(100_000)
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
            do { datagram = try socket.receive(timeoutMillis: 250) } catch { return }
            guard let datagram else { continue }
            let now = monotonicMillis()
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
            if hear(datagram.bytes, from: datagram.from.host, in: replica) {
                // A daemon new here (just started, or at a new address) hears this one's
                // announcement at once instead of at the next interval.
                socket.send(announcement(), to: datagram.from)
            }
        }
    }

    /// This daemon's announcement, sealed with a fresh nonce.
    func announcement() -> [UInt8] {
        Announcement(member: identity.publicKey.bytes, port: tcpPort, sentAtMillis: SystemClock().nowMillis())
            .sealed(key: key, nonce: Sodium.randomBytes(Announcement.nonceBytes))
    }

    /// Handles one received packet: learns the address it names when it is a fresh announcement
    /// of another member of this household. True when that address is new here.
    @discardableResult
    func hear(_ packet: [UInt8], from host: String, in replica: Replica) -> Bool {
        guard let announcement = Announcement.open(packet, key: key) else { return false }
        let member = announcement.member
        // The stamp is the sender's: checked arithmetic (a member's modified client may send any number).
        let (skew, overflow) = announcement.sentAtMillis.subtractingReportingOverflow(SystemClock().nowMillis())
        guard member != identity.publicKey.bytes, !overflow, skew.magnitude <= UInt64(Self.clockWindowMillis) else { return false }
        let fresh = newest.withLock { seen in
            guard announcement.sentAtMillis > seen[member, default: .min] else { return false }
            seen[member] = announcement.sentAtMillis
            return true
        }
        guard fresh else { return false }
        let (members, _) = SyncDriver.admissibleKeys(replica)
        guard members.contains(member) else { return false }
        let address = PeerAddress(host: host, port: announcement.port).description
        do {
            guard try replica.device.learnAddress(address, member: member) else { return false }
            let who = PublicKey(bytes: member)?.fingerprint ?? "?"
            log("discovery: found member \(who) at \(address)")
            found(member)
            return true
        } catch {
            log("discovery: cannot record \(address): \(error)")
            return false
        }
    }
}

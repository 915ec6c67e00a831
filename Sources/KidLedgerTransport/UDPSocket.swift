#if canImport(Glibc)
import Glibc
#endif

/// A bound UDP socket for LAN discovery: it sends datagrams to unicast, broadcast and IPv6
/// multicast targets and receives datagrams with their source address.
///
/// IPv4 sockets have `SO_BROADCAST`; every socket has `SO_REUSEADDR`, so several daemons of one
/// machine (two homes) can listen on one discovery port and all receive broadcasts. An IPv6
/// socket is `IPV6_V6ONLY` and joins a multicast group per interface with ``join(group:interface:)``.
/// ``close()`` may come from any thread and wakes a blocked ``receive(timeoutMillis:)``.
public final class UDPSocket: Sendable {
    private let handle: SocketHandle
    /// `AF_INET` or `AF_INET6`.
    public let family: Int32
    /// The bound port.
    public let port: UInt16

    /// The largest datagram ``receive(timeoutMillis:)`` returns whole; longer ones are cut.
    public static let datagramBytesMax = 1_500

    /// Binds `address` (an IPv4 or IPv6 literal and a port; port 0 picks a free one).
    ///
    /// - Throws: ``TransportError/resolve(_:)`` for a host that is not a literal,
    ///   ``TransportError/io(_:_:)`` when the socket can't be bound.
    public init(binding address: PeerAddress) throws(TransportError) {
        let candidates = try Sockets.resolve(address, passive: true, type: Sockets.datagramType)
        var lastError = TransportError.io("bind \(address)", EADDRNOTAVAIL)
        for candidate in candidates {
            let fd = socket(candidate.family, Sockets.datagramType | Sockets.cloexecNonblock, 0)
            guard fd >= 0 else {
                lastError = .io("socket", errno)
                continue
            }
            Sockets.setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            if candidate.family == AF_INET {
                Sockets.setOption(fd, SOL_SOCKET, SO_BROADCAST, 1)
            } else {
                Sockets.setOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1)
                Sockets.setOption(fd, Int32(IPPROTO_IPV6), IPV6_MULTICAST_LOOP, 1)
            }
            if candidate.withSockaddr({ bind(fd, $0, $1) }) != 0 {
                lastError = .io("bind \(address)", errno)
                _ = Glibc.close(fd)
                continue
            }
            self.handle = SocketHandle(fd)
            self.family = candidate.family
            self.port = Sockets.boundPort(fd) ?? address.port
            return
        }
        throw lastError
    }

    deinit { close() }

    /// Joins the IPv6 multicast `group` (a literal such as "ff12::4717") on the interface with
    /// index `interface`; false when the system refuses (no IPv6 on it, say).
    @discardableResult
    public func join(group: String, interface: UInt32) -> Bool {
        membership(IPV6_ADD_MEMBERSHIP, group: group, interface: interface)
    }

    /// Leaves the IPv6 multicast `group` on the interface with index `interface` (before joining it
    /// again: an interface that went away and came back, a Wi-Fi reconnect); false when it was not joined.
    @discardableResult
    public func leave(group: String, interface: UInt32) -> Bool {
        membership(IPV6_DROP_MEMBERSHIP, group: group, interface: interface)
    }

    /// Sets the IPv6 socket option `option` (add or drop a membership) for `group` on `interface`.
    private func membership(_ option: Int32, group: String, interface: UInt32) -> Bool {
        guard family == AF_INET6 else { return false }
        var request = ipv6_mreq()
        guard inet_pton(AF_INET6, group, &request.ipv6mr_multiaddr) == 1 else { return false }
        request.ipv6mr_interface = interface
        return (try? handle.with { fd in
            setsockopt(fd, Int32(IPPROTO_IPV6), option, &request, socklen_t(MemoryLayout<ipv6_mreq>.size)) == 0
        }) ?? false
    }

    /// Sends one datagram to `target` (a numeric host, IPv6 with `%interface` for link scope, and a
    /// port); false when it could not be sent (no route, a family this socket lacks). Never blocks.
    @discardableResult
    public func send(_ bytes: [UInt8], to target: PeerAddress) -> Bool {
        guard let resolved = try? Sockets.resolve(target, passive: false, type: Sockets.datagramType, numericHost: true),
              let destination = resolved.first(where: { $0.family == family }) else { return false }
        return (try? handle.with { fd in
            destination.withSockaddr { sa, length in
                bytes.withUnsafeBytes { Glibc.sendto(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT), sa, length) }
            } == bytes.count
        }) ?? false
    }

    /// Waits at most `timeoutMillis` for a datagram: its bytes (at most ``datagramBytesMax``) and
    /// the address it came from (a numeric host, IPv6 link-local with `%interface`, and the
    /// sender's port); nil on timeout.
    ///
    /// - Throws: ``TransportError/closed`` after ``close()``.
    public func receive(timeoutMillis: Int) throws(TransportError) -> (bytes: [UInt8], from: PeerAddress)? {
        try handle.with { fd throws(TransportError) -> (bytes: [UInt8], from: PeerAddress)? in
            let events = try Sockets.poll(fd, events: Int16(POLLIN), timeoutMillis: timeoutMillis, what: "receive")
            if handle.closed { throw .closed }
            if events == 0 { return nil }
            var buffer = [UInt8](repeating: 0, count: Self.datagramBytesMax)
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let count = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    buffer.withUnsafeMutableBytes { Glibc.recvfrom(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT), sa, &length) }
                }
            }
            guard count >= 0 else { return nil }  // EAGAIN and the like: nothing after all
            let host = withUnsafePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Sockets.numericHost($0, length) }
            }
            let port = withUnsafePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Sockets.port(of: $0) }
            }
            return (Array(buffer[0..<count]), PeerAddress(host: host, port: port))
        }
    }

    /// Closes the socket. Idempotent; safe from any thread.
    public func close() {
        handle.close()
    }
}

/// One network interface of this machine, as `getifaddrs` lists it.
public struct LocalInterface: Equatable, Sendable {
    /// The interface's name ("eth0", "wlp2s0").
    public var name: String
    /// Its index (for IPv6 scopes and multicast).
    public var index: UInt32
    /// Whether it is up, and not a loopback interface.
    public var isUsable: Bool
    /// Its IPv4 addresses, numeric.
    public var ipv4: [String]
    /// Its IPv4 broadcast addresses, numeric.
    public var broadcast: [String]
    /// Its IPv6 addresses, numeric (link-local ones with `%name`).
    public var ipv6: [String]
    /// Whether it supports multicast.
    public var multicast: Bool

    /// An interface as given (tests; ``all()`` lists the machine's).
    public init(name: String, index: UInt32, isUsable: Bool, ipv4: [String], broadcast: [String], ipv6: [String], multicast: Bool) {
        self.name = name
        self.index = index
        self.isUsable = isUsable
        self.ipv4 = ipv4
        self.broadcast = broadcast
        self.ipv6 = ipv6
        self.multicast = multicast
    }

    /// This machine's interfaces (empty when `getifaddrs` fails).
    public static func all() -> [LocalInterface] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let list else { return [] }
        defer { freeifaddrs(list) }
        var byName: [String: LocalInterface] = [:]
        var order: [String] = []
        var node: UnsafeMutablePointer<ifaddrs>? = list
        while let current = node {
            let entry = current.pointee
            node = entry.ifa_next
            let name = String(cString: entry.ifa_name)
            let flags = Int32(bitPattern: entry.ifa_flags)
            if byName[name] == nil {
                order.append(name)
                byName[name] = LocalInterface(name: name, index: if_nametoindex(entry.ifa_name),
                                              isUsable: flags & Int32(IFF_UP) != 0 && flags & Int32(IFF_LOOPBACK) == 0,
                                              ipv4: [], broadcast: [], ipv6: [], multicast: flags & Int32(IFF_MULTICAST) != 0)
            }
            guard let address = entry.ifa_addr else { continue }
            let length = socklen_t(address.pointee.sa_family == sa_family_t(AF_INET6)
                ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                let own = Sockets.numericHost(address, length)
                byName[name]!.ipv4.append(own)
                guard flags & Int32(IFF_BROADCAST) != 0 else { continue }
                // The configured broadcast address, else the one address and netmask imply (for an
                // address added without `brd`, glibc reports the address itself).
                var broadcast = entry.ifa_ifu.ifu_broadaddr.map { Sockets.numericHost($0, length) } ?? "0.0.0.0"
                if broadcast == "0.0.0.0" || broadcast == own, let mask = entry.ifa_netmask {
                    let host = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr.s_addr }
                    let bits = mask.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr.s_addr }
                    var implied = sockaddr_in()
                    implied.sin_family = sa_family_t(AF_INET)
                    implied.sin_addr.s_addr = host | ~bits
                    broadcast = withUnsafePointer(to: &implied) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Sockets.numericHost($0, length) }
                    }
                }
                if broadcast != "0.0.0.0" && broadcast != own { byName[name]!.broadcast.append(broadcast) }
            case AF_INET6:
                byName[name]!.ipv6.append(Sockets.numericHost(address, length))
            default:
                continue
            }
        }
        return order.compactMap { byName[$0] }
    }
}

extension Sockets {
    static let datagramType = Int32(SOCK_DGRAM.rawValue)

    /// The numeric host of a socket address (IPv6 link-local with `%interface`; an IPv4-mapped
    /// IPv6 address, as a dual-stack socket sees an IPv4 peer, as plain IPv4), or "?".
    static func numericHost(_ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let rc = getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
        return rc == 0 ? unmapped(SystemError.string(host)) : "?"
    }

    /// `a.b.c.d` for an IPv4-mapped IPv6 host (`::ffff:a.b.c.d`), else `host` unchanged: one
    /// laptop's IPv4 address reads the same whether an IPv4 or a dual-stack socket met it.
    static func unmapped(_ host: String) -> String {
        let prefix = "::ffff:"
        guard host.lowercased().hasPrefix(prefix) else { return host }
        let rest = host.dropFirst(prefix.count)
        return rest.split(separator: ".").count == 4 && !rest.contains(":") ? String(rest) : host
    }

    /// The port a socket is bound to, or nil.
    static func boundPort(_ fd: Int32) -> UInt16? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { port(of: $0) }
        }
    }

    /// The port of an IPv4 or IPv6 socket address (0 for another family).
    static func port(of address: UnsafePointer<sockaddr>) -> UInt16 {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        case AF_INET6:
            address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
        default:
            0
        }
    }
}

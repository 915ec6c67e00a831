#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import KidLedgerSystem

/// One TCP connection over a POSIX socket, with blocking-with-timeout reads and writes (`poll(2)`).
///
/// The socket is non-blocking underneath; every call waits at most its timeout. `TCP_NODELAY` is
/// set, and TCP keepalive probes (idle 10 s, interval 5 s, 3 probes) notice a peer that vanished
/// without closing. The descriptor is close-on-exec.
///
/// Use a connection from one thread at a time. ``close()`` may come from any thread: it wakes a
/// blocked ``read(maxBytes:timeoutMillis:)`` or ``write(_:timeoutMillis:)`` on another thread,
/// which then throws ``TransportError/closed``. The byte counters may be read from any thread.
public final class TCPConnection: Sendable {
    private let handle: SocketHandle
    /// The numeric address of the other end, e.g. `127.0.0.1:4000` or `[::1]:4000`.
    public let remote: String
    /// The numeric address of the other end without the port, e.g. `127.0.0.1` or `::1`: what a
    /// server counts connections per address by.
    public let remoteHost: String
    /// Bytes received on the socket so far (what crossed the wire: handshake and encryption included).
    public var bytesReceived: Int { received.load(ordering: .relaxed) }
    /// Bytes sent on the socket so far.
    public var bytesSent: Int { sent.load(ordering: .relaxed) }
    /// The counters behind ``bytesReceived`` and ``bytesSent``: one atomic add per system call.
    private let received = Atomic<Int>(0)
    private let sent = Atomic<Int>(0)

    init(fd: Int32) {
        handle = SocketHandle(fd)
        Sockets.configureConnected(fd)
        remote = Sockets.peerName(fd)
        remoteHost = Self.host(of: remote)
    }

    /// The host of a numeric `host:port` or `[host]:port`.
    static func host(of address: String) -> String {
        if address.hasPrefix("["), let close = address.firstIndex(of: "]") {
            return String(address[address.index(after: address.startIndex)..<close])
        }
        return address.lastIndex(of: ":").map { String(address[..<$0]) } ?? address
    }

    deinit { close() }

    /// Connects to `address`, trying each resolved address in turn, each for at most `timeoutMillis`.
    ///
    /// - Throws: ``TransportError/resolve(_:)`` when the host doesn't resolve;
    ///   ``TransportError/refused(_:)`` when nothing listens there;
    ///   ``TransportError/unreachable(_:_:)`` when there's no route;
    ///   ``TransportError/timeout(_:)`` when no address answered in time;
    ///   ``TransportError/io(_:_:)`` for other failures. The error of the most telling address wins
    ///   (refused over unreachable over timeout over others).
    public static func connect(to address: PeerAddress, timeoutMillis: Int) throws(TransportError) -> TCPConnection {
        guard address.port != 0 else { throw .badAddress("cannot connect to port 0") }
        let candidates = try Sockets.resolve(address, passive: false)
        var best: (rank: Int, error: TransportError)?
        for candidate in candidates {
            do {
                return try connectOne(candidate, address: address, timeoutMillis: timeoutMillis)
            } catch {
                let rank: Int = switch error {
                case .refused: 4
                case .unreachable: 3
                case .timeout: 2
                default: 1
                }
                if best == nil || rank > best!.rank { best = (rank, error) }
            }
        }
        throw best?.error ?? .resolve("\(address.host): no addresses")
    }

    private static func connectOne(_ candidate: ResolvedAddress, address: PeerAddress,
                                   timeoutMillis: Int) throws(TransportError) -> TCPConnection {
        let fd = socket(candidate.family, Sockets.streamType | Sockets.cloexecNonblock, candidate.protocolNumber)
        guard fd >= 0 else { throw .io("socket", errno) }
        var keep = false
        defer { if !keep { _ = Glibc.close(fd) } }
        let rc = candidate.withSockaddr { Glibc.connect(fd, $0, $1) }
        var code = rc == 0 ? 0 : errno
        // An interrupted connect continues in the background, like EINPROGRESS.
        if code == EINTR { code = EINPROGRESS }
        if code == EINPROGRESS {
            let events = try Sockets.poll(fd, events: Int16(POLLOUT), timeoutMillis: timeoutMillis, what: "connect")
            if events == 0 {
                throw .timeout("connecting to \(address) (no answer within \(timeoutMillis) ms)")
            }
            code = Sockets.pendingError(fd)
        }
        if code != 0 { throw classify(code, address: address) }
        keep = true
        return TCPConnection(fd: fd)
    }

    private static func classify(_ code: Int32, address: PeerAddress) -> TransportError {
        switch code {
        case ECONNREFUSED: .refused(address)
        case EHOSTUNREACH: .unreachable(address, "host unreachable")
        case ENETUNREACH: .unreachable(address, "network unreachable")
        case ENETDOWN: .unreachable(address, "network is down")
        case EADDRNOTAVAIL: .unreachable(address, "address not available")
        case ETIMEDOUT: .timeout("connecting to \(address)")
        default: .io("connect to \(address)", code)
        }
    }

    /// Reads what is available, up to `maxBytes`, waiting at most `timeoutMillis` for something.
    ///
    /// - Returns: the bytes read (at least one), or `[]` when the peer closed its end (orderly EOF).
    /// - Throws: ``TransportError/timeout(_:)`` when nothing arrived in time;
    ///   ``TransportError/closed`` when this connection was closed or the peer reset it;
    ///   ``TransportError/io(_:_:)`` for other failures.
    public func read(maxBytes: Int = 64 << 10, timeoutMillis: Int) throws(TransportError) -> [UInt8] {
        let count = max(maxBytes, 1)
        return try handle.with { fd throws(TransportError) in
            var attempts = 0
            while true {
                attempts += 1
                let events = try Sockets.poll(fd, events: Int16(POLLIN), timeoutMillis: timeoutMillis, what: "read")
                if events == 0 {
                    throw .timeout("waiting for the peer (nothing received for \(timeoutMillis) ms)")
                }
                if handle.closed { throw .closed }
                var buffer = [UInt8](repeating: 0, count: count)
                let n = retryWhileInterrupted(maxRetries: 10_000) { buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) } }
                if n > 0 {
                    received.add(n, ordering: .relaxed)
                    return Array(buffer.prefix(n))
                }
                if n == 0 {
                    if handle.closed { throw .closed }
                    return []
                }
                let code = errno
                switch code {
                case EAGAIN, EWOULDBLOCK:
                    // A spurious wake-up: wait again (bounded, in case poll keeps waking).
                    if attempts > 10_000 { throw .io("recv from \(remote)", code) }
                case ECONNRESET, EPIPE, ENOTCONN: throw .closed
                case ETIMEDOUT: throw .timeout("waiting for the peer: it stopped answering keepalive probes")
                default: throw .io("recv from \(remote)", code)
                }
            }
        }
    }

    /// Writes all of `bytes`, waiting at most `timeoutMillis` each time the socket buffer is full.
    ///
    /// A peer that went away raises an error rather than `SIGPIPE` (`MSG_NOSIGNAL`).
    /// - Throws: ``TransportError/timeout(_:)`` when the peer accepted nothing for `timeoutMillis`;
    ///   ``TransportError/closed`` when this connection was closed or the peer reset it;
    ///   ``TransportError/io(_:_:)`` for other failures.
    public func write(_ bytes: [UInt8], timeoutMillis: Int) throws(TransportError) {
        try handle.with { fd throws(TransportError) in
            var offset = 0
            var stalls = 0
            while offset < bytes.count {
                if handle.closed { throw .closed }
                let n = retryWhileInterrupted(maxRetries: 10_000) {
                    bytes.withUnsafeBytes { raw in send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL)) }
                }
                if n > 0 {
                    offset += n
                    sent.add(n, ordering: .relaxed)
                    stalls = 0
                    continue
                }
                let code = n == 0 ? EAGAIN : errno
                switch code {
                case EAGAIN, EWOULDBLOCK:
                    stalls += 1
                    if stalls > 10_000 { throw .io("send to \(remote)", code) }
                    let events = try Sockets.poll(fd, events: Int16(POLLOUT), timeoutMillis: timeoutMillis, what: "write")
                    if events == 0 {
                        throw .timeout("sending to the peer (it accepted nothing for \(timeoutMillis) ms)")
                    }
                case ECONNRESET, EPIPE, ENOTCONN: throw .closed
                case ETIMEDOUT: throw .timeout("sending to the peer: it stopped answering keepalive probes")
                default: throw .io("send to \(remote)", code)
                }
            }
        }
    }

    /// Closes the connection. Idempotent; safe from any thread (wakes a blocked read or write).
    public func close() {
        handle.close()
    }

    /// Whether ``close()`` was called.
    public var isClosed: Bool { handle.closed }
}

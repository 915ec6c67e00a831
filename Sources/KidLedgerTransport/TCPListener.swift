#if canImport(Glibc)
import Glibc
#endif
import KidLedgerSystem

/// A listening TCP socket that hands out ``TCPConnection``s.
///
/// `SO_REUSEADDR` is set, so a restarted server can bind while old connections linger in TIME_WAIT.
/// Port 0 binds a free port; ``port`` tells which.
///
/// One thread accepts at a time. ``close()`` may come from any thread and wakes a blocked
/// ``accept(timeoutMillis:)``, which then throws ``TransportError/closed``.
public final class TCPListener: Sendable {
    private let handle: SocketHandle
    /// The address asked for (its port may be 0).
    public let address: PeerAddress
    /// The bound port (the chosen one when the address asked for port 0).
    public let port: UInt16

    /// Binds and listens on `address` (e.g. `0.0.0.0:4000`, `[::]:4000`, `127.0.0.1:0`). An IPv6
    /// address is bound dual-stack (`IPV6_V6ONLY` off): `[::]:4000` takes IPv4 connections too.
    ///
    /// - Throws: ``TransportError/resolve(_:)`` when the host doesn't resolve; ``TransportError/io(_:_:)``
    ///   when no resolved address could be bound (e.g. `EADDRINUSE`: another server has the port).
    public init(address: PeerAddress, backlog: Int32 = 64) throws(TransportError) {
        let candidates = try Sockets.resolve(address, passive: true)
        var lastError = TransportError.io("bind \(address)", EADDRNOTAVAIL)
        for candidate in candidates {
            let fd = socket(candidate.family, Sockets.streamType | Sockets.cloexecNonblock, candidate.protocolNumber)
            guard fd >= 0 else {
                lastError = .io("socket", errno)
                continue
            }
            Sockets.setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            // An IPv6 listener is dual-stack: `[::]:PORT` accepts IPv4 peers too (as ::ffff:a.b.c.d,
            // which ``Sockets/describe(_:_:)`` shows as a.b.c.d), whatever net.ipv6.bindv6only says.
            if candidate.family == AF_INET6 { Sockets.setOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 0) }
            if candidate.withSockaddr({ bind(fd, $0, $1) }) != 0 {
                lastError = .io("bind \(address)", errno)
                _ = Glibc.close(fd)
                continue
            }
            if listen(fd, max(backlog, 1)) != 0 {
                lastError = .io("listen on \(address)", errno)
                _ = Glibc.close(fd)
                continue
            }
            self.handle = SocketHandle(fd)
            self.address = address
            self.port = Sockets.boundPort(fd) ?? address.port
            return
        }
        throw lastError
    }

    deinit { close() }

    /// Waits at most `timeoutMillis` for a connection.
    ///
    /// - Returns: the connection, or nil when none arrived in time (or one was aborted before it was accepted).
    /// - Throws: ``TransportError/closed`` after ``close()``; ``TransportError/io(_:_:)`` when accepting
    ///   fails (e.g. `EMFILE`: out of file descriptors).
    public func accept(timeoutMillis: Int) throws(TransportError) -> TCPConnection? {
        try handle.with { fd throws(TransportError) -> TCPConnection? in
            let events = try Sockets.poll(fd, events: Int16(POLLIN), timeoutMillis: timeoutMillis, what: "accept")
            if handle.closed { throw .closed }
            if events == 0 { return nil }
            // Glibc's module doesn't export accept4, so close-on-exec and non-blocking are set
            // right after accepting (TCPConnection.init sets FD_CLOEXEC; O_NONBLOCK here).
            let client = retryWhileInterrupted(maxRetries: 99) { Glibc.accept(fd, nil, nil) }
            if client >= 0 {
                let flags = fcntl(client, F_GETFL)
                _ = fcntl(client, F_SETFL, (flags >= 0 ? flags : 0) | O_NONBLOCK)
                return TCPConnection(fd: client)
            }
            let code = errno
            switch code {
            // Nothing there after all (another acceptor won, or the client gave up): like a timeout.
            case EAGAIN, EWOULDBLOCK, ECONNABORTED, EPROTO: return nil
            case EINVAL where handle.closed: throw .closed
            default: throw .io("accept", code)
            }
        }
    }

    /// Stops listening. Idempotent; safe from any thread.
    public func close() {
        handle.close()
    }
}

#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import KidLedgerSystem

/// Readable text for an `errno` value (thread-safe, unlike `strerror`).
enum SystemError {
    static func message(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        let rc = buffer.withUnsafeMutableBufferPointer { strerror_r(code, $0.baseAddress!, $0.count) }
        return rc == 0 ? string(buffer) : "error \(code)"
    }

    /// A NUL-terminated C string buffer as UTF-8 text.
    static func string(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A socket file descriptor shared by the thread using it and a thread that may close it.
///
/// `close()` from another thread must not close the descriptor while a `poll`/`recv`/`send`/`accept`
/// is using it (the number could be reused by an unrelated file meanwhile). So every operation
/// brackets its use with ``acquire()``/``release()``; `close()` then only shuts the socket down
/// (which wakes the blocked call) and the last user closes the descriptor.
///
final class SocketHandle: Sendable {
    private struct State {
        var fd: Int32
        var users = 0
        var isClosed = false
    }
    private let state: Mutex<State>

    init(_ fd: Int32) { state = Mutex(State(fd: fd)) }

    deinit {
        state.withLock { s in
            if s.fd >= 0 { _ = Glibc.close(s.fd) }
        }
    }

    /// The descriptor, counted as in use until ``release()``.
    func acquire() throws(TransportError) -> Int32 {
        let fd = state.withLock { s -> Int32? in
            guard !s.isClosed, s.fd >= 0 else { return nil }
            s.users += 1
            return s.fd
        }
        guard let fd else { throw .closed }
        return fd
    }

    /// Ends a use begun with ``acquire()``; closes the descriptor when `close()` came meanwhile.
    func release() {
        state.withLock { s in
            precondition(s.users > 0, "a socket released more often than acquired")
            s.users -= 1
            if s.isClosed && s.users == 0 && s.fd >= 0 {
                _ = Glibc.close(s.fd)
                s.fd = -1
            }
        }
    }

    /// Runs `body` with the descriptor held.
    func with<T>(_ body: (Int32) throws(TransportError) -> T) throws(TransportError) -> T {
        let fd = try acquire()
        defer { release() }
        return try body(fd)
    }

    /// Closes now when unused, else shuts down (waking blocked calls) and closes on the last release. Idempotent.
    func close() {
        state.withLock { s in
            guard !s.isClosed else { return }
            s.isClosed = true
            guard s.fd >= 0 else { return }
            if s.users == 0 {
                _ = Glibc.close(s.fd)
                s.fd = -1
            } else {
                _ = shutdown(s.fd, Int32(SHUT_RDWR))
            }
        }
    }

    var closed: Bool {
        state.withLock { $0.isClosed }
    }
}

enum Sockets {
    static let streamType = Int32(SOCK_STREAM.rawValue)
    static let cloexecNonblock = Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)

    /// `poll(2)` for `events` on one descriptor; EINTR is retried. Returns the revents, 0 on timeout.
    static func poll(_ fd: Int32, events: Int16, timeoutMillis: Int, what: String) throws(TransportError) -> Int16 {
        var entry = pollfd(fd: fd, events: events, revents: 0)
        let timeout = Int32(clamping: max(timeoutMillis, 0))
        let n = retryWhileInterrupted(maxRetries: 999) { Glibc.poll(&entry, 1, timeout) }
        if n >= 0 { return n == 0 ? 0 : entry.revents }
        throw .io("poll (\(what))", errno)
    }

    static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) {
        var v = value
        _ = setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size))
    }

    /// TCP_NODELAY, and keepalive probing so a vanished peer is noticed in about 25 seconds.
    static func configureConnected(_ fd: Int32) {
        let tcp = Int32(IPPROTO_TCP)
        setOption(fd, tcp, TCP_NODELAY, 1)
        setOption(fd, SOL_SOCKET, SO_KEEPALIVE, 1)
        setOption(fd, tcp, TCP_KEEPIDLE, 10)
        setOption(fd, tcp, TCP_KEEPINTVL, 5)
        setOption(fd, tcp, TCP_KEEPCNT, 3)
        // Already set atomically at creation (SOCK_CLOEXEC); kept for descriptors from elsewhere.
        let flags = fcntl(fd, F_GETFD)
        if flags >= 0 { _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
    }

    /// The pending error of a socket (`SO_ERROR`), 0 when none.
    static func pendingError(_ fd: Int32) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == 0 else { return errno }
        return value
    }

    /// Numeric `host:port` (IPv6 in brackets; an IPv4-mapped address as plain IPv4) of a socket address.
    static func describe(_ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let rc = getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                             NI_NUMERICHOST | NI_NUMERICSERV)
        guard rc == 0 else { return "?" }
        let h = unmapped(SystemError.string(host)), s = SystemError.string(service)
        return h.contains(":") ? "[\(h)]:\(s)" : "\(h):\(s)"
    }

    /// The numeric address of the other end, or "?".
    static func peerName(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                getpeername(fd, sa, &length) == 0 ? describe(sa, length) : "?"
            }
        }
    }

    /// Resolves `address` to socket addresses of `type` (stream by default; numeric port;
    /// `passive` for binding; `numericHost`: a literal only, no name lookup).
    static func resolve(_ address: PeerAddress, passive: Bool, type: Int32 = streamType,
                        numericHost: Bool = false) throws(TransportError) -> [ResolvedAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = type
        hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0) | (numericHost ? AI_NUMERICHOST : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(address.host, String(address.port), &hints, &list)
        guard rc == 0, let list else {
            let why = rc == EAI_SYSTEM ? SystemError.message(errno) : String(validatingCString: gai_strerror(rc)) ?? "error \(rc)"
            throw .resolve("\(address.host): \(why)")
        }
        defer { freeaddrinfo(list) }
        var out: [ResolvedAddress] = []
        var node: UnsafeMutablePointer<addrinfo>? = list
        while let current = node, out.count < 64 {
            let info = current.pointee
            if let sa = info.ai_addr {
                var storage = sockaddr_storage()
                let length = min(Int(info.ai_addrlen), MemoryLayout<sockaddr_storage>.size)
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: sa, count: length)) }
                out.append(ResolvedAddress(family: info.ai_family, protocolNumber: info.ai_protocol,
                                           storage: storage, length: socklen_t(length)))
            }
            node = info.ai_next
        }
        guard !out.isEmpty else { throw .resolve("\(address.host): no addresses") }
        return out
    }
}

/// One resolved socket address, copied out of getaddrinfo's list.
struct ResolvedAddress {
    var family: Int32
    var protocolNumber: Int32
    var storage: sockaddr_storage
    var length: socklen_t

    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        var copy = storage
        return withUnsafePointer(to: &copy) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// Wakes a thread that waits for time to pass, without polling: a non-blocking pipe whose read end
/// the waiter polls (with other descriptors, e.g. an inotify watch) and whose write end anyone
/// signals, a signal handler too (`write(2)` is async-signal-safe). The daemon's idle threads
/// block here with long timeouts (docs/PERFORMANCE.md, "Idle").
public final class Wakeup: Sendable {
    /// The read end (polled) and the write end (signalled).
    public let readFD: Int32
    let writeFD: Int32

    /// A new wakeup; a process out of descriptors gets one that never wakes early (the waits
    /// still end at their timeouts).
    public init() {
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends {
                _ = fcntl(end, F_SETFD, FD_CLOEXEC)
                _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            }
        }
        readFD = ends[0]
        writeFD = ends[1]
    }

    deinit {
        if readFD >= 0 { _ = close(readFD) }
        if writeFD >= 0 { _ = close(writeFD) }
    }

    /// Wakes the waiter (now, or at its next wait). Async-signal-safe.
    public func signal() {
        var byte: UInt8 = 1
        _ = write(writeFD, &byte, 1)
    }

    /// Waits until ``signal()`` was called (since the last wait that returned true), one of `also`
    /// is readable, or `timeoutMillis` passed. Returns the descriptors of `also` that are
    /// readable, and whether this wakeup was signalled (which it takes back).
    @discardableResult
    public func wait(timeoutMillis: Int, also: [Int32] = []) -> (signalled: Bool, ready: [Int32]) {
        var entries = [pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)] + also.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let n = poll(&entries, nfds_t(entries.count), Int32(clamping: max(timeoutMillis, 0)))
        guard n > 0 else { return (false, []) }
        let signalled = entries[0].revents != 0
        if signalled {
            var buffer = [UInt8](repeating: 0, count: 64)
            while buffer.withUnsafeMutableBytes({ read(readFD, $0.baseAddress, $0.count) }) > 0 {}
        }
        return (signalled, entries.dropFirst().filter { $0.revents != 0 }.map(\.fd))
    }
}

/// Tells when a file is written by any process (inotify `IN_MODIFY`): the daemon learns of a
/// commit to its store by another `kidledger` at once, without reading the store on a timer.
public final class FileWatch: Sendable {
    /// The inotify descriptor to poll (-1 when inotify is unavailable: then only timeouts wake).
    public let fd: Int32

    /// Watches `path` (which must exist).
    public init(path: String) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if fd >= 0 && inotify_add_watch(fd, path, UInt32(IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)) < 0 {
            _ = close(fd)
            self.fd = -1
        } else {
            self.fd = fd
        }
    }

    deinit { if fd >= 0 { _ = close(fd) } }

    /// Reads the pending events away.
    public func drain() {
        guard fd >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
    }
}

/// Tells when this machine's network addresses or links change (a netlink socket subscribed to
/// the kernel's `RTMGRP_LINK`, `RTMGRP_IPV4_IFADDR` and `RTMGRP_IPV6_IFADDR` messages): discovery
/// looks at the interfaces when told instead of on a short timer.
public final class AddressWatch: Sendable {
    /// The netlink descriptor to poll (-1 when netlink is unavailable, e.g. a sandbox without
    /// AF_NETLINK: then the caller's timer alone applies).
    public let fd: Int32

    /// Subscribes (or gets `fd` -1).
    public init() {
        // Glibc's module has no sockaddr_nl: family (2 bytes), padding (2), port id (4), groups (4).
        let groups: UInt32 = 0x1 | 0x10 | 0x100  // RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR
        let fd = socket(16 /* AF_NETLINK */, Int32(SOCK_RAW.rawValue) | Sockets.cloexecNonblock, 0 /* NETLINK_ROUTE */)
        var address = [UInt8](repeating: 0, count: 12)
        address[0] = 16
        withUnsafeBytes(of: groups.littleEndian) { address.replaceSubrange(8..<12, with: $0) }
        let bound = fd >= 0 && address.withUnsafeBytes {
            bind(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(12))
        } == 0
        if fd >= 0 && !bound { _ = close(fd) }
        self.fd = bound ? fd : -1
    }

    deinit { if fd >= 0 { _ = close(fd) } }

    /// Reads the pending messages away (what changed is read from the interfaces themselves).
    public func drain() {
        guard fd >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 8192)
        while buffer.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
    }
}

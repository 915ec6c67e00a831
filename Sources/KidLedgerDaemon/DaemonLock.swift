#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// One daemon per home: `kidledger serve` holds an exclusive lock on `HOME/daemon.lock` for its
/// whole life, and the file says which process holds it and where it listens.
///
/// The lock is an open-file-description lock (fcntl `F_OFD_SETLK`, Linux 3.15+): the kernel drops
/// it when the daemon's last descriptor of the file closes, so a daemon that crashes or is killed
/// with SIGKILL leaves no stale lock; the file itself stays and is simply rewritten by the next
/// daemon. Other commands test the lock with `F_OFD_GETLK`, which never takes it, so a reader
/// can't make a daemon that is starting at that moment fail. The file's text is trusted only while
/// the lock is held.
///
/// File format, one `KEY VALUE` per line: `pid 1234`, then `listen 127.0.0.1:4717` once the daemon
/// has bound its address, and `page 127.0.0.1:4718` once the family page is served (also before the
/// home holds a household: `kidledger ui` finds the page there).
public enum DaemonLock {
    /// The lock file of a home.
    static func path(home: String) -> String { home + "/daemon.lock" }

    /// The daemon holding a home's lock.
    public struct Holder: Sendable, Equatable {
        /// Its process id (0 when the file does not say yet).
        public var pid: Int32
        /// Where it listens (nil while it is still starting).
        public var address: String?
        /// Where it serves the family page (nil: not yet, or not at all).
        public var page: String? = nil

        /// "pid 1234, listening on 127.0.0.1:4717" (or "... still starting").
        public var description: String {
            "pid \(pid), " + (address.map { "listening on \($0)" } ?? "still starting")
        }
    }

    // fcntl commands for open-file-description locks (<fcntl.h> defines them only with _GNU_SOURCE).
    private static let getLock: Int32 = 36  // F_OFD_GETLK
    private static let setLock: Int32 = 37  // F_OFD_SETLK

    /// A lock this process holds; released when ``release()`` is called or the process ends.
    public final class Held: Sendable {
        public let fd: Int32
        public let path: String
        /// Why the file could not be locked (a file system without such locks), nil when it is:
        /// the daemon runs, but a second one on this home would not be refused.
        public let unlocked: String?
        /// What the file says: the sync address and the page's address, each once known.
        private let recorded = Mutex<(listen: String?, page: String?)>((nil, nil))

        fileprivate init(fd: Int32, path: String, unlocked: String? = nil) {
            self.fd = fd
            self.path = path
            self.unlocked = unlocked
        }

        /// Records the address the daemon listens on (with its pid).
        public func record(address: String) {
            rewrite { $0.listen = address }
        }

        /// Records the address the daemon serves the page on (with its pid).
        public func record(page: String) {
            rewrite { $0.page = page }
        }

        private func rewrite(_ change: (inout (listen: String?, page: String?)) -> Void) {
            recorded.withLock { fields in
                change(&fields)
                DaemonLock.write(fd, "pid \(getpid())\n" + (fields.listen.map { "listen \($0)\n" } ?? "") + (fields.page.map { "page \($0)\n" } ?? ""))
            }
        }

        /// Releases the lock (closing the descriptor releases it).
        public func release() {
            DaemonLock.write(fd, "")
            _ = Glibc.close(fd)
        }
    }

    /// Takes the home's lock for this process, or throws (exit 75) naming the daemon that holds it.
    public static func acquire(home: String) throws -> Held {
        let file = path(home: home)
        let fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw DaemonError("cannot open the daemon lock \(file): \(String(cString: strerror(errno)))", kind: .ioError)
        }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        if fcntl(fd, setLock, &lock) != 0 {
            let failure = errno
            guard failure == EAGAIN || failure == EACCES else {
                // No such locks here (EINVAL, ENOLCK: some network file systems): serve anyway.
                write(fd, "pid \(getpid())\n")
                return Held(fd: fd, path: file, unlocked: String(cString: strerror(failure)))
            }
            let holder = parse(read(fd)) ?? Holder(pid: 0, address: nil)
            _ = Glibc.close(fd)
            throw busy(holder, home: home)
        }
        write(fd, "pid \(getpid())\n")
        return Held(fd: fd, path: file)
    }

    /// The refusal of a second daemon on one home.
    static func busy(_ holder: Holder, home: String) -> DaemonError {
        DaemonError("another `kidledger serve` already runs for this home (\(holder.description)); one daemon per home: stop that one first (`kidledger service status` says whether it runs as a service)", kind: .temporaryFailure)
    }

    /// The daemon holding `home`'s lock now, or nil when none does (no file, or nobody holds it).
    public static func holder(home: String) -> Holder? {
        let fd = open(path(home: home), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { _ = Glibc.close(fd) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        guard fcntl(fd, getLock, &lock) == 0, lock.l_type != Int16(F_UNLCK) else { return nil }
        return parse(read(fd)) ?? Holder(pid: 0, address: nil)
    }

    /// The holder a lock file's text names (nil for text that names no pid).
    static func parse(_ text: String) -> Holder? {
        var holder = Holder(pid: 0, address: nil)
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { continue }
            switch parts[0] {
            case "pid": holder.pid = Int32(parts[1]) ?? 0
            case "listen": holder.address = parts[1].isEmpty ? nil : parts[1]
            case "page": holder.page = parts[1].isEmpty ? nil : parts[1]
            default: continue
            }
        }
        return holder.pid > 0 ? holder : nil
    }

    private static func read(_ fd: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : ""
    }

    fileprivate static func write(_ fd: Int32, _ text: String) {
        _ = ftruncate(fd, 0)
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }
}

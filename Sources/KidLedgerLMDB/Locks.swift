#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The process-wide mutex that serializes write transactions. It checks errors, so a nested
/// `write` on the thread that already holds it fails with `EDEADLK` instead of hanging.
///
/// `@unchecked Sendable`: a `pthread_mutex_t` is made to be shared by threads, and the pointer to
/// it never changes (`Synchronization.Mutex` has no error-checking kind).
final class WriterMutex: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Takes the mutex; returns the pthread error code (0, or `EDEADLK` when already held here).
    func lock() -> Int32 { pthread_mutex_lock(mutex) }

    /// Releases the mutex.
    func unlock() { pthread_mutex_unlock(mutex) }
}

/// A readers-writer lock guarding the memory map: every transaction holds it shared while it
/// runs; remapping (growing or adopting the map size) and closing hold it exclusively, so no
/// transaction of this process ever sees the map move underneath it.
///
/// `@unchecked Sendable`: a `pthread_rwlock_t` is made to be shared by threads, and the pointer to
/// it never changes (the standard library has no readers-writer lock).
final class MapGate: @unchecked Sendable {
    private let rwlock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        rwlock = .allocate(capacity: 1)
        // The default (reader-preferring) kind lets a thread take the shared side recursively.
        pthread_rwlock_init(rwlock, nil)
    }

    deinit {
        pthread_rwlock_destroy(rwlock)
        rwlock.deallocate()
    }

    /// Takes the shared side.
    func lockShared() { pthread_rwlock_rdlock(rwlock) }

    /// Takes the exclusive side.
    func lockExclusive() { pthread_rwlock_wrlock(rwlock) }

    /// Releases whichever side this thread holds.
    func unlock() { pthread_rwlock_unlock(rwlock) }
}

/// The directories (by device and inode) that an ``LMDBEnvironment`` of this process has open:
/// LMDB forbids opening one environment twice in a process (closing either copy would drop the
/// other's POSIX locks on the lock file and let another process reset the reader table).
enum OpenDirectories {
    /// A directory's identity.
    struct Identity: Hashable, Sendable {
        var device: UInt64
        var inode: UInt64
    }

    private static let open = Mutex<Set<Identity>>([])

    /// Claims `identity`; false when it is already claimed.
    static func claim(_ identity: Identity) -> Bool {
        open.withLock { $0.insert(identity).inserted }
    }

    /// Gives `identity` back.
    static func release(_ identity: Identity) {
        open.withLock { _ = $0.remove(identity) }
    }
}

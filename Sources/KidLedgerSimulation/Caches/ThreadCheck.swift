import Glibc
import Synchronization

/// Checks, in debug builds, the claim of a type that is `@unchecked Sendable` because it is used
/// by one thread at a time: the first thread that uses it owns it, and a use from any other
/// thread traps (as swift-nio's `EmbeddedEventLoop` checks its own thread). Free in release
/// builds.
final class ThreadCheck: Sendable {
    /// The owning thread's `pthread_t` (0 until the first ``check()``), set once by a
    /// compare-and-exchange so that two first uses at once cannot both win.
    private let owner = Atomic<UInt>(0)

    init() {}

    /// Traps (debug builds) when called from a thread other than the first caller's.
    @inline(__always)
    func check() {
        #if DEBUG
        let me = UInt(pthread_self())
        precondition(me != 0, "a thread id of 0")
        let (claimed, current) = owner.compareExchange(expected: 0, desired: me, ordering: .relaxed)
        precondition(claimed || current == me, "used from a second thread")
        #endif
    }
}

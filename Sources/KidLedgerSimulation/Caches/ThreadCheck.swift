import Glibc

/// Checks, in debug builds, the claim of a type that is `@unchecked Sendable` because it is used
/// by one thread at a time: the first thread that uses it owns it, and a use from any other
/// thread traps (as swift-nio's `EmbeddedEventLoop` checks its own thread). Free in release
/// builds.
final class ThreadCheck: @unchecked Sendable {
    // Written once, by the first ``check()``, then only read; in debug builds only.
    private var owner: pthread_t?

    init() {}

    /// Traps (debug builds) when called from a thread other than the first caller's.
    @inline(__always)
    func check() {
        #if DEBUG
        let me = pthread_self()
        if let owner {
            precondition(pthread_equal(owner, me) != 0, "used from a second thread")
        } else {
            owner = me
        }
        #endif
    }
}

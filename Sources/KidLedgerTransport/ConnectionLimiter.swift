import Foundation

/// A thread-safe count of connections in service, refusing more than ``maximum``.
///
/// A server calls ``tryAcquire()`` for each accepted connection, serves it only on `true`, and
/// calls ``release()`` exactly once when done with it.
///
/// `@unchecked Sendable`: `active` is only read or written with `lock` held.
public final class ConnectionLimiter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    /// The most connections allowed at once (at least 1).
    public let maximum: Int

    /// Creates a limiter allowing `maximum` connections at once (values below 1 become 1).
    public init(maximum: Int) {
        self.maximum = max(maximum, 1)
    }

    /// Takes a slot when one is free. Returns false (taking nothing) at the maximum.
    public func tryAcquire() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard count < maximum else { return false }
        count += 1
        return true
    }

    /// Returns a slot taken by ``tryAcquire()``. An unmatched release is ignored.
    public func release() {
        lock.lock()
        defer { lock.unlock() }
        if count > 0 { count -= 1 }
    }

    /// The slots taken now.
    public var active: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}

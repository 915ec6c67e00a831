import Synchronization

/// A thread-safe count of connections in service, refusing more than ``maximum``.
///
/// A server calls ``tryAcquire()`` for each accepted connection, serves it only on `true`, and
/// calls ``release()`` exactly once when done with it.
public final class ConnectionLimiter: Sendable {
    private let count = Mutex(0)
    /// The most connections allowed at once (at least 1).
    public let maximum: Int

    /// Creates a limiter allowing `maximum` connections at once (values below 1 become 1).
    public init(maximum: Int) {
        self.maximum = max(maximum, 1)
    }

    /// Takes a slot when one is free. Returns false (taking nothing) at the maximum.
    public func tryAcquire() -> Bool {
        count.withLock { count in
            guard count < maximum else { return false }
            count += 1
            return true
        }
    }

    /// Returns a slot taken by ``tryAcquire()``. An unmatched release is ignored.
    public func release() {
        count.withLock { count in
            if count > 0 { count -= 1 }
        }
    }

    /// The slots taken now.
    public var active: Int {
        count.withLock { $0 }
    }
}

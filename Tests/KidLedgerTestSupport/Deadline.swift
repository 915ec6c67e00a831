#if canImport(Glibc)
import Glibc
#endif
import KidLedgerSystem

/// A point on ``Monotonic`` some time from now: how long a test waits for something at most.
public struct Deadline: Sendable {
    /// The clock reading at which the time is up.
    public let millis: Int64

    /// The deadline `seconds` from now.
    public init(seconds: Double) {
        millis = Monotonic.millis() + Int64((seconds * 1000).rounded())
    }

    /// Whether the time is up.
    public var passed: Bool { Monotonic.millis() >= millis }

    /// Seconds left (0 once passed).
    public var secondsLeft: Double { Double(max(millis - Monotonic.millis(), 0)) / 1000 }
}

/// Polls `condition` every `interval` s until it holds or `timeout` s pass; true when it held.
/// (For waiting on another process; to wait for a thread, signal a semaphore.)
public func eventually(timeout: Double = 30, interval: Double = 0.1, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Deadline(seconds: timeout)
    while true {
        if try condition() { return true }
        if deadline.passed { return false }
        usleep(useconds_t(interval * 1_000_000))
    }
}

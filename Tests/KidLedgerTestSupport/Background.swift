import Foundation
import Synchronization

/// Hands a non-Sendable value to exactly one other thread.
///
/// `@unchecked Sendable`: the creating thread doesn't touch the value until that thread is joined
/// (a test's promise; the value's type can't say it).
public struct Handoff<T>: @unchecked Sendable {
    /// The value handed over.
    public let value: T
    /// Wraps `value`.
    public init(value: T) { self.value = value }
}

/// The result of work on a dedicated thread, awaited with a timeout.
public final class Background<T: Sendable>: Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let result = Mutex<T?>(nil)

    /// Starts `body` on a new thread (not the cooperative pool, since it may block in poll).
    public init(_ body: @escaping @Sendable () -> T) {
        let thread = Thread { [self] in
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        thread.start()
    }

    /// The result, or nil when it didn't arrive within `timeoutMillis`.
    public func wait(timeoutMillis: Int = 20_000) -> T? {
        guard done.wait(timeout: .now() + .milliseconds(timeoutMillis)) == .success else { return nil }
        return result.withLock { $0 }
    }
}

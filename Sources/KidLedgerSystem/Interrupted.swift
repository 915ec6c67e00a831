#if canImport(Glibc)
import Glibc
#endif

/// Calls the system call `call` again while it fails with EINTR (returns a negative value with
/// `errno == EINTR`), at most `maxRetries` times; returns its last result, with `errno` as that call
/// left it. The one EINTR loop of the code base, after swift-system's `valueOrErrno(retryOnInterrupt:)`.
///
///     let n = retryWhileInterrupted { read(fd, buffer, count) }
///     guard n >= 0 else { throw ... errno ... }
///
/// A call that is not idempotent when interrupted (`connect(2)`, which carries on in the
/// background) must not go through it.
@inlinable
public func retryWhileInterrupted<Result: FixedWidthInteger>(maxRetries: Int = .max, _ call: () -> Result) -> Result {
    precondition(maxRetries >= 0, "a negative retry bound")
    var retries = 0
    while true {
        let result = call()
        guard result < 0, errno == EINTR, retries < maxRetries else { return result }
        retries += 1
    }
}

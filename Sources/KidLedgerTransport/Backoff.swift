/// Retry delays: exponential doubling from a base, capped, with full jitter (uniform in
/// `0...ceiling`, AWS's "full jitter"), so many devices retrying after one outage spread out.
///
/// Pure: randomness comes from the caller's generator; no clock. Call ``reset()`` after a success.
public struct Backoff: Sendable {
    /// The ceiling of the first delay, in milliseconds (at least 1).
    public let baseMillis: Int64
    /// The largest ceiling, in milliseconds (at least ``baseMillis``).
    public let capMillis: Int64
    /// Delays drawn since the last ``reset()``.
    public private(set) var attempt = 0

    /// Creates a backoff starting at `baseMillis` and doubling up to `capMillis`.
    public init(baseMillis: Int64 = 500, capMillis: Int64 = 60_000) {
        self.baseMillis = max(baseMillis, 1)
        self.capMillis = max(capMillis, self.baseMillis)
    }

    /// The ceiling of the next delay: `min(cap, base × 2^attempt)`.
    public var ceilingMillis: Int64 {
        // Doubling past 62 shifts would overflow; by then the cap has long been reached.
        let shift = min(attempt, 62)
        let (scaled, overflow) = baseMillis.multipliedReportingOverflow(by: Int64(1) << Int64(shift))
        return overflow ? capMillis : min(scaled, capMillis)
    }

    /// The next delay, uniform in `0...ceilingMillis`; then the ceiling doubles (up to the cap).
    public mutating func nextDelayMillis<G: RandomNumberGenerator>(using generator: inout G) -> Int64 {
        let ceiling = ceilingMillis
        if attempt < Int.max { attempt += 1 }
        return Int64.random(in: 0...ceiling, using: &generator)
    }

    /// Starts over from the base (after a success).
    public mutating func reset() {
        attempt = 0
    }
}

/// Identifies one replica: one copy of the ledger on one device (a fresh one after a restore
/// from stale files). Random 64-bit values, drawn from an injected generator.
public struct ReplicaID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The raw 64-bit value.
    public let rawValue: UInt64

    /// Wraps a raw value.
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }

    /// Orders by the raw value.
    public static func < (a: ReplicaID, b: ReplicaID) -> Bool { a.rawValue < b.rawValue }

    /// Sixteen lowercase hex digits.
    public var description: String {
        let hex = String(rawValue, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Parses sixteen (or fewer) hex digits.
    public init?(hex: String) {
        guard !hex.isEmpty, hex.count <= 16, let v = UInt64(hex, radix: 16) else { return nil }
        rawValue = v
    }
}

/// A hybrid logical clock reading: wall-clock milliseconds plus a counter that orders events
/// within one millisecond or while the wall clock lags behind a clock already seen.
public struct HLC: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Milliseconds since the Unix epoch (as seen by the clock that issued it, or later).
    public var millis: Int64
    /// Tie-breaking counter within one millisecond.
    public var counter: UInt32

    /// Creates a reading.
    public init(millis: Int64, counter: UInt32 = 0) {
        self.millis = millis
        self.counter = counter
    }

    /// The reading before any event.
    public static let zero = HLC(millis: 0, counter: 0)

    /// The latest millisecond a reading may carry: 9999-12-31T23:59:59.999Z. Decoders refuse
    /// readings beyond it, so the clock arithmetic below can never overflow.
    public static let millisMax: Int64 = 253_402_300_799_999

    /// `now` limited to `0...millisMax` (a wall clock can be wildly wrong).
    static func clamp(_ now: Int64) -> Int64 { min(max(now, 0), millisMax) }

    /// The reading for a local change: at least one millisecond after `self` (so every local
    /// change has its own millisecond, and "newest" is never a tie) and not earlier than `now`.
    public func tickLocal(now: Int64) -> HLC {
        assert(isInRange, "an HLC reading beyond the decodable range: \(self)")
        let next = HLC(millis: min(max(Self.clamp(now), millis + 1), Self.millisMax), counter: 0)
        assert(next.millis > millis || millis == Self.millisMax, "a local tick went back or stood still")
        return next
    }

    /// Whether the reading lies within `0...millisMax` (every decoded or issued one does).
    var isInRange: Bool { millis >= 0 && millis <= Self.millisMax }

    /// Orders by milliseconds, then counter.
    public static func < (a: HLC, b: HLC) -> Bool {
        (a.millis, a.counter) < (b.millis, b.counter)
    }

    /// The reading for a local event: later than `self` and not earlier than `now`.
    public func tick(now: Int64) -> HLC {
        assert(isInRange, "an HLC reading beyond the decodable range: \(self)")
        let next = Self.advanced(from: self, now: Self.clamp(now))
        assert(next > self || self == HLC(millis: Self.millisMax, counter: .max), "the clock went back or stood still")
        assert(next.isInRange, "a tick beyond the decodable range")
        return next
    }

    /// The reading after receiving `remote`: later than both `self` and `remote`, not earlier than `now`.
    public func receive(_ remote: HLC, now: Int64) -> HLC {
        assert(isInRange && remote.isInRange, "an HLC reading beyond the decodable range: \(self), \(remote)")
        let base = max(self, remote)
        let next = Self.advanced(from: base, now: Self.clamp(now))
        assert(next > base || base == HLC(millis: Self.millisMax, counter: .max), "the clock went back or stood still")
        assert(next.isInRange, "a reading beyond the decodable range")
        return next
    }

    /// The reading after `base` at clamped wall time `now`: `now` when later, else the next counter
    /// (the next millisecond when the counter is spent; `base` itself at the very end of time).
    private static func advanced(from base: HLC, now: Int64) -> HLC {
        if now > base.millis { return HLC(millis: now, counter: 0) }
        if base.counter == .max { return base.millis >= Self.millisMax ? base : HLC(millis: base.millis + 1, counter: 0) }
        return HLC(millis: base.millis, counter: base.counter + 1)
    }

    /// "millis.counter".
    public var description: String { "\(millis).\(counter)" }
}

/// Where time comes from. Injected: the CLI passes the system clock, the simulator a virtual one.
public protocol WallClock: Sendable {
    /// Milliseconds since the Unix epoch.
    func nowMillis() -> Int64
}

/// A clock that always reads a fixed value (tests).
public struct FixedClock: WallClock {
    /// The value every reading returns.
    public var millis: Int64
    /// Creates a clock that reads `millis`.
    public init(millis: Int64) { self.millis = millis }
    /// Returns ``millis``.
    public func nowMillis() -> Int64 { millis }
}

/// A small, fast, seedable generator (SplitMix64). Deterministic: the same seed gives the same stream.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator from a seed.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The order of register writes: hybrid logical clock, then origin replica.
public struct Stamp: Hashable, Comparable, Sendable {
    /// When.
    public var hlc: HLC
    /// Who (which replica).
    public var origin: ReplicaID

    /// Creates a stamp.
    public init(hlc: HLC, origin: ReplicaID) {
        self.hlc = hlc
        self.origin = origin
    }

    /// Orders by HLC, then replica id.
    public static func < (a: Stamp, b: Stamp) -> Bool { (a.hlc, a.origin) < (b.hlc, b.origin) }
}

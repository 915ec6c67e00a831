#if canImport(Glibc)
import Glibc
#endif
import Foundation
import KidLedgerDomain

// What the daemon and the CLI read from the system: the wall clock and the tz database.

/// The system wall clock, for the CLI and the daemon only (the core and simulator take injected clocks).
public struct SystemClock: WallClock {
    /// Creates the clock.
    public init() {}
    /// CLOCK_REALTIME in milliseconds.
    public func nowMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}

/// The tz database through Foundation's `TimeZone` (on Linux it reads /usr/share/zoneinfo, the
/// Debian package `tzdata`): the household zones the CLI and the daemon compute allowance days
/// with. Only names written as tz database names (``HouseholdTime/isValidName(_:)``) are looked up.
public struct FoundationZones: ZoneDatabase {
    /// The database.
    public init() {}

    public func rules(for name: String) -> (any ZoneRules)? {
        if HouseholdTime.utcNames.contains(name) { return FixedOffsetZone(millis: 0) }
        guard HouseholdTime.isValidName(name), let zone = TimeZone(identifier: name) else { return nil }
        return FoundationZoneRules(zone: zone)
    }
}

/// One zone's offsets from the tz database.
struct FoundationZoneRules: ZoneRules {
    let zone: TimeZone
    func offsetMillis(at millis: Int64) -> Int64 {
        Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(millis.quotientAndRemainder(dividingBy: 1000).quotient)))) * 1000
    }
}

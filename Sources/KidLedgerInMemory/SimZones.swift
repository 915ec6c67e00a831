import KidLedgerDomain

/// The simulator's time zones (issue 41): a fixed table, never the machine's tz database, so a
/// run is a function of its seed. Fixed offsets on both sides of UTC (the far east's +14:00
/// makes a laptop's "today" a day ahead of UTC's), and two zones with a yearly daylight-saving
/// shift, one of them at local midnight (the day's first instant is then 01:00: ``HouseholdTime/startOfDay(_:in:)``).
public struct SimZones: ZoneDatabase {
    /// The names a run draws from, in a fixed order.
    public static let names = ["UTC", "Sim/West", "Sim/East", "Sim/FarEast", "Sim/Summer", "Sim/MidnightShift"]

    /// The database.
    public init() {}

    public func rules(for name: String) -> (any ZoneRules)? {
        switch name {
        case "UTC": FixedOffsetZone(millis: 0)
        case "Sim/West": FixedOffsetZone(millis: -8 * Self.hour)
        case "Sim/East": FixedOffsetZone(millis: 9 * Self.hour + 30 * 60_000)
        case "Sim/FarEast": FixedOffsetZone(millis: 14 * Self.hour)
        // -05:00, and -04:00 from day 60 to day 240 of every 365-day cycle, shifting at 07:00 UTC.
        case "Sim/Summer": ShiftingZone(standard: -5 * Self.hour, summer: -4 * Self.hour, shiftMillis: 7 * Self.hour)
        // -03:00, and -02:00 from day 100 to day 250, shifting at 03:00 UTC: 00:00 local standard
        // time, so on day 100 the zone's clock goes from 23:59:59.999 to 01:00.
        case "Sim/MidnightShift": ShiftingZone(standard: -3 * Self.hour, summer: -2 * Self.hour, shiftMillis: 3 * Self.hour, from: 100, to: 250)
        default: nil
        }
    }

    static let hour: Int64 = 3_600_000
}

/// A zone with a summer offset between two days of every 365-day cycle (counted from 1970-01-01),
/// shifting at the same UTC time of day both ways.
struct ShiftingZone: ZoneRules {
    var standard: Int64
    var summer: Int64
    var shiftMillis: Int64
    var from: Int64 = 60
    var to: Int64 = 240

    func offsetMillis(at millis: Int64) -> Int64 {
        let day = Allowance.day(ofMillis: millis - shiftMillis)
        let r = day % 365
        let inCycle = r < 0 ? r + 365 : r
        return (from..<to).contains(inCycle) ? summer : standard
    }
}

/// The household's time zone: its calendar decides allowance days on every laptop (docs/CRDT.md,
/// "The household's time zone"). The zone is a register of the household (``Field/householdTimeZone``,
/// an IANA name such as `America/Los_Angeles`); its rules are injected (``ZoneDatabase``), so the
/// domain stays deterministic: the CLI reads the tz database, the simulator uses fixed tables.

/// The offsets of one time zone: a pure function from an instant to its offset from UTC.
public protocol ZoneRules: Sendable {
    /// The zone's offset from UTC at `millis` (Unix ms), in milliseconds (east positive).
    func offsetMillis(at millis: Int64) -> Int64
}

/// Zone rules by name.
public protocol ZoneDatabase: Sendable {
    /// The rules of the zone `name`, or nil when this database does not know it.
    func rules(for name: String) -> (any ZoneRules)?
}

/// A zone with one offset for ever (UTC is `FixedOffsetZone(millis: 0)`).
public struct FixedOffsetZone: ZoneRules, Hashable {
    /// The offset from UTC, in milliseconds.
    public var millis: Int64
    /// A zone `millis` east of UTC.
    public init(millis: Int64) { self.millis = millis }
    public func offsetMillis(at _: Int64) -> Int64 { millis }
}

/// The database that knows UTC alone (under its usual names): the replica's default until a
/// driver injects one (the CLI's reads the tz database).
public struct UTCOnlyZones: ZoneDatabase {
    /// The database.
    public init() {}
    public func rules(for name: String) -> (any ZoneRules)? {
        HouseholdTime.utcNames.contains(name) ? FixedOffsetZone(millis: 0) : nil
    }
}

/// Days in a household's zone.
public enum HouseholdTime {
    /// The zone of a household whose register is not set (a household created before the
    /// register, or whose zone this laptop's database does not know).
    public static let defaultZoneName = "UTC"
    /// Names of UTC.
    public static let utcNames: Set<String> = ["UTC", "Etc/UTC", "GMT", "Etc/GMT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu", "UCT", "Etc/UCT"]
    /// The longest zone name (the tz database's longest is 32 bytes).
    public static let nameBytesMax = 64
    /// The largest offset any zone has had (the tz database's are within ±15 h); rules that
    /// answer more are clamped to it, so day arithmetic stays bounded.
    public static let offsetMillisMax: Int64 = 18 * 3_600_000

    /// Whether `name` is written as a tz database name: 1 to 64 bytes of ASCII letters, digits,
    /// `/`, `_`, `+`, `-`, not starting or ending with `/`, no empty or dot segment. Whether the
    /// database knows it is the caller's question (``ZoneDatabase/rules(for:)``).
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= nameBytesMax else { return false }
        for b in bytes {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "/"), UInt8(ascii: "_"), UInt8(ascii: "+"), UInt8(ascii: "-"): continue
            default: return false
            }
        }
        return !name.split(separator: "/", omittingEmptySubsequences: false).contains { $0.isEmpty || $0.first == "." }
    }

    /// `zone`'s offset at `millis`, clamped to ±``offsetMillisMax``.
    static func offset(_ zone: any ZoneRules, _ millis: Int64) -> Int64 {
        min(max(zone.offsetMillis(at: millis), -offsetMillisMax), offsetMillisMax)
    }

    /// The day (days since 1970-01-01 of the zone's calendar) holding `millis` in `zone`.
    public static func day(ofMillis millis: Int64, in zone: any ZoneRules) -> Int64 {
        Allowance.day(ofMillis: millis + offset(zone, millis))
    }

    /// The first instant (Unix ms) of day `day` in `zone`: its midnight, or, when the zone skips
    /// midnight that day (a daylight-saving change at 00:00), the first instant the zone's clock
    /// shows that day.
    public static func startOfDay(_ day: Int64, in zone: any ZoneRules) -> Int64 {
        let midnight = day * Allowance.millisPerDay
        // The usual case: midnight less the offset in force then.
        let guess = midnight - offset(zone, midnight - offset(zone, midnight))
        if Self.day(ofMillis: guess, in: zone) >= day && Self.day(ofMillis: guess - 1, in: zone) < day { return guess }
        // Else the first instant whose day is `day` or later, by bisection within the offsets' bounds.
        var low = midnight - offsetMillisMax - 1, high = midnight + offsetMillisMax
        while high - low > 1 {
            let mid = low + (high - low) / 2
            if Self.day(ofMillis: mid, in: zone) >= day { high = mid } else { low = mid }
        }
        return high
    }
}

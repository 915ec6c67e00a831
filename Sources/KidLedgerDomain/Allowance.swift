/// Recurring allowance: the rule of a child's schedule, its periods (days of the household's
/// calendar: ``HouseholdTime``; day numbers count that calendar's dates) and the derived ids
/// of the schedule and of each period's payment (docs/CRDT.md, "Allowance schedules").
///
/// A child has at most one schedule. Its fields are registers of the child's entity
/// (``Field/allowanceAmount``, ``Field/allowanceRule``, ``Field/allowanceNote``,
/// ``Field/allowanceStoppedAt``). The period kind, the day and the first day are one register
/// (``AllowanceRule/packed``), so two concurrent changes never mix a weekly kind with a monthly
/// day.
public enum Allowance {
    /// The `source` of a payment transaction.
    public static let source = "allowance"
    /// Milliseconds in a UTC day.
    public static let millisPerDay: Int64 = 86_400_000
    /// The largest day number a rule may start on (the last day an HLC reading can name).
    public static let dayMax: Int64 = HLC.millisMax / millisPerDay
    /// Weekday names, Monday first (ISO 8601: Monday is 1).
    public static let weekdayNames = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    /// The UTC day (days since 1970-01-01) holding `millis` (``HouseholdTime/day(ofMillis:in:)``
    /// for the household's day).
    public static func day(ofMillis millis: Int64) -> Int64 {
        let (q, r) = millis.quotientAndRemainder(dividingBy: millisPerDay)
        return r < 0 ? q - 1 : q
    }

    /// The ISO weekday (Monday 1 ... Sunday 7) of day number `day`: 1970-01-01 was a Thursday.
    public static func weekday(ofDay day: Int64) -> Int64 {
        let r = (day + 3) % 7
        return (r < 0 ? r + 7 : r) + 1
    }

    /// The id of `child`'s schedule in `household`: derived, so two laptops that set an
    /// allowance for one child while apart write one schedule's registers.
    public static func scheduleID(household: RecordID, child: RecordID) -> RecordID {
        derivedID("kidledger allowance schedule", household, child, nil)
    }

    /// The id of the payment of the period starting on day `periodDay` of `schedule` in
    /// `household`: SHA-256 of "kidledger allowance" ‖ household ‖ schedule ‖ the period's start
    /// (Unix ms, u64 big-endian: the period's date as the UTC midnight of that date, whatever the
    /// household's zone, so the id names the calendar date and no laptop's zone), its first 16
    /// bytes as a version-8 id. Two laptops paying one period write one transaction.
    public static func paymentID(household: RecordID, schedule: RecordID, periodDay: Int64) -> RecordID {
        derivedID("kidledger allowance", household, schedule, periodDay * millisPerDay)
    }

    private static func derivedID(_ label: String, _ a: RecordID, _ b: RecordID, _ millis: Int64?) -> RecordID {
        var hasher = SHA256Hasher()
        hasher.update(Array(label.utf8))
        hasher.update(a.bytes)
        hasher.update(b.bytes)
        if let millis {
            var big = UInt64(bitPattern: millis).bigEndian
            withUnsafeBytes(of: &big) { hasher.update(Array($0)) }
        }
        let id = RecordID(bytes: hasher.finalize().prefix(16))
        // RFC 9562 version 8 (custom) and variant 10.
        return RecordID(high: (id.high & ~0xF000) | 0x8000, low: (id.low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000)
    }
}

/// When a schedule pays: every week on a weekday, or every month on a day 1...28, from a first
/// day on. One register (``packed``).
public struct AllowanceRule: Hashable, Sendable, CustomStringConvertible {
    /// The period kind.
    public enum Every: Int64, Sendable, CaseIterable {
        case week = 0, month = 1

        /// "week" or "month".
        public var name: String { self == .week ? "week" : "month" }
    }

    /// Weekly or monthly.
    public var every: Every
    /// The ISO weekday (1 Monday ... 7 Sunday) for a weekly rule; the day of the month (1...28:
    /// every month has it) for a monthly one.
    public var day: Int64
    /// The day (days since 1970-01-01 of the household zone's calendar) the rule was set on: the first period is the first
    /// period start on or after it.
    public var startDay: Int64

    /// Creates a rule; nil when `day` does not fit `every` or `startDay` is out of range.
    public init?(every: Every, day: Int64, startDay: Int64) {
        guard (0...Allowance.dayMax).contains(startDay),
              every == .week ? (1...7).contains(day) : (1...28).contains(day) else { return nil }
        self.every = every
        self.day = day
        self.startDay = startDay
    }

    /// The register value: `startDay << 8 | every << 5 | day`.
    public var packed: Int64 { startDay << 8 | every.rawValue << 5 | day }

    /// Decodes ``packed``; nil for a value no rule packs to.
    public init?(packed: Int64) {
        guard packed >= 0, let every = Every(rawValue: (packed >> 5) & 0x7) else { return nil }
        self.init(every: every, day: packed & 0x1F, startDay: packed >> 8)
    }

    /// The first period's start day.
    public var firstPeriod: Int64 { periodStart(onOrAfter: startDay) }

    /// The first period start on or after day `day`.
    public func periodStart(onOrAfter from: Int64) -> Int64 {
        switch every {
        case .week:
            let ahead = (day - Allowance.weekday(ofDay: from) + 7) % 7
            return from + ahead
        case .month:
            let (y, m, d) = Timestamp.civilDate(day: from)
            if d <= day { return Timestamp.dayNumber(year: y, month: m, day: day) }
            return Timestamp.dayNumber(year: m == 12 ? y + 1 : y, month: m == 12 ? 1 : m + 1, day: day)
        }
    }

    /// The start of the period after the one starting on `period`.
    public func next(after period: Int64) -> Int64 {
        every == .week ? period + 7 : periodStart(onOrAfter: period + 1)
    }

    /// "every week on monday", "every month on the 15th".
    public var description: String {
        every == .week ? "every week on \(Allowance.weekdayNames[Int(day) - 1])" : "every month on day \(day)"
    }

    /// "monday" or "15": the `--on` value.
    public var onText: String { every == .week ? Allowance.weekdayNames[Int(day) - 1] : String(day) }
}

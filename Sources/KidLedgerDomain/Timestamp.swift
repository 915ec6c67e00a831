/// UTC timestamps as ISO 8601 text, exact to the millisecond, without Foundation.
///
/// Dates use the proleptic Gregorian calendar (Howard Hinnant's `days_from_civil` / `civil_from_days`
/// algorithms in Int64 arithmetic). Only years 0000...9999 are written as dates; any other instant is
/// written as `@` followed by its signed decimal millisecond count (e.g. `@-62198755200001`), which
/// ``parseISO8601(_:)`` reads back, so every Int64 round-trips.
public enum Timestamp {
    /// Formats `millis` (since the Unix epoch) as `2026-11-29T22:10:32.123Z`: always three fractional
    /// digits and `Z`; `@<millis>` when the year would fall outside 0000...9999.
    public static func iso8601(millis: Int64) -> String {
        guard let f = fields(millis: millis) else { return "@" + String(millis) }
        var out: [UInt8] = []
        out.reserveCapacity(24)
        appendDate(f, to: &out)
        out.append(UInt8(ascii: "T"))
        appendTime(f, to: &out)
        out.append(UInt8(ascii: ":"))
        appendDigits(f.second, width: 2, to: &out)
        out.append(UInt8(ascii: "."))
        appendDigits(f.millisecond, width: 3, to: &out)
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses what ``iso8601(millis:)`` writes, and also: no fractional part (`2026-11-29T22:10:32Z`),
    /// one to three fractional digits, a numeric offset (`+02:00`, `-05:30`, hours 00-23, minutes 00-59)
    /// instead of `Z`, and the `@<millis>` form. Returns nil for anything else: invalid dates (Feb 30,
    /// month 13), hour 24, leap seconds (`:60`), a missing zone, lowercase `t`/`z`, a space instead of `T`,
    /// more than three fractional digits, or extra text.
    public static func parseISO8601(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        if b.first == UInt8(ascii: "@") { return parseMillis(b.dropFirst()) }
        // YYYY-MM-DDTHH:MM:SS is 19 bytes; the zone adds at least one.
        guard b.count >= 20,
              b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"),
              let year = number(b, 0, 4), let month = number(b, 5, 2), let day = number(b, 8, 2),
              let hour = number(b, 11, 2), let minute = number(b, 14, 2), let second = number(b, 17, 2),
              (1...12).contains(month), (1...daysInMonth(year: year, month: month)).contains(day),
              hour < 24, minute < 60, second < 60
        else { return nil }

        var i = 19
        var millisecond: Int64 = 0
        if b[i] == UInt8(ascii: ".") {
            i += 1
            var digits = 0
            while i < b.count, let d = digit(b[i]) {
                guard digits < 3 else { return nil }
                millisecond = millisecond * 10 + d
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<3 { millisecond *= 10 }
        }

        guard i < b.count else { return nil }
        var offsetMillis: Int64 = 0
        switch b[i] {
        case UInt8(ascii: "Z"):
            i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard b.count - i == 6, b[i + 3] == UInt8(ascii: ":"),
                  let offsetHour = number(b, i + 1, 2), let offsetMinute = number(b, i + 4, 2),
                  offsetHour < 24, offsetMinute < 60
            else { return nil }
            offsetMillis = (offsetHour * 60 + offsetMinute) * millisPerMinute
            if b[i] == UInt8(ascii: "-") { offsetMillis = -offsetMillis }
            i += 6
        default:
            return nil
        }
        guard i == b.count else { return nil }

        let days = daysFromCivil(year: year, month: month, day: day)
        let timeOfDay = ((hour * 60 + minute) * 60 + second) * 1000 + millisecond
        return days * millisPerDay + timeOfDay - offsetMillis
    }

    /// Formats `millis` as `2026-11-29 22:10` in UTC (seconds dropped, not rounded), a short human
    /// form for tables; `@<millis>` when the year would fall outside 0000...9999.
    public static func short(millis: Int64) -> String {
        guard let f = fields(millis: millis) else { return "@" + String(millis) }
        var out: [UInt8] = []
        out.reserveCapacity(16)
        appendDate(f, to: &out)
        out.append(UInt8(ascii: " "))
        appendTime(f, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The UTC calendar date (year, month 1...12, day 1...31) of a day count since 1970-01-01.
    public static func civilDate(day: Int64) -> (year: Int64, month: Int64, day: Int64) { civilFromDays(day) }

    /// The day count since 1970-01-01 of a proleptic Gregorian date (`month` 1...12; `day` in it).
    public static func dayNumber(year: Int64, month: Int64, day: Int64) -> Int64 { daysFromCivil(year: year, month: month, day: day) }

    // MARK: - Private helpers

    private static let millisPerMinute: Int64 = 60_000
    private static let millisPerDay: Int64 = 86_400_000
    /// 0000-01-01T00:00:00.000Z.
    private static let minMillis: Int64 = -62_167_219_200_000
    /// 9999-12-31T23:59:59.999Z.
    private static let maxMillis: Int64 = 253_402_300_799_999

    private struct Fields {
        var year, month, day, hour, minute, second, millisecond: Int64
    }

    /// Splits an instant into UTC calendar fields, or nil outside years 0000...9999.
    private static func fields(millis: Int64) -> Fields? {
        guard (minMillis...maxMillis).contains(millis) else { return nil }
        // Floor division so instants before the epoch land on the right day.
        var days = millis / millisPerDay
        var rest = millis % millisPerDay
        if rest < 0 { days -= 1; rest += millisPerDay }
        let (year, month, day) = civilFromDays(days)
        return Fields(
            year: year, month: month, day: day,
            hour: rest / 3_600_000, minute: rest / 60_000 % 60, second: rest / 1000 % 60,
            millisecond: rest % 1000
        )
    }

    /// Days since 1970-01-01 for a proleptic Gregorian date (Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (Hinnant's `civil_from_days`).
    private static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    private static func appendDate(_ f: Fields, to out: inout [UInt8]) {
        appendDigits(f.year, width: 4, to: &out)
        out.append(UInt8(ascii: "-"))
        appendDigits(f.month, width: 2, to: &out)
        out.append(UInt8(ascii: "-"))
        appendDigits(f.day, width: 2, to: &out)
    }

    private static func appendTime(_ f: Fields, to out: inout [UInt8]) {
        appendDigits(f.hour, width: 2, to: &out)
        out.append(UInt8(ascii: ":"))
        appendDigits(f.minute, width: 2, to: &out)
    }

    /// Appends a non-negative value as exactly `width` zero-padded decimal digits.
    private static func appendDigits(_ value: Int64, width: Int, to out: inout [UInt8]) {
        var divisor: Int64 = 1
        for _ in 1..<width { divisor *= 10 }
        var v = value
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(v / divisor))
            v %= divisor
            divisor /= 10
        }
    }

    private static func digit(_ byte: UInt8) -> Int64? {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) ? Int64(byte - UInt8(ascii: "0")) : nil
    }

    /// Reads exactly `count` ASCII digits starting at `start`.
    private static func number(_ b: [UInt8], _ start: Int, _ count: Int) -> Int64? {
        var value: Int64 = 0
        for i in start..<start + count {
            guard let d = digit(b[i]) else { return nil }
            value = value * 10 + d
        }
        return value
    }

    /// Reads `[-]digits` as an Int64 (no `+`, no spaces, no overflow).
    private static func parseMillis(_ bytes: ArraySlice<UInt8>) -> Int64? {
        var rest = bytes
        let negative = rest.first == UInt8(ascii: "-")
        if negative { rest = rest.dropFirst() }
        guard !rest.isEmpty else { return nil }
        var value: Int64 = 0
        for byte in rest {
            guard let d = digit(byte) else { return nil }
            // Accumulate towards the sign so Int64.min is reachable.
            let (shifted, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = negative ? shifted.subtractingReportingOverflow(d) : shifted.addingReportingOverflow(d)
            if o1 || o2 { return nil }
            value = next
        }
        return value
    }
}

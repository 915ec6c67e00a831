import Foundation
import KidLedgerDomain
import Testing

/// Foundation's ISO 8601 formatters as the oracle (UTC, `Z`, milliseconds when present).
struct FoundationOracle {
    let withFraction = ISO8601DateFormatter()
    let withoutFraction = ISO8601DateFormatter()

    init() {
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        withoutFraction.formatOptions = [.withInternetDateTime]
        for formatter in [withFraction, withoutFraction] { formatter.timeZone = TimeZone(secondsFromGMT: 0) }
    }

    /// Foundation's rendering of an instant given in milliseconds.
    func iso(_ millis: Int64) -> String {
        withFraction.string(from: Date(timeIntervalSince1970: Double(millis) / 1000))
    }

    /// Foundation's reading of a timestamp, in whole milliseconds.
    func millis(_ text: String) -> Int64? {
        let formatter = text.contains(".") ? withFraction : withoutFraction
        return formatter.date(from: text).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
    }
}

@Test(arguments: [
    (Int64(0), "1970-01-01T00:00:00.000Z"),
    (951_782_400_000, "2000-02-29T00:00:00.000Z"),
    (-1, "1969-12-31T23:59:59.999Z"),
    (-86_400_000, "1969-12-31T00:00:00.000Z"),
    (1_798_584_632_123, "2026-12-29T22:50:32.123Z"),
    (-62_167_219_200_000, "0000-01-01T00:00:00.000Z"),
    (-62_167_219_200_001, "@-62167219200001"),
    (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
    (253_402_300_800_000, "@253402300800000"),
    (-62_198_755_200_001, "@-62198755200001"),
    (Int64.min, "@-9223372036854775808"),
    (Int64.max, "@9223372036854775807"),
])
func timestampKnownValues(_ millis: Int64, _ expected: String) {
    #expect(Timestamp.iso8601(millis: millis) == expected)
    #expect(Timestamp.parseISO8601(expected) == millis)
}

@Test func timestampMatchesFoundationOnKnownValues() {
    let oracle = FoundationOracle()
    for millis: Int64 in [0, 951_782_400_000, 1_798_584_632_123, -1, 4_102_444_799_999, -2_208_988_800_000] {
        #expect(Timestamp.iso8601(millis: millis) == oracle.iso(millis), "millis \(millis)")
    }
}

@Test func timestampRandomRoundTripAgainstFoundation() {
    let oracle = FoundationOracle()
    var rng = SplitMix64(seed: 0x7157_A3B0)
    let low: Int64 = -2_208_988_800_000  // 1900-01-01T00:00:00Z
    let high: Int64 = 4_133_980_799_999  // 2100-12-31T23:59:59.999Z
    for _ in 0..<5000 {
        let millis = Int64.random(in: low...high, using: &rng)
        let text = Timestamp.iso8601(millis: millis)
        #expect(text == oracle.iso(millis), "millis \(millis)")
        #expect(Timestamp.parseISO8601(text) == millis, "text \(text)")
        #expect(oracle.millis(text) == millis, "text \(text)")
    }
}

@Test func timestampFullRangeRoundTrip() {
    var rng = SplitMix64(seed: 0xDA7E)
    for _ in 0..<5000 {
        let millis = Int64(bitPattern: rng.next())
        #expect(Timestamp.parseISO8601(Timestamp.iso8601(millis: millis)) == millis)
        let inRange = Int64.random(in: -62_167_219_200_000...253_402_300_799_999, using: &rng)
        let text = Timestamp.iso8601(millis: inRange)
        #expect(!text.hasPrefix("@"))
        #expect(Timestamp.parseISO8601(text) == inRange)
    }
}

@Test(arguments: [
    ("2026-11-29T22:10:32Z", "2026-11-29T22:10:32.000Z"),
    ("2026-11-29T22:10:32.1Z", "2026-11-29T22:10:32.100Z"),
    ("2026-11-29T22:10:32.12Z", "2026-11-29T22:10:32.120Z"),
    ("2026-11-29T22:10:32.123Z", "2026-11-29T22:10:32.123Z"),
    ("2026-11-30T00:10:32.123+02:00", "2026-11-29T22:10:32.123Z"),
    ("2026-11-29T16:40:32.123-05:30", "2026-11-29T22:10:32.123Z"),
    ("2026-11-29T22:10:32+00:00", "2026-11-29T22:10:32.000Z"),
    ("2026-11-29T22:10:32-00:00", "2026-11-29T22:10:32.000Z"),
    ("2027-01-01T01:00:00+23:59", "2026-12-31T01:01:00.000Z"),
    ("2000-03-01T00:30:00+01:00", "2000-02-29T23:30:00.000Z"),
    ("1970-01-01T00:00:00-00:01", "1970-01-01T00:01:00.000Z"),
    ("0000-01-01T00:00:00.000+00:01", "@-62167219260000"),
    ("@0", "1970-01-01T00:00:00.000Z"),
    ("@-1", "1969-12-31T23:59:59.999Z"),
    ("@007", "1970-01-01T00:00:00.007Z"),
])
func timestampAcceptedForms(_ input: String, _ canonical: String) {
    let millis = Timestamp.parseISO8601(input)
    #expect(millis != nil)
    #expect(millis.map { Timestamp.iso8601(millis: $0) } == canonical)
}

@Test func timestampOffsetsAgreeWithFoundation() {
    let oracle = FoundationOracle()
    for text in [
        "2026-11-30T00:10:32.123+02:00", "2026-11-29T16:40:32.123-05:30", "2024-02-29T23:59:59.999+14:00",
        "1999-12-31T20:00:00.5-04:00", "2026-11-29T22:10:32+05:45",
    ] {
        #expect(Timestamp.parseISO8601(text) != nil)
        #expect(Timestamp.parseISO8601(text) == oracle.millis(text), "text \(text)")
    }
}

@Test(arguments: [
    "",
    "2026-11-29",
    "2026-11-29T22:10:32",  // missing zone
    "2026-11-29T22:10:32.123",  // missing zone
    "2026-02-30T00:00:00Z",  // Feb 30
    "2025-02-29T00:00:00Z",  // not a leap year
    "1900-02-29T00:00:00Z",  // century, not a leap year
    "2026-13-01T00:00:00Z",  // month 13
    "2026-00-01T00:00:00Z",  // month 0
    "2026-01-00T00:00:00Z",  // day 0
    "2026-04-31T00:00:00Z",  // April has 30 days
    "2026-11-29T24:00:00Z",  // hour 24
    "2026-11-29T22:60:00Z",  // minute 60
    "2026-12-31T23:59:60Z",  // leap second
    "2026-11-29T22:10:32.Z",  // no fractional digits
    "2026-11-29T22:10:32.1234Z",  // four fractional digits
    "2026-11-29T22:10:32.123Zx",  // extra text
    " 2026-11-29T22:10:32Z",  // leading space
    "2026-11-29T22:10:32Z ",  // trailing space
    "2026-11-29 22:10:32Z",  // space instead of T
    "2026-11-29t22:10:32z",  // lowercase
    "2026-11-29T22:10:32+02",  // short offset
    "2026-11-29T22:10:32+0200",  // offset without colon
    "2026-11-29T22:10:32+24:00",  // offset hour 24
    "2026-11-29T22:10:32+02:60",  // offset minute 60
    "2026-11-29T22:10:32+02:00Z",  // both
    "2026-11-29T22:10Z",  // no seconds
    "26-11-29T22:10:32Z",  // two-digit year
    "+2026-11-29T22:10:32Z",  // signed year
    "12026-11-29T22:10:32Z",  // five-digit year
    "2026-1-29T22:10:32Z",  // one-digit month
    "２０２６-11-29T22:10:32Z",  // non-ASCII digits
    "@",
    "@-",
    "@+5",
    "@ 5",
    "@5 ",
    "@1.5",
    "@9223372036854775808",  // Int64.max + 1
    "@-9223372036854775809",  // Int64.min - 1
])
func timestampRejected(_ input: String) {
    #expect(Timestamp.parseISO8601(input) == nil)
}

@Test(arguments: [
    (Int64(0), "1970-01-01 00:00"),
    (1_798_584_632_123, "2026-12-29 22:50"),
    (951_782_459_999, "2000-02-29 00:00"),  // seconds are dropped, not rounded
    (-1, "1969-12-31 23:59"),
    (253_402_300_799_999, "9999-12-31 23:59"),
    (253_402_300_800_000, "@253402300800000"),
])
func timestampShort(_ millis: Int64, _ expected: String) {
    #expect(Timestamp.short(millis: millis) == expected)
}

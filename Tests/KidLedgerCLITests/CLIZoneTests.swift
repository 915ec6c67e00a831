import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
@testable import KidLedgerDaemon

/// The household's time zone through the CLI, on the tz database (issue 41, point 4): set at
/// `init` from TZ, shown and changed with `household timezone`, and the allowance days are its
/// days whatever each laptop's own TZ.
@Suite("The household's time zone in the CLI")
struct CLIZoneTests {
    /// 2026-12-03 22:00 UTC: Thursday 14:00 in Los Angeles (-08:00), Friday 07:00 in Tokyo.
    static let thursdayAfternoonLA: Int64 = 1_796_335_200_000
    static let hour: Int64 = 3_600_000

    func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test func theTzDatabaseIsThere() throws {
        // Foundation reads /usr/share/zoneinfo (Debian: tzdata); without it every zone is unknown.
        let la = try #require(FoundationZones().rules(for: "America/Los_Angeles"))
        #expect(la.offsetMillis(at: Self.thursdayAfternoonLA) == -8 * Self.hour)
        #expect(la.offsetMillis(at: 1_782_000_000_000) == -7 * Self.hour, "June: daylight saving")
        #expect(FoundationZones().rules(for: "UTC")?.offsetMillis(at: 0) == 0)
        #expect(FoundationZones().rules(for: "Mars/Olympus") == nil && FoundationZones().rules(for: "../etc/passwd") == nil)
        #expect(HouseholdTime.day(ofMillis: Self.thursdayAfternoonLA, in: la) == 20790)
    }

    @Test func setAtInitShownAndChanged() throws {
        try withLedger { l in
            l.timeZone = "America/Los_Angeles"
            l.setClock(Self.thursdayAfternoonLA)
            let created = try object(l.ok("init", "Home", "--json"))
            #expect(created["timeZone"] as? String == "America/Los_Angeles")
            l.timeZone = "Asia/Tokyo"  // another laptop's zone: the household's days stay Los Angeles'
            #expect(l.ok("household", "timezone").hasPrefix("America/Los_Angeles (now 2026-12-03 14:0"))
            let shown = try object(l.ok("household", "timezone", "--json"))
            #expect(shown["timeZone"] as? String == "America/Los_Angeles" && shown["known"] as? Bool == true
                    && shown["offsetMillis"] as? Int == -28_800_000, "\(shown)")
            l.ok("child", "add", "Ava")
            // A friday allowance set on Thursday afternoon in Los Angeles (Friday morning in Tokyo
            // and in UTC): not paid until Friday begins in Los Angeles.
            let set = l.ok("allowance", "set", "Ava", "5", "--every", "week", "--on", "friday")
            #expect(set.contains("Next payment: 2026-12-04 00:00 -08:00."), "\(set)")
            #expect(l.ok("balance", "Ava").contains("$0.00"))
            l.setClock(Self.thursdayAfternoonLA + 10 * Self.hour - 60_000)  // 23:59 Thursday there
            #expect(l.ok("balance", "Ava").contains("$0.00"))
            l.setClock(Self.thursdayAfternoonLA + 10 * Self.hour)  // 00:00 Friday there
            #expect(l.ok("balance", "Ava").contains("$5.00"))
            #expect(l.ok("history").hasPrefix("WHEN (-08:00)"), "times in the household's zone")
            #expect(l.ok("--utc", "history").contains("2026-12-04 08:00"), "00:00 PST is 08:00 UTC")
            // Moved to Tokyo: it is Friday 17:00 there, Friday is paid already; the next is the
            // Friday after, 00:00 Tokyo time.
            let moved = l.ok("household", "timezone", "Asia/Tokyo")
            #expect(moved == "The household's time zone is now Asia/Tokyo (it was America/Los_Angeles); allowance days are its days on every laptop.\n")
            let list = try object(l.ok("allowance", "list", "--json"))
            let next = ((list["schedules"] as? [[String: Any]])?.first?["nextPaymentAtMillis"] as? Int64)
            #expect(next == 1_796_914_800_000, "2026-12-11 00:00 JST (15:00 UTC the day before): \(list)")
            #expect(l.ok("balance", "Ava").contains("$5.00"))
            // Refusals: unknown, malformed, unchanged (65), and nothing changed.
            let before = l.state()
            for zone in ["Mars/Olympus", "../../etc/passwd", "Asia/Tokyo"] {
                #expect(l.run("household", "timezone", zone).code == 65, "\(zone)")
            }
            #expect(l.state() == before)
        }
    }
}

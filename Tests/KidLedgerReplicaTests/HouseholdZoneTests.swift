@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerInMemory
import KidLedgerTestSupport

/// The household's time zone (issue 41, point 4): a register whose days are the allowance days
/// on every laptop, on injected zone rules (``SimZones``: no tz database in the domain).
@Suite("The household's time zone")
struct HouseholdZoneTests {
    static let day = Allowance.millisPerDay, hour: Int64 = 3_600_000
    /// 2026-12-03 10:00 UTC, a Thursday (day 20790): 02:00 on Thursday in Sim/West (-08:00).
    static let thursday: Int64 = 1_796_292_000_000
    static let thursdayDay: Int64 = 20790
    static let friday: Int64 = 5

    /// A replica on a hand-moved clock, with the simulator's zones, a household in `zone` and Ava.
    func home(_ zone: String?, seed: UInt64 = 1, at millis: Int64 = Self.thursday) throws -> (Replica, TestClock) {
        let clock = TestClock(millis)
        let r = try makeReplica(seed: seed, clock: clock)
        r.zones = SimZones()
        try r.createHousehold(name: "Home", timeZone: zone)
        try r.addChild(name: "Ava")
        return (r, clock)
    }

    func payments(_ r: Replica) throws -> [LedgerTransaction] {
        try r.history().map(\.transaction).filter { $0.source == Allowance.source }.sorted { $0.createdAtMillis < $1.createdAtMillis }
    }

    @Test("days and their first instants in a zone, a midnight daylight-saving shift included")
    func daysInAZone() throws {
        let west = try #require(SimZones().rules(for: "Sim/West")), far = try #require(SimZones().rules(for: "Sim/FarEast"))
        #expect(HouseholdTime.day(ofMillis: Self.thursday, in: west) == Self.thursdayDay)
        #expect(HouseholdTime.day(ofMillis: Self.thursday + 14 * Self.hour, in: west) == Self.thursdayDay, "Thursday 16:00 in the west")
        #expect(HouseholdTime.day(ofMillis: Self.thursday + 14 * Self.hour, in: far) == Self.thursdayDay + 1, "already Friday far east")
        #expect(HouseholdTime.startOfDay(Self.thursdayDay + 1, in: west) == (Self.thursdayDay + 1) * Self.day + 8 * Self.hour)
        #expect(HouseholdTime.startOfDay(Self.thursdayDay + 1, in: far) == (Self.thursdayDay + 1) * Self.day - 14 * Self.hour)
        // Sim/MidnightShift goes from -03:00 to -02:00 at 00:00 local time on day 100 of its cycle:
        // the day begins at 01:00, at 03:00 UTC; it goes back on day 250 (01:00 becomes 00:00 again).
        let shift = try #require(SimZones().rules(for: "Sim/MidnightShift"))
        let d100: Int64 = 365 * 56 + 100, d250: Int64 = 365 * 56 + 250
        #expect(HouseholdTime.startOfDay(d100, in: shift) == d100 * Self.day + 3 * Self.hour)
        #expect(HouseholdTime.day(ofMillis: d100 * Self.day + 3 * Self.hour - 1, in: shift) == d100 - 1)
        #expect(HouseholdTime.startOfDay(d100 + 1, in: shift) == (d100 + 1) * Self.day + 2 * Self.hour)
        #expect(HouseholdTime.startOfDay(d250, in: shift) == d250 * Self.day + 2 * Self.hour)
        #expect(HouseholdTime.startOfDay(d250 + 1, in: shift) == (d250 + 1) * Self.day + 3 * Self.hour)
        for zone in SimZones.names {
            let rules = try #require(SimZones().rules(for: zone))
            for d in [Self.thursdayDay, d100 - 1, d100, d100 + 1, d250, d250 + 1] {
                let start = HouseholdTime.startOfDay(d, in: rules)
                #expect(HouseholdTime.day(ofMillis: start, in: rules) == d && HouseholdTime.day(ofMillis: start - 1, in: rules) == d - 1, "\(zone) \(d)")
            }
        }
        #expect(HouseholdTime.isValidName("America/Los_Angeles") && HouseholdTime.isValidName("Etc/GMT+8") && HouseholdTime.isValidName("UTC"))
        for bad in ["", "/etc/passwd", "Europe/../x", "a//b", "Europe/Paris ", "Zone\u{0}", String(repeating: "A", count: 65), "Ürümqi"] {
            #expect(!HouseholdTime.isValidName(bad), "\(bad)")
        }
        #expect(!FieldValue.text("a//b").fits(.householdTimeZone) && FieldValue.text("Sim/West").fits(.householdTimeZone))
    }

    /// A "friday" allowance in a household 8 hours west of UTC is paid at 00:00 on its Friday,
    /// not on Thursday at 16:00 (00:00 UTC on Friday), and dated then.
    @Test("a friday allowance is paid on the household's friday")
    func fridayIsTheHouseholdsFriday() throws {
        let (r, clock) = try home("Sim/West")
        let s = try r.setAllowance("Ava", amountCents: 500, every: .week, on: Self.friday, note: nil)
        let fridayStart = (Self.thursdayDay + 1) * Self.day + 8 * Self.hour
        #expect(s.nextPaymentMillis == fridayStart)
        #expect(s.startMillis == Self.thursdayDay * Self.day + 8 * Self.hour)
        clock.millis = (Self.thursdayDay + 1) * Self.day + 1  // 00:00:00.001 UTC on Friday: 16:00 Thursday here
        #expect(try r.payDueAllowances(now: clock.millis).isEmpty)
        clock.millis = fridayStart - 1
        #expect(try r.payDueAllowances(now: clock.millis).isEmpty)
        clock.millis = fridayStart
        let paid = try r.payDueAllowances(now: clock.millis)
        #expect(paid.map(\.transaction.createdAtMillis) == [fridayStart])
        let schedule = Allowance.scheduleID(household: try #require(try r.household()).id, child: try r.resolveChild("Ava").id)
        #expect(paid.first?.transaction.id == Allowance.paymentID(household: try #require(try r.household()).id, schedule: schedule,
                                                                   periodDay: Self.thursdayDay + 1))
        // Without --on, the default weekday is the household's today: Thursday here at 20:00
        // (04:00 on Friday in UTC).
        try r.addChild(name: "Ben")
        clock.millis = (Self.thursdayDay + 8) * Self.day + 4 * Self.hour
        #expect(try r.setAllowance("Ben", amountCents: 100, every: .week, on: nil, note: nil).rule.day == 4)
        #expect(try r.verify().isIntact)
    }

    /// The worked example of docs/CRDT.md: at 22:00 on Thursday in Sim/West the household moves
    /// to Sim/East (+09:30), where it is 15:30 on Friday: Friday's period is due at once, dated
    /// 00:00 Friday there. Moving back west before Friday begins there pays nothing more: the
    /// payment's id names the date, not the zone.
    @Test("a zone change during a period: the new zone's days, one payment per date")
    func zoneChangeDuringAPeriod() throws {
        let (r, clock) = try home("Sim/West")
        try r.setAllowance("Ava", amountCents: 500, every: .week, on: Self.friday, note: nil)
        clock.millis = (Self.thursdayDay + 1) * Self.day + 6 * Self.hour  // Thursday 22:00 west
        #expect(try r.payDueAllowances(now: clock.millis).isEmpty)
        try r.setHouseholdTimeZone("Sim/East")
        let eastFriday = (Self.thursdayDay + 1) * Self.day - 9 * Self.hour - 30 * 60_000
        #expect(try r.payDueAllowances(now: clock.millis).map(\.transaction.createdAtMillis) == [eastFriday])
        clock.millis += Self.hour
        try r.setHouseholdTimeZone("Sim/West")
        clock.millis = (Self.thursdayDay + 1) * Self.day + 9 * Self.hour  // Friday 01:00 west
        #expect(try r.payDueAllowances(now: clock.millis).isEmpty, "Friday is paid already")
        #expect(try r.resolveChild("Ava").balanceCents == 500)
        clock.millis += 7 * Self.day
        #expect(try r.payDueAllowances(now: clock.millis).map(\.transaction.createdAtMillis) == [(Self.thursdayDay + 8) * Self.day + 8 * Self.hour])
    }

    /// Two laptops pay one period knowing different zones (the change is concurrent): one id,
    /// one payment counted everywhere (the same-id rule keeps one version); laptops that agree on
    /// the zone write the same transaction.
    @Test("payment ids do not depend on the zone a laptop knows")
    func idsAcrossLaptopsAndZones() throws {
        let (a, clockA) = try home("Sim/West")
        try a.setAllowance("Ava", amountCents: 500, every: .week, on: Self.friday, note: nil)
        let b = try makeReplica(seed: 2, clock: clockA)
        b.zones = SimZones()
        try b.receive(a.changeLog())
        clockA.millis = (Self.thursdayDay + 1) * Self.day + 6 * Self.hour
        try b.setHouseholdTimeZone("Sim/FarEast")  // b only: Friday 20:00 there
        let paidA = try a.payDueAllowances(now: clockA.millis), paidB = try b.payDueAllowances(now: clockA.millis)
        #expect(paidA.isEmpty && paidB.count == 1)
        clockA.millis = (Self.thursdayDay + 1) * Self.day + 8 * Self.hour  // Friday 00:00 west: a pays too
        let lateA = try a.payDueAllowances(now: clockA.millis)
        #expect(lateA.count == 1 && lateA.first?.transaction.id == paidB.first?.transaction.id)
        #expect(lateA.first?.transaction.createdAtMillis != paidB.first?.transaction.createdAtMillis)
        let fromA = try a.changeLog(), fromB = try b.changeLog()
        try a.receive(fromB)
        try b.receive(fromA)
        #expect(try a.digest() == b.digest())
        #expect(try a.resolveChild("Ava").balanceCents == 500 && b.resolveChild("Ava").balanceCents == 500)
        #expect(try payments(a).count == 1 && a.householdTimeZone().name == "Sim/FarEast")
        #expect(try a.verify().isIntact && b.verify().isIntact)
    }

    /// A household from before the register (no zone written) has UTC days; a zone this laptop's
    /// database does not know is shown as set but UTC days are used.
    @Test("an unset or unknown zone is UTC")
    func unsetOrUnknownIsUTC() throws {
        let (r, clock) = try home(nil)
        #expect(try r.householdTimeZone() == Replica.TimeZoneSetting(name: nil, known: false))
        #expect(try r.householdTimeZone().effective == "UTC")
        try r.setAllowance("Ava", amountCents: 500, every: .week, on: Self.friday, note: nil)
        clock.millis = (Self.thursdayDay + 1) * Self.day
        #expect(try r.payDueAllowances(now: clock.millis).map(\.transaction.createdAtMillis) == [(Self.thursdayDay + 1) * Self.day])
        try r.setHouseholdTimeZone("Sim/East")
        let plain = try makeReplica(seed: 3, clock: clock)  // knows UTC alone
        try plain.receive(r.changeLog())
        #expect(try plain.householdTimeZone() == Replica.TimeZoneSetting(name: "Sim/East", known: false))
        #expect(try plain.householdTimeZone().effective == "UTC")
        #expect(throws: LedgerError.self) { try plain.setHouseholdTimeZone("Sim/West") }
        #expect(throws: LedgerError.self) { try r.setHouseholdTimeZone("No/Such_Zone") }
        #expect(throws: LedgerError.self) { try r.setHouseholdTimeZone("Sim/East") }  // unchanged
        #expect(throws: LedgerError.self) { try r.setHouseholdTimeZone("../../etc") }
    }
}

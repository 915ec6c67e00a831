@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

/// Recurring allowance (issue 23, point 1): schedules are registers of the child, each period's
/// payment has a derived id and a deterministic payload.
@Suite("Allowance schedules")
struct AllowanceTests {
    /// 2026-12-03 10:00 UTC, a Thursday (day 20790).
    static let thursday: Int64 = 1_796_292_000_000
    static let day = Allowance.millisPerDay
    static let thursdayDay: Int64 = 20790

    /// A replica on a hand-moved clock with a household and Ava, and a second replica holding
    /// the same log.
    func pair() throws -> (Replica, TestClock, Replica, TestClock) {
        let clockA = TestClock(Self.thursday), clockB = TestClock(Self.thursday)
        let a = try makeReplica(seed: 1, clock: clockA)
        try a.createHousehold(name: "Home")
        try a.addChild(name: "Ava")
        let b = try makeReplica(seed: 2, clock: clockB)
        try b.receive(a.changeLog())
        return (a, clockA, b, clockB)
    }

    func payments(_ r: Replica) throws -> [LedgerTransaction] {
        try r.history().map(\.transaction).filter { $0.source == Allowance.source }.sorted { $0.createdAtMillis < $1.createdAtMillis }
    }

    @Test("rules pack into one register and compute their periods in UTC")
    func rules() throws {
        let weekly = try #require(AllowanceRule(every: .week, day: 1, startDay: Self.thursdayDay))
        #expect(AllowanceRule(packed: weekly.packed) == weekly)
        #expect(weekly.firstPeriod == Self.thursdayDay + 4)  // the Monday after
        #expect(Allowance.weekday(ofDay: Self.thursdayDay) == 4)
        let monthly = try #require(AllowanceRule(every: .month, day: 1, startDay: Self.thursdayDay))
        #expect(Timestamp.civilDate(day: monthly.firstPeriod) == (2027, 1, 1))
        #expect(Timestamp.civilDate(day: monthly.next(after: monthly.firstPeriod)) == (2027, 2, 1))
        #expect(AllowanceRule(every: .month, day: 29, startDay: 0) == nil)
        #expect(AllowanceRule(every: .week, day: 8, startDay: 0) == nil)
        #expect(AllowanceRule(packed: -1) == nil && AllowanceRule(packed: 2 << 5 | 1) == nil)
        #expect(!FieldValue.integer(0).fits(.allowanceAmount) && FieldValue.integer(weekly.packed).fits(.allowanceRule))
    }

    @Test("two replicas paying the same period write one transaction")
    func twoPayersOneTransaction() throws {
        let (a, clockA, b, clockB) = try pair()
        try a.setAllowanceAndPay("Ava", amountCents: 500, every: .week, on: nil, note: "weekly")
        try b.receive(a.changeLog())
        #expect(try payments(a).count == 1 && payments(b).count == 1)  // today's period, paid by a, received by b
        // Apart for a week: both pay next Thursday.
        clockA.millis += 7 * Self.day
        clockB.millis += 7 * Self.day
        #expect(try a.payDueAllowances(now: clockA.millis).count == 1)
        #expect(try b.payDueAllowances(now: clockB.millis).count == 1)
        try exchange(a, b)
        #expect(try a.digest() == b.digest())
        let paid = try payments(a)
        #expect(paid.map(\.createdAtMillis) == [Self.thursdayDay * Self.day, (Self.thursdayDay + 7) * Self.day])
        #expect(try a.resolveChild("Ava").balanceCents == 1000)
        #expect(try a.counts().conflicts == 0)
        #expect(try a.verify().isIntact && b.verify().isIntact)
    }

    @Test("missed periods are paid once each when a laptop wakes, and never again")
    func missedPeriods() throws {
        let (a, clock, _, _) = try pair()
        try a.setAllowanceAndPay("Ava", amountCents: 250, every: .week, on: 4, note: nil)
        clock.millis += 21 * Self.day
        let made = try a.payDueAllowances(now: clock.millis)
        #expect(made.map(\.transaction.createdAtMillis) == [7, 14, 21].map { (Self.thursdayDay + $0) * Self.day })
        #expect(try a.payDueAllowances(now: clock.millis).isEmpty)
        #expect(try payments(a).count == 4 && a.resolveChild("Ava").balanceCents == 1000)
        let schedule = try #require(try a.allowanceSchedules().first)
        #expect(schedule.nextPaymentMillis == (Self.thursdayDay + 28) * Self.day)
    }

    @Test("an archived child is not paid, and restoring it does not pay the archived periods")
    func archivedChild() throws {
        let (a, clock, _, _) = try pair()
        try a.setAllowanceAndPay("Ava", amountCents: 100, every: .week, on: nil, note: nil)
        try a.setArchived("Ava", true)
        clock.millis += 14 * Self.day
        #expect(try a.payDueAllowances(now: clock.millis).isEmpty)
        try a.setArchived("Ava", false)
        #expect(try a.payDueAllowances(now: clock.millis).isEmpty)
        #expect(try a.allowanceSchedules().first?.stoppedAtMillis != nil)
        // A replica that knows only the archived flag does not pay either.
        let b = try makeReplica(seed: 3, clock: clock)
        try b.receive(a.changeLog())
        #expect(try b.payDueAllowances(now: clock.millis + 7 * Self.day).isEmpty)
    }

    @Test("stop: no period starting after the stop is paid; set again starts from today")
    func stop() throws {
        let (a, clock, b, clockB) = try pair()
        try a.setAllowanceAndPay("Ava", amountCents: 100, every: .week, on: nil, note: nil)
        clock.millis += 1 * Self.day
        let stopped = try a.stopAllowance("Ava")
        #expect(stopped.stoppedAtMillis == clock.millis && !stopped.isActive)
        #expect(throws: LedgerError.self) { try a.stopAllowance("Ava") }
        try b.receive(a.changeLog())
        clock.millis += 14 * Self.day
        clockB.millis = clock.millis
        #expect(try a.payDueAllowances(now: clock.millis).isEmpty && b.payDueAllowances(now: clockB.millis).isEmpty)
        // By schedule id prefix, and set again: the weeks it was stopped stay unpaid.
        let id = Allowance.scheduleID(household: try #require(try a.household()).id, child: try a.resolveChild("Ava").id)
        #expect(throws: LedgerError.self) { try a.stopAllowance(String(id.hex.prefix(8))) }  // already stopped
        try a.setAllowanceAndPay("Ava", amountCents: 100, every: .week, on: nil, note: nil)
        #expect(try payments(a).map(\.createdAtMillis) == [Self.thursdayDay, Self.thursdayDay + 15].map { $0 * Self.day })
    }

    @Test("a schedule changed concurrently: registers converge; one payment per period, the same-id rule picks it")
    func concurrentChange() throws {
        let (a, clockA, b, clockB) = try pair()
        try a.setAllowanceAndPay("Ava", amountCents: 500, every: .week, on: nil, note: nil)
        try b.receive(a.changeLog())
        // Apart: a raises the amount, b lowers it; a week later both pay.
        try a.setAllowanceAndPay("Ava", amountCents: 700, every: .week, on: nil, note: nil)
        try b.setAllowanceAndPay("Ava", amountCents: 300, every: .week, on: nil, note: nil)
        clockA.millis += 7 * Self.day
        clockB.millis += 7 * Self.day
        try a.payDueAllowances(now: clockA.millis)
        try b.payDueAllowances(now: clockB.millis)
        try exchange(a, b)
        #expect(try a.digest() == b.digest())
        #expect(try a.allowanceSchedules() == b.allowanceSchedules())
        let paid = try payments(a)
        #expect(paid.count == 2)
        // Of the two versions of the second period's payment (unclaimed origins: equal ranks),
        // the smaller canonical payload is kept; the other is a counted conflict.
        let versions = [300, 700].map {
            LedgerTransaction(id: paid[1].id, childID: paid[1].childID, amountCents: $0, createdAtMillis: paid[1].createdAtMillis,
                              source: Allowance.source)
        }
        let kept = versions.min { KeyBytes.compare(RecordCodec.encode($0), RecordCodec.encode($1)) < 0 }
        #expect(paid[1] == kept)
        #expect(try a.counts().conflicts == 1 && b.counts().conflicts == 1)
        // Both go on with the register that won.
        let amount = try #require(try a.allowanceSchedules().first).amountCents
        clockA.millis += 7 * Self.day
        #expect(try a.payDueAllowances(now: clockA.millis).map(\.transaction.amountCents) == [amount])
    }

    @Test("an undone payment is compensated and never paid again")
    func undoPayment() throws {
        let (a, clock, _, _) = try pair()
        try a.setAllowanceAndPay("Ava", amountCents: 500, every: .week, on: nil, note: "weekly")
        let undone = try a.undo()
        #expect(undone.original.source == Allowance.source && undone.balanceCents == 0)
        #expect(try a.payDueAllowances(now: clock.millis).isEmpty)
        #expect(try a.resolveChild("Ava").balanceCents == 0)
    }

    @Test("monthly: day 1 to 28 only; the first period is on or after today")
    func monthly() throws {
        let (a, clock, _, _) = try pair()
        #expect(throws: LedgerError.self) { try a.setAllowanceAndPay("Ava", amountCents: 100, every: .month, on: 29, note: nil) }
        try a.setAllowanceAndPay("Ava", amountCents: 100, every: .month, on: 3, note: nil)  // today, the 3rd
        clock.millis += 62 * Self.day  // into February
        try a.payDueAllowances(now: clock.millis)
        let days = try payments(a).map { Timestamp.civilDate(day: $0.createdAtMillis / Self.day) }
        #expect(days.map(\.month) == [12, 1, 2] && days.allSatisfy { $0.day == 3 })
    }

    @Test("one call pays at most the limit, oldest first; the next calls pay the rest")
    func bounded() throws {
        let (a, clock, _, _) = try pair()
        try a.setAllowanceAndPay("Ava", amountCents: 1, every: .week, on: nil, note: nil)
        clock.millis += Int64(Limits.allowancePaymentsPerCallMax + 10) * 7 * Self.day
        let first = try a.payDueAllowances(now: clock.millis)
        #expect(first.count == Limits.allowancePaymentsPerCallMax)
        #expect(first.first?.transaction.createdAtMillis == (Self.thursdayDay + 7) * Self.day)
        #expect(try a.payDueAllowances(now: clock.millis).count == 10)
        #expect(try a.payDueAllowances(now: clock.millis).isEmpty)
    }
}

extension Replica {
    /// Sets an allowance, then pays what is due, as the CLI and the simulator do.
    @discardableResult
    func setAllowanceAndPay(_ query: String, amountCents: Int64, every: AllowanceRule.Every, on day: Int64?,
                            note: String?) throws -> AllowanceSchedule {
        try setAllowance(query, amountCents: amountCents, every: every, on: day, note: note)
        try payDueAllowances(now: clock.nowMillis())
        return try allowanceSchedules().first { $0.childID == (try resolveChild(query).id) }!
    }
}

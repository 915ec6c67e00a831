@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

/// The household's limit for asking first (issue 41, point 5): a last-writer-wins register of the
/// household (field 12, cents), $1,000 until set, 0 for "never ask", merged like the time zone.
@Suite("The household's limit for asking first")
struct HouseholdLimitTests {
    @Test("unset is $1,000; set, never and unchanged; only cents of 0 or more fit")
    func defaultAndSet() throws {
        let r = try makeReplica(seed: 1)
        #expect(try r.householdConfirmAbove() == HouseholdLimit.defaultCents, "no household yet")
        try r.createHousehold(name: "Home")
        #expect(try r.householdConfirmAbove() == 100_000)
        #expect(throws: LedgerError.self) { try r.setHouseholdConfirmAbove(100_000) }  // the default: unchanged
        #expect(try r.setHouseholdConfirmAbove(25_000) == 25_000)
        #expect(try r.householdConfirmAbove() == 25_000)
        #expect(throws: LedgerError.self) { try r.setHouseholdConfirmAbove(25_000) }
        #expect(throws: LedgerError.self) { try r.setHouseholdConfirmAbove(-1) }
        #expect(try r.setHouseholdConfirmAbove(HouseholdLimit.neverCents) == 0)
        #expect(try r.setHouseholdConfirmAbove(100_000) == 100_000, "back to the default, written")
        #expect(try r.verify().isIntact)
        #expect(FieldValue.integer(0).fits(.householdConfirmAbove) && FieldValue.integer(.max).fits(.householdConfirmAbove))
        #expect(!FieldValue.integer(-1).fits(.householdConfirmAbove) && !FieldValue.text("1000").fits(.householdConfirmAbove))
        #expect(Field.householdConfirmAbove.rawValue == 12 && Field.householdConfirmAbove.description == "confirmAbove")
        #expect(HouseholdLimit.asks(100_001, limit: 100_000) && !HouseholdLimit.asks(100_000, limit: 100_000))
        #expect(HouseholdLimit.asks(-100_001, limit: 100_000) && !HouseholdLimit.asks(.max, limit: HouseholdLimit.neverCents))
    }

    @Test("a later change on another laptop wins everywhere; the earlier one is no conflict")
    func laterWins() throws {
        let clock = TestClock(1_000_000)
        let a = try makeReplica(seed: 1, clock: clock), b = try makeReplica(seed: 2, clock: clock)
        try a.createHousehold(name: "Home")
        try b.receive(a.changeLog())
        #expect(try b.householdConfirmAbove() == 100_000)
        try a.setHouseholdConfirmAbove(50_000)
        try exchange(a, b)
        #expect(try b.householdConfirmAbove() == 50_000)
        clock.millis += 1_000
        try b.setHouseholdConfirmAbove(0)
        try exchange(a, b)
        #expect(try a.householdConfirmAbove() == 0 && b.householdConfirmAbove() == 0)
        #expect(try a.fieldConflicts().isEmpty && a.digest() == b.digest())
    }

    @Test("concurrent changes: the greatest (HLC, origin) wins on both, whatever the order; the loser is journaled")
    func concurrentTieBreak() throws {
        let clock = TestClock(1_000_000)
        let home = try makeReplica(seed: 9, clock: clock)
        let household = try home.createHousehold(name: "Home").id
        // Two laptops holding the same changes at the same clock reading write at one HLC: the
        // origin decides.
        let a = try makeReplica(seed: 1, clock: clock), b = try makeReplica(seed: 2, clock: clock)
        try a.receive(home.changeLog())
        try b.receive(home.changeLog())
        try a.setHouseholdConfirmAbove(25_000)
        try b.setHouseholdConfirmAbove(500)
        let fromA = try a.changeLog(), fromB = try b.changeLog()
        // Each order of arrival on a third laptop, and the two laptops themselves.
        let ab = try makeReplica(seed: 3, clock: clock), ba = try makeReplica(seed: 4, clock: clock)
        try ab.receive(fromA); try ab.receive(fromB)
        try ba.receive(fromB); try ba.receive(fromA)
        try exchange(a, b)
        let values = try [a, b, ab, ba].map { try $0.householdConfirmAbove() }
        #expect(Set(values).count == 1, "\(values)")
        let conflicts = try a.fieldConflicts(entity: household)
        let conflict = try #require(conflicts.first)
        #expect(conflicts.count == 1 && conflict.field == .householdConfirmAbove)
        #expect(conflict.winnerStamp.hlc == conflict.loserStamp.hlc, "the same HLC: the tie-break decides")
        #expect(conflict.winnerStamp.origin > conflict.loserStamp.origin)
        #expect(conflict.winnerValue == .integer(values[0]))
        #expect(Set([conflict.winnerValue, conflict.loserValue]) == [.integer(25_000), .integer(500)])
        for r in [b, ab, ba] { #expect(try r.fieldConflicts(entity: household) == conflicts && r.digest() == a.digest()) }
    }
}

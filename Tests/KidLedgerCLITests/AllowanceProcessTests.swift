import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing

/// Recurring allowance with real processes: two laptops that set the same allowance while apart
/// both pay today's period, and after a sync over TCP on 127.0.0.1 it is one transaction.
@Suite("Allowance across real processes")
struct AllowanceProcessTests {
    @Test func bothLaptopsPayTodaysPeriodOnce() throws {
        let a = TestLedger(), b = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove() }
        let daemon = try smithsServing(a, in: group)
        try ok(b, "join", try inviteCode(a))
        #expect(try digest(a) == digest(b))

        // Apart (B does not sync): both parents set Ava's weekly allowance, today's weekday.
        let setA = try json(a, "allowance", "set", "Ava", "5", "--every", "week", "--note", "weekly")
        let setB = try json(b, "allowance", "set", "Ava", "5", "--every", "week", "--note", "weekly")
        // Each laptop holds today's payment: `allowance set` pays it, unless A's daemon, woken by
        // the schedule's commit (it pays after every change), paid it between the two.
        func allowancePayments(_ home: TestLedger) throws -> [String] {
            let history = try json(home, "history", "--limit", "0")["transactions"] as? [[String: Any]] ?? []
            return history.compactMap { $0["transaction"] as? [String: Any] }.filter { $0["source"] as? String == "allowance" }.compactMap { $0["id"] as? String }
        }
        let paidA = try allowancePayments(a), paidB = try allowancePayments(b)
        #expect(!paidA.isEmpty && !paidB.isEmpty, "\(setA) \(setB)")
        #expect(Set((setB["payments"] as? [[String: Any]] ?? []).compactMap { ($0["transaction"] as? [String: Any])?["id"] as? String }) == Set(paidB),
                "B runs no daemon: its `allowance set` pays and reports the period")
        // One schedule (its id derived from the household and the child), one id per period.
        let scheduleA = (setA["schedule"] as? [String: Any])?["id"] as? String
        #expect(scheduleA != nil && scheduleA == (setB["schedule"] as? [String: Any])?["id"] as? String)

        try ok(b, "sync")
        #expect(try digest(a) == digest(b))
        for home in [a, b] {
            let history = try json(home, "history", "--limit", "0")["transactions"] as? [[String: Any]] ?? []
            let payments = history.compactMap { $0["transaction"] as? [String: Any] }.filter { $0["source"] as? String == "allowance" }
            let periods = payments.compactMap { $0["createdAtMillis"] as? Int }
            #expect(Set(periods).count == periods.count && !periods.isEmpty, "one payment per period: \(payments)")
            #expect(Set(payments.compactMap { $0["id"] as? String }) == Set(paidA).union(paidB), "\(payments)")
            let status = try json(home, "status")
            #expect((status["sameIdConflicts"] as? [Any])?.isEmpty ?? true, "\(status)")
            let list = try json(home, "allowance", "list")["schedules"] as? [[String: Any]] ?? []
            #expect(list.count == 1 && list.first?["amountCents"] as? Int == 500 && list.first?["active"] as? Bool == true, "\(list)")
        }
        try expectVerified(a, "A")
        try expectVerified(b, "B")

        // Stopped on B, synced: neither pays again, and A lists it stopped.
        try ok(b, "allowance", "stop", "Ava")
        try ok(b, "sync")
        let list = try json(a, "allowance", "list")["schedules"] as? [[String: Any]] ?? []
        #expect(list.first?["active"] as? Bool == false && list.first?["stoppedAtMillis"] is Int, "\(list)")
        #expect(daemon.stop() == 0, "\(daemon.log)")
    }
}

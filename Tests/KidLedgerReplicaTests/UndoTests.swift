@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

@Suite("Undo")
struct UndoTests {
    @Test("undo takes the newest eligible entry across children, then the next, then refuses")
    func newestAcrossChildren() throws {
        let clock = TestClock(1_000_000)
        let r = try householdWithChildren(["Ava", "Ben"], seed: 5, clock: clock)
        clock.millis += 10
        let toAva = try r.post("Ava", signedCents: 100, note: "", source: "give")
        clock.millis += 10
        let toBen = try r.post("Ben", signedCents: 200, note: "chores", source: "give")
        clock.millis += 10

        let first = try r.undo()
        #expect(first.original == toBen.transaction)
        #expect(first.undo.id == LedgerTransaction.undoID(for: toBen.transaction.id))
        #expect(first.undo.amountCents == -200)
        #expect(first.undo.reverses == toBen.transaction.id)
        #expect(first.undo.source == "undo")
        #expect(first.undo.note == "undo chores")
        #expect(first.childName == "Ben")
        #expect(first.balanceCents == 0)

        clock.millis += 10
        let second = try r.undo()
        #expect(second.original == toAva.transaction)
        #expect(second.undo.note == "undo " + Money.format(cents: Int64(100)))
        #expect(second.balanceCents == 0)

        clock.millis += 10
        #expect(throws: LedgerError.nothingToUndo) { try r.undo() }
        #expect(try r.children().map(\.balanceCents) == [0, 0])
        #expect(try r.history().map(\.isReversed) == [false, false, true, true])
    }

    @Test("a short id finds its transactions by their last digits: any case, dashes ignored, a shared tail gives several")
    func transactionIDsByTail() throws {
        let clock = TestClock(1_000_000)
        let r = try householdWithChildren(["Ava"], seed: 6, clock: clock)
        var ids: [RecordID] = []
        for i in 0..<17 {   // 17 ids: two of them share their last hex digit
            clock.millis += 10
            ids.append(try r.post("Ava", signedCents: Int64(i + 1), note: "", source: "give").transaction.id)
        }
        for id in ids {
            #expect(try r.transactionIDs(endingWith: id.hex) == [id])
            #expect(try r.transactionIDs(endingWith: id.description.uppercased()) == [id])
            #expect(try r.transactionIDs(endingWith: String(id.hex.suffix(8))) == [id], "the random tail tells 17 apart")
        }
        let byDigit = Dictionary(grouping: ids) { $0.hex.suffix(1) }
        let shared = try #require(byDigit.first { $0.value.count > 1 })
        #expect(try r.transactionIDs(endingWith: String(shared.key)) == shared.value.sorted())
        #expect(try r.transactionIDs(endingWith: String(shared.key), limit: 1).count == 1)
        #expect(try r.transactionIDs(endingWith: "not hex").isEmpty)
        #expect(try r.transactionIDs(endingWith: "").isEmpty)
        #expect(try r.transactionIDs(endingWith: String(repeating: "0", count: 33)).isEmpty)
    }

    @Test("undo takes the newest entry even when both were made in the same millisecond",
          arguments: UInt64(0)..<8)
    func newestWithinOneMillisecond(seed: UInt64) throws {
        // The wall clock does not move (or the HLC runs ahead of it after hearing from a
        // fast peer): both entries get the same createdAt, but Ben's is still the newer one.
        let r = try householdWithChildren(["Ava", "Ben"], seed: seed, clock: FixedClock(millis: 1_000_000))
        try r.post("Ava", signedCents: 100, note: "", source: "give")
        try r.post("Ben", signedCents: 200, note: "", source: "give")
        let undoneName = try r.undo().childName
        #expect(undoneName == "Ben", "seed \(seed): Ben's entry is the newer one")
    }

    @Test("undo takes the newest entry while the HLC runs ahead of a slow wall clock",
          arguments: UInt64(0)..<8)
    func newestWhileClockLags(seed: UInt64) throws {
        let slow = TestClock(1_000_000)
        let fast = try householdWithChildren(["Ava", "Ben"], seed: seed, clock: FixedClock(millis: 1_000_500))
        let r = try makeReplica(seed: seed + 100, clock: slow)
        try r.receive(try fast.changeLog(), now: slow.millis)
        slow.millis += 1
        let toAva = try r.post("Ava", signedCents: 100, note: "", source: "give")
        slow.millis += 1
        let toBen = try r.post("Ben", signedCents: 200, note: "", source: "give")
        slow.millis += 1
        // Both carry the HLC's time (after the fast peer's), not the lagging wall clock's, and
        // each local change gets its own millisecond.
        #expect(toAva.transaction.createdAtMillis > 1_000_500)
        #expect(toBen.transaction.createdAtMillis > toAva.transaction.createdAtMillis)
        let undoneName = try r.undo().childName
        #expect(undoneName == "Ben", "seed \(seed): Ben's entry is the newer one")
    }

    @Test("an undo entry is never undone itself")
    func undoEntriesAreNotEligible() throws {
        let clock = TestClock(1_000_000)
        let r = try householdWithChildren(["Ava"], seed: 5, clock: clock)
        clock.millis += 1
        try r.post("Ava", signedCents: 300, note: "", source: "give")
        clock.millis += 1
        let undo = try r.undo()
        clock.millis += 1
        #expect(throws: LedgerError.nothingToUndo) { try r.undo() }
        #expect(try r.allTransactions().filter(\.isUndo) == [undo.undo])
        #expect(try r.balance(of: undo.undo.childID) == 0)

        // A later entry is undone; the older undo entry stays.
        clock.millis += 1
        let later = try r.post("Ava", signedCents: -50, note: "", source: "take")
        clock.millis += 1
        #expect(try r.undo().original == later.transaction)
        #expect(try r.balance(of: undo.undo.childID) == 0)
        #expect(throws: LedgerError.nothingToUndo) { try r.undo() }
    }

    @Test("undo with no household or no transactions")
    func nothingToUndo() throws {
        let empty = try makeReplica(seed: 1)
        #expect(throws: LedgerError.noHousehold) { try empty.undo() }
        let r = try householdWithChildren(["Ava"], seed: 2)
        let before = try r.view()
        #expect(throws: LedgerError.nothingToUndo) { try r.undo() }
        #expect(try r.view() == before)
    }

    @Test("concurrent undo of one entry on two replicas compensates once after exchange")
    func concurrentUndo() throws {
        let clockA = TestClock(1_000_000), clockB = TestClock(1_000_000)
        let a = try householdWithChildren(["Ava", "Ben"], seed: 5, clock: clockA)
        clockA.millis += 5
        try a.post("Ava", signedCents: 1_000, note: "", source: "give")
        clockA.millis += 5
        let gift = try a.post("Ben", signedCents: 700, note: "birthday", source: "give")
        let b = try makeReplica(seed: 6, clock: clockB)
        clockB.millis = clockA.millis + 3
        try b.receive(try a.changeLog(), now: clockB.millis)

        clockA.millis += 20
        clockB.millis += 40
        let undoA = try a.undo()
        let undoB = try b.undo()
        #expect(undoA.original == gift.transaction && undoB.original == gift.transaction)
        #expect(undoA.undo.id == undoB.undo.id)
        #expect(undoA.undo != undoB.undo)   // different createdAt

        try a.receive(try b.ownChanges(), now: clockA.millis)
        try b.receive(try a.ownChanges(), now: clockB.millis)
        for r in [a, b] {
            #expect(try r.child(named: "Ben").balanceCents == 0)
            #expect(try r.child(named: "Ava").balanceCents == 1_000)
            #expect(try r.counts().conflicts == 0)
            #expect(try r.allTransactions().filter(\.isUndo).count == 1)
            // The next undo goes to Ava's entry, not the already compensated gift.
        }
        #expect(try a.view() == b.view())
        clockA.millis += 10
        #expect(try a.undo().original.childID == a.child(named: "Ava").id)
    }

    @Test("undo refuses to take a balance out of range and writes nothing")
    func undoOverflow() throws {
        let clockA = TestClock(1_000_000), clockB = TestClock(1_000_000)
        let a = try householdWithChildren(["Ava"], seed: 5, clock: clockA)
        let b = try makeReplica(seed: 6, clock: clockB)
        try b.receive(try a.changeLog())
        clockA.millis += 10
        try a.post("Ava", signedCents: .max, note: "", source: "give")
        clockB.millis += 20
        try b.post("Ava", signedCents: 1, note: "", source: "give")
        clockB.millis += 30
        try b.post("Ava", signedCents: -1, note: "", source: "take")   // B's newest: Ava's -1
        try a.receive(try b.ownChanges(), now: clockA.millis)
        #expect(try a.child(named: "Ava").balanceCents == Int128(Int64.max))
        let before = try a.view()
        #expect(throws: LedgerError.overflow(child: "Ava")) { try a.undo() }
        #expect(try a.view() == before)
    }
}

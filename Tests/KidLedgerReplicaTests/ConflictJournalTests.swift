import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerTestSupport

/// The conflict journal: concurrent renames are recorded with who, when, what and the winner,
/// the same on every replica whatever the arrival order; sequential renames are not conflicts.
@Suite("Conflict journal")
struct ConflictJournalTests {
    @Test("two parents rename Ben at once: the losing name is journaled, identically on both")
    func concurrentRenames() throws {
        let a = try householdWithChildren(["Ben"], seed: 1, clock: FixedClock(millis: 1_000_000))
        let b = try makeReplica(seed: 2, clock: FixedClock(millis: 1_000_000))
        try b.receive(try a.changeLog())
        try a.renameChild("Ben", to: "Benjamin")
        try b.renameChild("Ben", to: "Benny")
        let fromA = try a.ownChanges(), fromB = try b.ownChanges()
        try a.receive(fromB.filter { c in !(try a.changeLog()).contains(c) })
        try b.receive(fromA.filter { c in !(try b.changeLog()).contains(c) })
        #expect(try a.digest() == b.digest())
        let journalA = try a.fieldConflicts(), journalB = try b.fieldConflicts()
        #expect(journalA == journalB)
        #expect(journalA.count == 1)
        let entry = try #require(journalA.first)
        let names: Set<String> = ["Benjamin", "Benny"]
        #expect(names.contains(entry.loserValue.description) && names.contains(entry.winnerValue.description))
        #expect(entry.loserValue != entry.winnerValue)
        #expect(entry.field == .childName)
        #expect(try a.children(includeArchived: true).first?.name == entry.winnerValue.description)
    }

    @Test("sequential renames, in any arrival order, are not conflicts")
    func sequentialRenames() throws {
        let clock = TestClock(1_000_000)
        let a = try householdWithChildren(["Ben"], seed: 3, clock: clock)
        clock.millis += 10
        try a.renameChild("Ben", to: "Benji")
        clock.millis += 10
        try a.renameChild("Benji", to: "Benjamin")
        #expect(try a.fieldConflicts().isEmpty)
        // Another replica gets the changes newest first (each after its predecessor is refused).
        let r = try makeReplica(seed: 4)
        var rng = SplitMix64(seed: 9)
        _ = try r.receiveShuffledWithRetry(try a.changeLog(), using: &rng)
        #expect(try r.fieldConflicts().isEmpty)
        #expect(try r.digest() == a.digest())
    }
}

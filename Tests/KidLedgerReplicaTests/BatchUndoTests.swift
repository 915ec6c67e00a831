@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

@Suite("Batch undo")
struct BatchUndoTests {
    /// A household with Ava, Ben and Cy on `a`, a give-all of $2 after a gift to Ava, and `b`
    /// holding all of it.
    func twoLaptopsAfterGiveAll() throws -> (a: Replica, b: Replica, clockA: TestClock, clockB: TestClock, batch: [Posting], gift: Posting) {
        let clockA = TestClock(1_000_000), clockB = TestClock(1_000_000)
        let a = try householdWithChildren(["Ava", "Ben", "Cy"], seed: 5, clock: clockA)
        clockA.millis += 10
        let gift = try a.post("Ava", signedCents: 500, note: "birthday", source: "give")
        clockA.millis += 10
        let batch = try a.postAll(signedCents: 200, note: "weekly", source: "give-all")
        let b = try makeReplica(seed: 6, clock: clockB)
        clockB.millis = clockA.millis + 3
        try b.receive(try a.changeLog(), now: clockB.millis)
        return (a, b, clockA, clockB, batch, gift)
    }

    @Test("undoing a give-all reverses every entry of the batch in one change")
    func wholeBatchInOneChange() throws {
        let (a, _, clockA, _, batch, gift) = try twoLaptopsAfterGiveAll()
        clockA.millis += 10
        let changesBefore = try a.changeLog().count
        let u = try a.undo()
        #expect(try a.changeLog().count == changesBefore + 1, "one change holds every compensation")
        #expect(u.entries.count == 3)
        #expect(Set(u.entries.map(\.original)) == Set(batch.map(\.transaction)))
        #expect(u.entries.allSatisfy { $0.undo.id == LedgerTransaction.undoID(for: $0.original.id) && $0.undo.amountCents == -200 })
        #expect(u.entries.map(\.undo.createdAtMillis).allSatisfy { $0 == u.undo.createdAtMillis })
        #expect(try a.children().map(\.balanceCents) == [500, 0, 0])
        // The next undo is the gift, then nothing.
        clockA.millis += 10
        let next = try a.undo()
        #expect(next.original == gift.transaction && next.entries.count == 1)
        #expect(throws: LedgerError.nothingToUndo) { try a.undo() }
    }

    @Test("undo ID of one entry of a batch reverses the batch; the preview lists it with its author")
    func namedEntryOfBatch() throws {
        let (a, _, clockA, _, batch, _) = try twoLaptopsAfterGiveAll()
        let middle = batch[1].transaction
        let preview = try a.undoPreview(.entry(middle.id))
        #expect(preview.map(\.transaction.id).first == middle.id)
        #expect(Set(preview.map(\.transaction)) == Set(batch.map(\.transaction)))
        #expect(preview.allSatisfy { $0.author.origin == a.replicaID })
        let before = try a.view()
        #expect(try a.view() == before, "the preview changes nothing")
        clockA.millis += 10
        let u = try a.undo(.entry(middle.id))
        #expect(u.original == middle && u.entries.count == 3)
        #expect(throws: LedgerError.cannotUndo("entry \(middle.id) is already undone")) { try a.undo(.entry(middle.id)) }
        #expect(throws: LedgerError.cannotUndo("entry \(u.undo.id) is itself an undo: an undo cannot be undone")) {
            try a.undo(.entry(u.undo.id))
        }
        let unknown = RecordID(high: 1, low: 2)
        #expect(throws: LedgerError.unknownEntry(unknown.description)) { try a.undo(.entry(unknown)) }
    }

    @Test("two laptops undoing the same batch (or one the batch after the other an entry of it) compensate each entry once",
          arguments: [false, true])
    func twoLaptopsOnePerEntry(bUndoesAnEntryFirst: Bool) throws {
        let (a, b, clockA, clockB, batch, gift) = try twoLaptopsAfterGiveAll()
        clockA.millis += 20
        clockB.millis += 40
        try a.undo()
        if bUndoesAnEntryFirst {
            try b.undo(.entry(batch[2].transaction.id))
        } else {
            try b.undo()
        }
        try a.receive(try b.ownChanges(), now: clockA.millis)
        try b.receive(try a.ownChanges(), now: clockB.millis)
        for r in [a, b] {
            let undos = try r.allTransactions().filter(\.isUndo)
            #expect(undos.count == 3)
            #expect(Set(undos.compactMap(\.reverses)) == Set(batch.map(\.transaction.id)))
            #expect(try r.children().map(\.balanceCents) == [500, 0, 0])
            #expect(try r.counts().conflicts == 0)
        }
        #expect(try a.view() == b.view())
        clockA.millis += 10
        #expect(try a.undo().original == gift.transaction)
    }

    @Test("a batch entry undone alone earlier is not compensated again")
    func remainingEntriesOnly() throws {
        let (a, b, clockA, clockB, batch, _) = try twoLaptopsAfterGiveAll()
        // An older kidledger (or an import) reversed Ben's entry alone.
        let ben = batch[1].transaction
        let lone = LedgerTransaction(id: LedgerTransaction.undoID(for: ben.id), childID: ben.childID, amountCents: -ben.amountCents,
                                     createdAtMillis: clockB.millis + 1, note: "undo weekly", source: "undo", reverses: ben.id)
        clockB.millis += 5
        try b.commitLocal { _, _ in ([.addTransaction(lone)], ()) }
        try a.receive(try b.ownChanges(), now: clockA.millis)
        clockA.millis += 10
        let u = try a.undo(.entry(batch[0].transaction.id))
        #expect(Set(u.entries.map(\.original.id)) == [batch[0].transaction.id, batch[2].transaction.id])
        #expect(try a.children().map(\.balanceCents) == [500, 0, 0])
    }

    @Test("undo --mine skips another member's newer entry; equal times order by id")
    func mine() throws {
        let (a, b, clockA, clockB, batch, _) = try twoLaptopsAfterGiveAll()
        clockB.millis += 50
        let dads = try b.post("Ben", signedCents: 900, note: "from Dad", source: "give")
        try a.receive(try b.ownChanges(), now: clockA.millis)
        clockA.millis += 100
        #expect(try a.undoPreview(.newest).first?.transaction == dads.transaction)
        let u = try a.undo(.mine)
        #expect(Set(u.entries.map(\.original)) == Set(batch.map(\.transaction)))
        #expect(try a.child(named: "Ben").balanceCents == 900)
        clockB.millis += 200
        try b.receive(try a.ownChanges(), now: clockB.millis)
        #expect(try b.undo(.mine).original == dads.transaction)
        clockB.millis += 10
        #expect(throws: LedgerError.nothingOfYoursToUndo) { try b.undo(.mine) }
    }

    @Test("a batch that one child's balance can't take back is refused whole")
    func overflowRefusesTheBatch() throws {
        let clock = TestClock(1_000_000)
        let r = try householdWithChildren(["Ava", "Ben"], seed: 5, clock: clock)
        clock.millis += 10
        let takeAll = try r.postAll(signedCents: -1, note: "", source: "take-all")
        clock.millis += 10
        try r.post("Ava", signedCents: .max, note: "", source: "give")   // Ava at Int64.max - 1
        clock.millis += 10
        try r.post("Ava", signedCents: 1, note: "", source: "give")      // Ava at Int64.max
        let before = try r.view()
        clock.millis += 10
        #expect(throws: LedgerError.overflow(child: "Ava")) { try r.undo(.entry(takeAll[1].transaction.id)) }
        #expect(try r.view() == before, "nothing written, not even Ben's compensation")
    }

    @Test("an entry of the batch waiting for its child is compensated with the rest; both apply when the child arrives")
    func deferredEntryOfTheBatch() throws {
        let clock = TestClock(1_000_000)
        let a = try householdWithChildren(["Ava"], seed: 5, clock: clock)
        let b = try makeReplica(seed: 6, clock: clock), c = try makeReplica(seed: 7, clock: clock), d = try makeReplica(seed: 8, clock: clock)
        try c.receive(try a.changeLog(), now: clock.millis)
        clock.millis += 10
        try c.addChild(name: "Zoe")                                   // created on c
        try b.receive(try a.changeLog(), now: clock.millis)
        try b.receive(try c.ownChanges(), now: clock.millis)
        clock.millis += 10
        let batch = try b.postAll(signedCents: 300, note: "weekly", source: "give-all")
        #expect(batch.count == 2)
        // d hears of a and b, not yet of c: Zoe's entry waits for Zoe.
        try d.receive(try a.changeLog(), now: clock.millis)
        try d.receive(try b.ownChanges(), now: clock.millis)
        #expect(try d.children().map(\.name) == ["Ava"])
        clock.millis += 10
        let u = try d.undo()
        #expect(Set(u.entries.map(\.original)) == Set(batch.map(\.transaction)), "the whole batch, Zoe's entry too")
        #expect(u.entries.first { $0.childName == "?" } != nil)
        try d.receive(try c.ownChanges(), now: clock.millis)
        #expect(try d.children().map(\.balanceCents) == [0, 0])
        #expect(try d.allTransactions().filter(\.isUndo).count == 2)
    }
}

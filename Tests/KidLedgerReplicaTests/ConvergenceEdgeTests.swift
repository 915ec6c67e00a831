@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

/// Corners of the merge rules that the random histories do not reach.
@Suite("Convergence corners")
struct ConvergenceEdgeTests {
    @Test("undo entries that disagree on the amount: the conflict count is the same in every order")
    func conflictCountWithDisagreeingUndos() throws {
        let a = try householdWithChildren(["Ava"], seed: 42)
        let log = try a.changeLog()
        let ava = try a.child(named: "Ava").id
        // The original T exists in two versions (e.g. two imports of one file), 5.00 and 7.00.
        // Device P saw the 5.00 one and undid it; devices Q and R saw the 7.00 one and undid it.
        let originalID = RecordID(high: 0x7777, low: 0x8000_0000_0000_0007)
        let undoID = LedgerTransaction.undoID(for: originalID)
        let t5 = transaction(originalID, child: ava, cents: 500, at: 2_000_000, source: "import")
        let t7 = transaction(originalID, child: ava, cents: 700, at: 2_000_000, source: "import")
        let uP = transaction(undoID, child: ava, cents: -500, at: 3_000_000, note: "p", source: "undo", reverses: originalID)
        let uQ = transaction(undoID, child: ava, cents: -700, at: 3_000_001, note: "q", source: "undo", reverses: originalID)
        let uR = transaction(undoID, child: ava, cents: -700, at: 3_000_002, note: "r", source: "undo", reverses: originalID)
        // uP is the smallest payload; uQ and uR are an ordinary undo merge of each other.
        #expect(KeyBytes.compare(RecordCodec.encode(uP), RecordCodec.encode(uQ)) < 0)
        #expect(KeyBytes.compare(RecordCodec.encode(uQ), RecordCodec.encode(uR)) < 0)
        let p = [change(0x10, 1, millis: 2_000_000, [.addTransaction(t5)]), change(0x10, 2, millis: 3_000_000, [.addTransaction(uP)])]
        let q = [change(0x20, 1, millis: 2_000_000, [.addTransaction(t7)]), change(0x20, 2, millis: 3_000_001, [.addTransaction(uQ)])]
        let r = [change(0x30, 1, millis: 3_000_002, [.addTransaction(uR)])]

        let pFirst = try makeReplica(seed: 1), pLast = try makeReplica(seed: 2)
        try pFirst.receive(log + p + q + r)
        try pLast.receive(log + q + r + p)
        #expect(try pFirst.digest() == pLast.digest())
        #expect(try pFirst.history() == pLast.history())
        let first = try pFirst.counts(), last = try pLast.counts()
        #expect(first.conflicts == last.conflicts)
        #expect(first == last)
    }

    @Test("two households created apart then merged: each replica keeps its pinned one; equal pins, equal state")
    func twoHouseholds() throws {
        let a = try makeReplica(seed: 1)
        let alpha = try a.createHousehold(name: "Alpha")
        let b = try makeReplica(seed: 2)
        try b.createHousehold(name: "Beta")
        let alphaLog = try a.ownChanges(), betaLog = try b.ownChanges()
        try a.receive(betaLog)
        try b.receive(alphaLog)
        // The other household's genesis is forged on each: never adopted, counted.
        #expect(try a.household()?.name == "Alpha" && b.household()?.name == "Beta")
        #expect(try a.membershipCounts().forgedHouseholds == 1 && b.membershipCounts().forgedHouseholds == 1)
        // A replica pinned to Alpha that receives the same log in the other order agrees with a.
        let c = try makeReplica(seed: 3)
        try c.pinHousehold(alpha.id, owner: [])
        try c.receive(betaLog)
        try c.receive(alphaLog)
        #expect(try c.digest() == a.digest() && c.household() == a.household())
        #expect(try a.verify().isIntact && c.verify().isIntact)
    }

    @Test("a change stamped at the end of time does not crash the receiver")
    func hostileClockDoesNotCrash() async {
        await #expect(processExitsWith: .success) {
            let r = try! makeReplica(seed: 1)
            try! r.createHousehold(name: "Home")
            let hostile = change(0x66, 1, millis: .max, counter: .max, [
                .setField(entity: RecordID(high: 1, low: 0x8000_0000_0000_0001), field: .childName, value: .text("x")),
            ])
            // Whether it is refused or applied, the replica must survive it and keep working.
            _ = try? r.receive(hostile)
            _ = try? r.addChild(name: "Ava")
        }
    }

    @Test("a change stamped just before the end of time does not poison local writes")
    func nearMaxClockDoesNotCrash() async {
        await #expect(processExitsWith: .success) {
            let r = try! makeReplica(seed: 1)
            try! r.createHousehold(name: "Home")
            let hostile = change(0x66, 1, millis: .max, counter: .max - 1, [
                .setField(entity: RecordID(high: 1, low: 0x8000_0000_0000_0001), field: .childName, value: .text("x")),
            ])
            _ = try? r.receive(hostile)
            _ = try? r.addChild(name: "Ava")
        }
    }

    @Test("a register write for a child that does not exist yet waits invisibly, then applies")
    func registerBeforeChild() throws {
        let a = try householdWithChildren([], seed: 42)
        let log = try a.changeLog()
        try a.addChild(name: "Ava")
        let addAva = try a.changeLog().last!
        let ava = try a.child(named: "Ava").id
        let b = try makeReplica(seed: 43)
        try b.receive(log + [addAva])
        try b.renameChild("Ava", to: "Eva")
        let rename = try b.ownChanges()

        let r = try makeReplica(seed: 44)
        try r.receive(log + rename)
        #expect(try r.children(includeArchived: true).isEmpty)
        try r.receive(addAva)
        #expect(try r.children().map(\.name) == ["Eva"])
        #expect(try r.child(named: "eva").id == ava)
        #expect(try r.view() == b.view())
    }
}

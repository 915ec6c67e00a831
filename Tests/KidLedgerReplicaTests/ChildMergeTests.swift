@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

/// `child merge FROM INTO` (issue 23, point 3): a replicated register on FROM names INTO; balances
/// and history follow it on every replica; concurrent merges resolve by the register rule and, for
/// cycles, by the smallest id (docs/CRDT.md, "Child merges").
@Suite("Child merges")
struct ChildMergeTests {
    static let start: Int64 = 1_796_292_000_000

    /// Two laptops apart: each holds the household, and each adds a child called Max (in two
    /// spellings) and gives to it; then they exchange logs. Returns both, with the two ids.
    func twoMaxes() throws -> (a: Replica, b: Replica, clockA: TestClock, clockB: TestClock, upper: RecordID, lower: RecordID) {
        let clockA = TestClock(Self.start), clockB = TestClock(Self.start)
        let a = try makeReplica(seed: 11, clock: clockA)
        try a.createHousehold(name: "Home")
        let b = try makeReplica(seed: 12, clock: clockB)
        try b.receive(a.changeLog())
        let upper = try a.addChild(name: "Max").id
        let lower = try b.addChild(name: "max").id
        clockA.millis += 10; clockB.millis += 10
        try a.post("Max", signedCents: 100, note: "from Mom", source: "give")
        try b.post("max", signedCents: 200, note: "from Dad", source: "give")
        try exchange(a, b)
        return (a, b, clockA, clockB, upper, lower)
    }

    /// The ids of the children `children()` lists, with their balances.
    func listed(_ r: Replica) throws -> [RecordID: Int128] {
        Dictionary(uniqueKeysWithValues: try r.children().map { ($0.id, $0.balanceCents) })
    }

    @Test("a merge moves the balance and the history; no transaction changes")
    func mergeMovesBalanceAndHistory() throws {
        let (a, b, _, _, upper, lower) = try twoMaxes()
        #expect(Replica.sameNameGroups(try a.children()).count == 1)
        let transactionsBefore = try a.allTransactions()
        let result = try a.mergeChild(upper.hex, into: lower.hex)
        #expect(result.from.id == upper && result.from.mergedInto == lower && result.from.balanceCents == 100)
        #expect(result.into.id == lower && result.into.balanceCents == 300 && result.into.transactionCount == 2)
        #expect(try listed(a) == [lower: 300])
        #expect(Replica.sameNameGroups(try a.children()).isEmpty)
        // The history of the merged child is the union, in time order, under the kept name.
        let history = try a.history(child: lower)
        #expect(history.map(\.transaction.note) == ["from Dad", "from Mom"] || history.map(\.transaction.note) == ["from Mom", "from Dad"])
        #expect(history.allSatisfy { $0.childName == "max" })
        #expect(try a.history(child: upper).count == 2)  // a merged child's history is its effective child's
        #expect(try a.allTransactions() == transactionsBefore)
        // The other laptop follows once it has the register.
        try b.receive(a.changeLog())
        #expect(try listed(b) == [lower: 300])
        #expect(try a.digest() == b.digest())
        #expect(try a.verify().problems.isEmpty && b.verify().problems.isEmpty)
        // Listing merged children shows the merge and each child's own totals.
        let all = try a.children(includeArchived: true, includeMerged: true)
        #expect(all.first { $0.id == upper }?.mergedInto == lower && all.first { $0.id == upper }?.balanceCents == 100)
    }

    @Test("names resolve after a merge: the merged child's name stands for the child it was merged into")
    func namesAfterMerge() throws {
        let (a, _, _, _, upper, lower) = try twoMaxes()
        try a.mergeChild(upper.hex, into: lower.hex)
        #expect(try a.resolveChild("Max").id == lower)
        #expect(try a.resolveChild("max").id == lower)
        #expect(try a.resolveChild(String(upper.hex.prefix(8))).id == lower)
        // Giving to the merged child's name gives to the child it was merged into.
        let p = try a.post("Max", signedCents: 50, note: "", source: "give")
        #expect(p.transaction.childID == lower && p.balanceCents == 350)
        // Its name is free for a new child only when it differs from the kept one.
        #expect(throws: LedgerError.badName("there is already a child named \"MAX\"")) { try a.addChild(name: "MAX") }
    }

    @Test("refusals: itself, merged already, into a merged child, archived, unknown; nothing is written")
    func refusals() throws {
        let (a, _, _, _, upper, lower) = try twoMaxes()
        let ava = try a.addChild(name: "Ava")
        let digest = try a.digest()
        #expect(throws: LedgerError.mergeIntoItself("Ava")) { try a.mergeChild("Ava", into: "ava") }
        #expect(throws: LedgerError.unknownChild("Zed", nearest: nil)) { try a.mergeChild("Zed", into: "Ava") }
        #expect(try a.digest() == digest)
        try a.mergeChild(upper.hex, into: lower.hex)
        #expect(throws: LedgerError.alreadyMerged("Max", into: "max")) { try a.mergeChild(upper.hex, into: "Ava") }
        #expect(throws: LedgerError.alreadyMerged("Max", into: "max")) { try a.mergeChild("Max", into: "Ava") }
        #expect(throws: LedgerError.mergeTargetMerged("Max", into: "max")) { try a.mergeChild("Ava", into: upper.hex) }
        #expect(throws: LedgerError.mergeIntoItself("max")) { try a.mergeChild("max", into: "max") }
        try a.setArchived("Ava", true)
        #expect(throws: LedgerError.archived("Ava")) { try a.mergeChild("max", into: ava.id.hex) }
    }

    @Test("concurrent merges A into B and B into A: the smallest id keeps its identity, in both arrival orders")
    func crossedMerges() throws {
        let (a, b, _, _, upper, lower) = try twoMaxes()
        try a.mergeChild(upper.hex, into: lower.hex)
        try b.mergeChild(lower.hex, into: upper.hex)
        let kept = min(upper, lower)
        // Both arrival orders: a gets b's merge, b gets a's.
        try exchange(a, b)
        #expect(try listed(a) == [kept: 300])
        #expect(try listed(b) == [kept: 300])
        #expect(try a.digest() == b.digest())
        #expect(try a.verify().problems.isEmpty && b.verify().problems.isEmpty)
        // A third replica receiving everything shuffled agrees.
        var rng = SplitMix64(seed: 7)
        let c = try makeReplica(seed: 13)
        try c.receiveShuffledWithRetry(try a.changeLog(), using: &rng)
        #expect(try listed(c) == [kept: 300])
    }

    @Test("one child merged into two others concurrently: the register's winner decides")
    func mergedIntoTwo() throws {
        let (a, b, clockA, clockB, upper, lower) = try twoMaxes()
        let ava = try a.addChild(name: "Ava").id
        try b.receive(a.changeLog())
        clockA.millis += 10
        clockB.millis += 20  // b's write is later: it wins
        try a.mergeChild(upper.hex, into: lower.hex)
        try b.mergeChild(upper.hex, into: ava.hex)
        try exchange(a, b)
        #expect(try listed(a) == [lower: 200, ava: 100])
        #expect(try listed(b) == listed(a))
        #expect(try a.digest() == b.digest())
        #expect(try a.fieldConflicts().count == 1)
    }

    @Test("a chain and a longer cycle resolve the same way everywhere")
    func chainsAndCycles() throws {
        let clock = TestClock(Self.start)
        let a = try makeReplica(seed: 21, clock: clock)
        try a.createHousehold(name: "Home")
        let ids = try ["A", "B", "C"].map { name in
            let id = try a.addChild(name: name).id
            try a.post(name, signedCents: 10, note: "", source: "give")
            return id
        }
        try a.mergeChild("A", into: "B")
        try a.mergeChild("B", into: "C")
        #expect(try listed(a) == [ids[2]: 30])
        // A hostile member closes the cycle C → A (a plain register write, as a modified client
        // could send): the smallest id of the three keeps its identity.
        let log = try a.changeLog()
        let last = log.last!
        let forged = change(last.origin.rawValue, last.sequence + 1, millis: last.hlc.millis + 1,
                            [.setField(entity: ids[2], field: .childMergedInto, value: .text(ids[0].description))])
        try a.receive(forged)
        let smallest = ids.min()!
        #expect(try listed(a) == [smallest: 30])
        let b = try makeReplica(seed: 22)
        var rng = SplitMix64(seed: 3)
        try b.receiveShuffledWithRetry(log + [forged], using: &rng)
        #expect(try listed(b) == [smallest: 30])
        #expect(try a.digest() == b.digest())
    }

    @Test("hostile links: to itself, to no child, to the household, malformed: ignored or refused, never a trap")
    func hostileLinks() throws {
        let clock = TestClock(Self.start)
        let a = try makeReplica(seed: 31, clock: clock)
        let h = try a.createHousehold(name: "Home")
        let ava = try a.addChild(name: "Ava").id
        try a.post("Ava", signedCents: 10, note: "", source: "give")
        let last = try a.changeLog().last!
        var sequence = last.sequence
        func write(_ entity: RecordID, _ value: String) throws {
            sequence += 1
            try a.receive(change(last.origin.rawValue, sequence, millis: last.hlc.millis + Int64(sequence),
                                 [.setField(entity: entity, field: .childMergedInto, value: .text(value))]))
        }
        try write(ava, ava.description)
        #expect(try listed(a) == [ava: 10])
        try write(ava, RecordID(high: 1, low: 2).description)
        #expect(try listed(a) == [ava: 10])
        try write(ava, h.id.description)
        #expect(try listed(a) == [ava: 10])
        try write(h.id, ava.description)
        #expect(try listed(a) == [ava: 10])
        // Not the canonical form: the value does not fit the field.
        #expect(!FieldValue.text(ava.hex).fits(.childMergedInto) && !FieldValue.text(ava.description.uppercased()).fits(.childMergedInto))
        #expect(!FieldValue.integer(1).fits(.childMergedInto) && FieldValue.text(ava.description).fits(.childMergedInto))
        #expect(try a.verify().problems.isEmpty)
    }

    @Test("a merge before its target arrives waits; a transaction of the merged child after the merge counts in the target")
    func arrivalOrders() throws {
        let (a, b, clockA, _, upper, lower) = try twoMaxes()
        let c = try makeReplica(seed: 14)
        try a.mergeChild(upper.hex, into: lower.hex)
        // c gets a's log only where lower's creation (b's origin) is missing: the link waits.
        let fromA = try a.changeLog().filter { $0.origin == a.replicaID }
        let fromB = try b.changeLog().filter { $0.origin == b.replicaID }
        try c.receive(fromA)
        #expect(try listed(c) == [upper: 100])
        try c.receive(fromB)
        #expect(try listed(c) == [lower: 300])
        // b, not knowing the merge, gives to Max (the upper-case one) by id; it counts in max everywhere.
        try b.post(upper.hex, signedCents: 5, note: "late", source: "give")
        try exchange(a, b)
        try c.receive(try b.changeLog().filter { $0.origin == b.replicaID })
        for r in [a, b, c] { #expect(try listed(r) == [lower: 305]) }
        #expect(try a.digest() == c.digest())
        _ = clockA
    }

    @Test("give-all and the allowance skip a merged child; the range check uses the merged sum")
    func giveAllAllowanceAndOverflow() throws {
        let (a, _, clockA, _, upper, lower) = try twoMaxes()
        try a.setAllowance(upper.hex, amountCents: 500, every: .week, on: nil, note: "weekly")
        try a.payDueAllowances(now: clockA.millis)
        #expect(try a.balance(of: upper) == 600)
        let merged = try a.mergeChild(upper.hex, into: lower.hex)
        #expect(merged.stoppedAllowance != nil && merged.into.balanceCents == 800)
        #expect(try a.allowanceSchedules().isEmpty)
        clockA.millis += 7 * Allowance.millisPerDay
        #expect(try a.payDueAllowances(now: clockA.millis).isEmpty)
        let postings = try a.postAll(signedCents: 1, note: "", source: "give-all")
        #expect(postings.map(\.transaction.childID) == [lower] && postings[0].balanceCents == 801)
        // The sum of the two children, not either alone, is checked against Int64.
        #expect(throws: LedgerError.overflow(child: "max")) {
            try a.post("max", signedCents: Int64.max - 800, note: "", source: "give")
        }
        #expect(throws: LedgerError.overflow(child: "max")) {
            try a.postAll(signedCents: Int64.max - 800, note: "", source: "give-all")
        }
        // Undo of a merged child's entry is checked and reported on the effective child too.
        let u = try a.undo(.newest)
        #expect(u.childName == "max" && u.balanceCents == 800)
        #expect(try a.verify().problems.isEmpty)
    }

    @Test("a merge whose sum would leave Int64 is refused")
    func mergeOverflow() throws {
        let (a, _, _, _, upper, lower) = try twoMaxes()
        try a.post(upper.hex, signedCents: Int64.max - 100, note: "", source: "give")
        #expect(throws: LedgerError.overflow(child: "max")) { try a.mergeChild(upper.hex, into: lower.hex) }
    }

    @Test("roots: a pure function of the rows, cycles broken at the smallest id")
    func rootsFunction() {
        func row(_ n: UInt64, _ link: UInt64?) -> ChildSummary {
            var c = ChildSummary(id: RecordID(high: 0, low: n), name: "c\(n)", isArchived: false, sortOrder: 0, createdAtMillis: 0,
                                 balanceCents: 0, transactionCount: 0)
            c.mergeLink = link.map { RecordID(high: 0, low: $0) }
            return c
        }
        // 1 → 2 → 3 → 1 (a cycle), 4 → 3, 5 → 9 (unknown), 6 → 6 (itself), 7 → 8 → 7.
        let rows = [row(1, 2), row(2, 3), row(3, 1), row(4, 3), row(5, 9), row(6, 6), row(7, 8), row(8, 7)]
        #expect(Replica.mergeRoots(rows) == [0, 0, 0, 0, 4, 5, 6, 6])
        #expect(Replica.mergeRoots(Array(rows.reversed())) == [1, 1, 2, 3, 7, 7, 7, 7])
        // A long chain, iterative: no recursion.
        let chain = (0..<50_000).map { row(UInt64($0), $0 == 0 ? nil : UInt64($0 - 1)) }
        #expect(Set(Replica.mergeRoots(chain)) == [0])
    }
}

@Suite("Child unmerges")
struct ChildUnmergeTests {
    @Test("unmerge: the child counts on its own again, everywhere; a round is opened without flipping it")
    func unmerge() throws {
        let base = ChildMergeTests()
        let (a, b, _, _, upper, lower) = try base.twoMaxes()
        try a.mergeChild(upper.hex, into: lower.hex)
        #expect(throws: LedgerError.unchanged("max is not merged into another child (`kidledger children --all` shows merged children)")) {
            try a.unmergeChild("max")
        }
        let (child, was) = try a.unmergeChild(upper.hex)
        #expect(child.id == upper && child.balanceCents == 100 && was.id == lower && was.balanceCents == 200)
        #expect(try base.listed(a) == [upper: 100, lower: 200])
        try b.receive(a.changeLog())
        #expect(try base.listed(b) == [upper: 100, lower: 200])
        // It can be merged again.
        try a.mergeChild(upper.hex, into: lower.hex)
        #expect(try base.listed(a) == [lower: 300])
        #expect(try a.verify().problems.isEmpty)

        // Crossed merges (a round): unmerging the merged one leaves both on their own.
        let (c, d, _, _, x, y) = try base.twoMaxes()
        try c.mergeChild(x.hex, into: y.hex)
        try d.mergeChild(y.hex, into: x.hex)
        try exchange(c, d)
        let kept = min(x, y), merged = max(x, y)
        #expect(try base.listed(c) == [kept: 300])
        try c.unmergeChild(merged.hex)
        let own: [RecordID: Int128] = [x: 100, y: 200]
        #expect(try base.listed(c) == own)
        try d.receive(c.changeLog())
        #expect(try base.listed(d) == own)
        #expect(try c.digest() == d.digest())
    }
}

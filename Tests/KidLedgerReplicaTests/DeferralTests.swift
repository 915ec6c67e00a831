@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

@Suite("Transactions that arrive before their child")
struct DeferralTests {
    /// A makes the household and Ava; B hears of it and gives Ava 5.00 (twice) and undoes one.
    func setup() throws -> (household: [Change], addAva: [Change], fromB: [Change], ava: RecordID) {
        let clockA = TestClock(1_000_000), clockB = TestClock(1_000_000)
        let a = try makeReplica(seed: 1, clock: clockA)
        try a.createHousehold(name: "Home")
        let household = try a.changeLog()
        clockA.millis += 1
        try a.addChild(name: "Ava")
        let addAva = Array(try a.changeLog().dropFirst(household.count))
        let b = try makeReplica(seed: 2, clock: clockB)
        try b.receive(try a.changeLog())
        clockB.millis += 5
        try b.post("Ava", signedCents: 500, note: "", source: "give")
        clockB.millis += 5
        try b.post("Ava", signedCents: 300, note: "", source: "give")
        clockB.millis += 5
        try b.undo()
        return (household, addAva, try b.ownChanges(), try a.child(named: "Ava").id)
    }

    @Test("kept, excluded from balance and history, then placed when the child arrives")
    func deferredThenReleased() throws {
        let (household, addAva, fromB, ava) = try setup()
        #expect(fromB.count == 3)
        let r = try makeReplica(seed: 3)
        #expect(try r.receive(household + fromB).allSatisfy { $0 == .applied })

        var counts = try r.counts()
        #expect(counts.deferred == 3)
        #expect(counts.transactions == 3)
        #expect(counts.children == 0)
        #expect(try r.balance(of: ava) == 0)
        #expect(try r.history().isEmpty)
        #expect(try r.history(child: ava).isEmpty)
        #expect(try r.allTransactions().count == 3)
        #expect(throws: LedgerError.nothingToUndo) { try r.undo() }

        #expect(try r.receive(addAva) == [.applied])
        counts = try r.counts()
        #expect(counts.deferred == 0)
        #expect(counts.transactions == 3)
        #expect(try r.balance(of: ava) == 500)
        #expect(try r.child(named: "Ava").transactionCount == 3)
        #expect(try r.history().count == 3)
        #expect(try r.history(child: ava).map(\.transaction.amountCents) == [-300, 300, 500])

        let causal = try makeReplica(seed: 4)
        try causal.receive(household + addAva + fromB)
        #expect(try r.digest() == causal.digest())
        #expect(try r.view() == causal.view())
    }

    @Test("the digest does not depend on whether a transaction is deferred")
    func digestCountsDeferredTransactions() throws {
        let (household, addAva, fromB, _) = try setup()
        let early = try makeReplica(seed: 3)
        try early.receive(household + fromB)
        let causal = try makeReplica(seed: 4)
        try causal.receive(household + addAva + fromB)
        // Without the child record, the deferred replica differs by exactly that record.
        var expected = try causal.digest()
        let ava = addAva[0].operations.compactMap { op -> ChildRecord? in
            if case .createChild(let c) = op { c } else { nil }
        }[0]
        expected.remove(DigestRecord.child(ava))
        for op in addAva[0].operations {
            if case .setField(let entity, let field, _, _) = op {
                let key = Keys.register(entity, field)
                let stored = try causal.store.read { try $0.get(Tables.registers, key) }!
                expected.remove(DigestRecord.register(key: key, stored: stored))
            }
        }
        #expect(try early.digest() == expected)
    }

    @Test("a same-id conflict while deferred leaves one deferred entry: the winner")
    func conflictWhileDeferred() throws {
        let (household, addAva, _, ava) = try setup()
        let id = RecordID(high: 0x1234, low: 0x8000_0000_0000_0042)
        let tx = transaction(id, child: ava, cents: 900, at: 1_100_000)
        let ty = transaction(id, child: ava, cents: 100, at: 1_100_000)
        let winner = KeyBytes.compare(RecordCodec.encode(tx), RecordCodec.encode(ty)) < 0 ? tx : ty
        let x = change(0x10, 1, millis: 1_100_000, [.addTransaction(tx)])
        let y = change(0x20, 1, millis: 1_100_000, [.addTransaction(ty)])

        let r = try makeReplica(seed: 5)
        try r.receive(household + [x, y])
        #expect(try r.counts().deferred == 1)
        #expect(try r.counts().conflicts == 1)
        try r.receive(addAva)
        #expect(try r.counts().deferred == 0)
        #expect(try r.balance(of: ava) == Int128(winner.amountCents))
        #expect(try r.history().map(\.transaction) == [winner])

        let causal = try makeReplica(seed: 6)
        try causal.receive(household + addAva + [y, x])
        #expect(try r.view() == causal.view())
    }

    @Test("a deferred give-all is released per child as each child arrives")
    func giveAllAcrossLateChildren() throws {
        let a = try makeReplica(seed: 1, clock: FixedClock(millis: 1_000_000))
        try a.createHousehold(name: "Home")
        let household = try a.changeLog()
        try a.addChild(name: "Ava")
        try a.addChild(name: "Ben")
        let log = try a.changeLog()
        let addAva = log[household.count], addBen = log[household.count + 1]
        // B hears of both children and gives to all; R hears from B before it hears A's children.
        let b = try makeReplica(seed: 2, clock: FixedClock(millis: 1_000_010))
        try b.receive(log)
        try b.postAll(signedCents: 75, note: "", source: "give-all")

        let r = try makeReplica(seed: 3)
        try r.receive(household + (try b.ownChanges()))
        #expect(try r.counts().deferred == 2)
        try r.receive(addAva)
        #expect(try r.counts().deferred == 1)
        #expect(try r.child(named: "Ava").balanceCents == 75)
        try r.receive(addBen)
        #expect(try r.counts().deferred == 0)
        #expect(try r.children().map(\.balanceCents) == [75, 75])
        #expect(try r.view() == b.view())
    }
}

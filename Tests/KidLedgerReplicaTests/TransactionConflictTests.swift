@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

@Suite("Same-id transactions")
struct TransactionConflictTests {
    let txID = RecordID(high: 0x1111_2222_3333_4444, low: 0x8555_6666_7777_8888)

    func founding() throws -> (log: [Change], ava: RecordID) {
        let a = try householdWithChildren(["Ava"], seed: 42)
        return (try a.changeLog(), try a.child(named: "Ava").id)
    }

    @Test("one id, two payloads: the smaller canonical payload wins in both orders", arguments: [
        (Int64(500), Int64(700)), (700, 500), (-300, 300), (1, 1_000_000),
    ])
    func sameIDDifferentAmount(amounts: (Int64, Int64)) throws {
        let (log, ava) = try founding()
        let tx = transaction(txID, child: ava, cents: amounts.0, at: 2_000_000)
        let ty = transaction(txID, child: ava, cents: amounts.1, at: 2_000_000)
        let x = change(0x10, 1, millis: 2_000_000, [.addTransaction(tx)])
        let y = change(0x20, 1, millis: 2_000_000, [.addTransaction(ty)])
        let winner = KeyBytes.compare(RecordCodec.encode(tx), RecordCodec.encode(ty)) < 0 ? tx : ty

        let first = try makeReplica(seed: 1), second = try makeReplica(seed: 2)
        #expect(try first.receive(log + [x, y]).allSatisfy { $0 == .applied })
        #expect(try second.receive(log + [y, x]).allSatisfy { $0 == .applied })
        for replica in [first, second] {
            #expect(try replica.balance(of: ava) == Int128(winner.amountCents))
            #expect(try replica.allTransactions() == [winner])
            #expect(try replica.history().map(\.transaction) == [winner])
            let counts = try replica.counts()
            #expect(counts.conflicts == 1)
            #expect(counts.transactions == 1)
            #expect(try replica.child(named: "Ava").transactionCount == 1)
            #expect(try replica.count(Tables.byTime) == 1)
            #expect(try replica.count(Tables.byChild) == 1)
        }
        #expect(try first.view() == second.view())
    }

    @Test("a third payload for the same id still converges, and the conflict count is order-free")
    func threePayloads() throws {
        let (log, ava) = try founding()
        let changes = [Int64(30), 10, 20].enumerated().map { i, cents in
            change(0x10 + UInt64(i), 1, millis: 2_000_000,
                   [.addTransaction(transaction(txID, child: ava, cents: cents, at: 2_000_000 + Int64(i)))])
        }
        var rng = SplitMix64(seed: 3)
        var views: [LedgerView] = []
        for round in 0..<6 {
            let r = try makeReplica(seed: UInt64(round))
            try r.receive(log)
            try r.receive(changes.shuffled(using: &rng))
            views.append(try r.view())
        }
        #expect(Set(views.map(\.digest)).count == 1)
        #expect(views.allSatisfy { $0 == views[0] })
        #expect(views[0].counts.conflicts == 2)
    }

    @Test("two undo entries for one original merge silently and compensate once")
    func concurrentUndoEntriesMerge() throws {
        let (log, ava) = try founding()
        let originalID = RecordID(high: 0xAAAA, low: 0x8000_0000_0000_0001)
        let original = transaction(originalID, child: ava, cents: 1_250, at: 2_000_000)
        let undoID = LedgerTransaction.undoID(for: originalID)
        let u1 = transaction(undoID, child: ava, cents: -1_250, at: 3_000_000, note: "undo from phone",
                             source: "undo", reverses: originalID)
        let u2 = transaction(undoID, child: ava, cents: -1_250, at: 3_000_007, note: "undo from laptop",
                             source: "undo", reverses: originalID)
        let give = change(0x10, 1, millis: 2_000_000, [.addTransaction(original)])
        let x = change(0x10, 2, millis: 3_000_000, [.addTransaction(u1)])
        let y = change(0x20, 1, millis: 3_000_007, [.addTransaction(u2)])
        let winner = KeyBytes.compare(RecordCodec.encode(u1), RecordCodec.encode(u2)) < 0 ? u1 : u2

        let first = try makeReplica(seed: 1), second = try makeReplica(seed: 2)
        try first.receive(log + [give, x, y])
        try second.receive(log + [y, give, x])
        for replica in [first, second] {
            #expect(try replica.balance(of: ava) == 0)
            #expect(try replica.counts().conflicts == 0)
            #expect(try replica.counts().transactions == 2)
            let history = try replica.history()
            #expect(history.map(\.transaction) == [winner, original])
            #expect(history.map(\.isReversed) == [false, true])
            #expect(try replica.child(named: "Ava").transactionCount == 2)
            #expect(throws: LedgerError.nothingToUndo) { try replica.undo() }
        }
        #expect(try first.view() == second.view())
    }

    @Test("a same-id transaction for a different child moves the entry to the winner's child")
    func sameIDDifferentChild() throws {
        let a = try householdWithChildren(["Ava", "Ben"], seed: 42)
        let log = try a.changeLog()
        let ava = try a.child(named: "Ava").id, ben = try a.child(named: "Ben").id
        let tx = transaction(txID, child: ava, cents: 100, at: 2_000_000)
        let ty = transaction(txID, child: ben, cents: 100, at: 2_000_000)
        let winner = KeyBytes.compare(RecordCodec.encode(tx), RecordCodec.encode(ty)) < 0 ? tx : ty
        let x = change(0x10, 1, millis: 2_000_000, [.addTransaction(tx)])
        let y = change(0x20, 1, millis: 2_000_000, [.addTransaction(ty)])
        let first = try makeReplica(seed: 1), second = try makeReplica(seed: 2)
        try first.receive(log + [x, y])
        try second.receive(log + [y, x])
        for replica in [first, second] {
            #expect(try replica.balance(of: winner.childID) == 100)
            #expect(try replica.balance(of: winner.childID == ava ? ben : ava) == 0)
            #expect(try replica.history(child: winner.childID).count == 1)
            #expect(try replica.history(child: winner.childID == ava ? ben : ava).isEmpty)
        }
        #expect(try first.view() == second.view())
    }
}

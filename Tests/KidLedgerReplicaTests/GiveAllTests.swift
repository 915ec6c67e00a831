@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

/// Everything a failed local operation must leave untouched.
struct LocalState: Equatable {
    var view: LedgerView
    var log: [Change]
    var hlc: HLC

    init(_ r: Replica) throws {
        view = try r.view()
        log = try r.changeLog()
        hlc = try r.store.read { try Replica.lastHLC($0) }
    }
}

@Suite("Give-all")
struct GiveAllTests {
    @Test("a give-all that would overflow one child throws and writes nothing", arguments: [0, 1])
    func overflowWritesNothing(richChild: Int) throws {
        let clock = TestClock(1_000_000)
        let r = try householdWithChildren(["Ava", "Ben"], seed: 9, clock: clock)
        let names = ["Ava", "Ben"]
        clock.millis += 1
        try r.post(names[richChild], signedCents: .max - 50, note: "", source: "give")
        clock.millis += 1
        let before = try LocalState(r)
        #expect(throws: LedgerError.overflow(child: names[richChild])) {
            try r.postAll(signedCents: 100, note: "", source: "give-all")
        }
        #expect(try LocalState(r) == before)
        #expect(try r.child(named: names[1 - richChild]).balanceCents == 0)

        // The next change follows without a gap in the sequence.
        let ok = try r.postAll(signedCents: 50, note: "", source: "give-all")
        #expect(ok.map(\.balanceCents).contains(Int128(Int64.max)))
        let log = try r.changeLog()
        #expect(log.count == before.log.count + 1)
        #expect(log.last!.sequence == before.log.last!.sequence + 1)
    }

    @Test("a take-all that would go below Int64.min throws and writes nothing")
    func underflowWritesNothing() throws {
        let r = try householdWithChildren(["Ava", "Ben"], seed: 9)
        try r.post("Ben", signedCents: -.max, note: "", source: "take")
        try r.post("Ben", signedCents: -1, note: "", source: "take")
        #expect(try r.child(named: "Ben").balanceCents == Int128(Int64.min))
        let before = try LocalState(r)
        #expect(throws: LedgerError.overflow(child: "Ben")) {
            try r.postAll(signedCents: -1, note: "", source: "take-all")
        }
        #expect(try LocalState(r) == before)
    }

    @Test("one change, one operation per active child; archived children are left out")
    func shape() throws {
        let clock = TestClock(1_000_000)
        let r = try householdWithChildren(["Ava", "Ben", "Cy"], seed: 9, clock: clock)
        try r.setArchived("Ben", true)
        let changesBefore = try r.counts().changes
        clock.millis = 1_000_042
        let postings = try r.postAll(signedCents: 250, note: "weekly", source: "give-all")
        #expect(postings.map(\.childName) == ["Ava", "Cy"])
        #expect(postings.map(\.balanceCents) == [250, 250])
        #expect(try r.counts().changes == changesBefore + 1)

        let last = try r.changeLog().last!
        #expect(last.origin == r.replicaID)
        #expect(last.operations == postings.map { .addTransaction($0.transaction) })
        let ids = [try r.child(named: "Ava").id, try r.child(named: "Cy").id]
        #expect(postings.map(\.transaction.childID) == ids)
        #expect(Set(postings.map(\.transaction.id)).count == 2)
        for p in postings {
            #expect(p.transaction.amountCents == 250)
            #expect(p.transaction.note == "weekly")
            #expect(p.transaction.source == "give-all")
            #expect(p.transaction.createdAtMillis == last.hlc.millis)
            #expect(p.transaction.createdAtMillis == 1_000_042)
        }
        #expect(try r.child(named: "Ben").balanceCents == 0)
        #expect(try r.child(named: "Ben").transactionCount == 0)
    }

    @Test("give-all needs a household and an active child")
    func noActiveChildren() throws {
        let empty = try makeReplica(seed: 1)
        #expect(throws: LedgerError.noHousehold) { try empty.postAll(signedCents: 1, note: "", source: "give-all") }

        let r = try householdWithChildren([], seed: 2)
        var before = try LocalState(r)
        #expect(throws: LedgerError.noActiveChildren) { try r.postAll(signedCents: 1, note: "", source: "give-all") }
        #expect(try LocalState(r) == before)

        try r.addChild(name: "Ava")
        try r.setArchived("Ava", true)
        before = try LocalState(r)
        #expect(throws: LedgerError.noActiveChildren) { try r.postAll(signedCents: 1, note: "", source: "give-all") }
        #expect(try LocalState(r) == before)
    }

    @Test("a receiver applies a give-all change all or nothing")
    func receiverAllOrNothing() throws {
        let sender = try householdWithChildren(["Ava", "Ben"], seed: 9)
        let founding = try sender.changeLog()
        try sender.postAll(signedCents: 250, note: "", source: "give-all")
        let giveAll = try sender.changeLog().last!
        #expect(giveAll.operations.count == 2)
        let ava = try sender.child(named: "Ava").id, ben = try sender.child(named: "Ben").id

        // A gap: nothing is written.
        let late = try makeReplica(seed: 3)
        try late.receive(Array(founding.dropLast()))
        let lateBefore = try late.view()
        #expect(try late.receive(giveAll) == .gap)
        #expect(try late.view() == lateBefore)

        // A failure in the second operation (Ben's totals are damaged) rolls back the first.
        let receiver = try makeReplica(seed: 4)
        try receiver.receive(founding)
        try receiver.store.write { w in try w.put(Tables.aggregates, Keys.id(ben), [0xFF]) }
        // (Views read Ben's totals, so compare what can still be read.)
        func raw() throws -> [String: Int] {
            try receiver.store.read { r in
                Dictionary(uniqueKeysWithValues: try Tables.all.map { ($0.name, try r.count($0)) })
            }
        }
        let before = (try receiver.digest(), try receiver.changeLog(), try raw(),
                      try receiver.store.read { try Replica.lastHLC($0) })
        #expect(throws: LedgerError.self) { try receiver.receive(giveAll) }
        let after = (try receiver.digest(), try receiver.changeLog(), try raw(),
                     try receiver.store.read { try Replica.lastHLC($0) })
        #expect(after == before)
        #expect(try receiver.store.read { try $0.get(Tables.aggregates, Keys.id(ava)) } == nil)

        // Repaired, the same change applies whole.
        try receiver.store.write { w in try w.delete(Tables.aggregates, Keys.id(ben)) }
        #expect(try receiver.receive(giveAll) == .applied)
        #expect(try receiver.balance(of: ava) == 250)
        #expect(try receiver.balance(of: ben) == 250)
        #expect(try receiver.view() == sender.view())
    }
}

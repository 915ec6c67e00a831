@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

@Suite("Balance range")
struct OverflowTests {
    @Test("balances may reach Int64.max and Int64.min exactly")
    func boundariesAccepted() throws {
        let r = try householdWithChildren(["Ava", "Ben"], seed: 9)
        #expect(try r.post("Ava", signedCents: .max, note: "", source: "give").balanceCents == Int128(Int64.max))
        try r.post("Ben", signedCents: -.max, note: "", source: "take")
        #expect(try r.post("Ben", signedCents: -1, note: "", source: "take").balanceCents == Int128(Int64.min))
    }

    @Test("a post past Int64.max is rejected and nothing changes",
          arguments: [Int64(1), 2, 1_000, .max])
    func aboveMax(extra: Int64) throws {
        let r = try householdWithChildren(["Ava"], seed: 9)
        try r.post("Ava", signedCents: .max, note: "", source: "give")
        let before = try LocalState(r)
        #expect(throws: LedgerError.overflow(child: "Ava")) {
            try r.post("Ava", signedCents: extra, note: "", source: "give")
        }
        #expect(try LocalState(r) == before)
    }

    @Test("a post below Int64.min is rejected and nothing changes",
          arguments: [Int64(-1), -2, -1_000, -.max])
    func belowMin(extra: Int64) throws {
        let r = try householdWithChildren(["Ava"], seed: 9)
        try r.post("Ava", signedCents: -.max, note: "", source: "take")
        try r.post("Ava", signedCents: -1, note: "", source: "take")
        let before = try LocalState(r)
        #expect(throws: LedgerError.overflow(child: "Ava")) {
            try r.post("Ava", signedCents: extra, note: "", source: "take")
        }
        #expect(try LocalState(r) == before)
    }

    @Test("merged balances beyond Int64 are held exactly; a post back into range is accepted")
    func mergedBeyondRange() throws {
        let a = try householdWithChildren(["Ava"], seed: 9)
        let b = try makeReplica(seed: 10)
        try b.receive(try a.changeLog())
        try a.post("Ava", signedCents: .max, note: "", source: "give")
        try b.post("Ava", signedCents: .max, note: "", source: "give")
        try a.receive(try b.ownChanges())
        try b.receive(try a.ownChanges())
        let doubled = Int128(Int64.max) * 2
        #expect(try a.child(named: "Ava").balanceCents == doubled)
        #expect(try a.view() == b.view())
        let before = try LocalState(a)
        #expect(throws: LedgerError.overflow(child: "Ava")) { try a.post("Ava", signedCents: 1, note: "", source: "give") }
        #expect(throws: LedgerError.overflow(child: "Ava")) { try a.post("Ava", signedCents: -1, note: "", source: "take") }
        #expect(try LocalState(a) == before)
        #expect(try a.post("Ava", signedCents: -.max, note: "", source: "take").balanceCents == Int128(Int64.max))
    }

    @Test("other rejected posts write nothing")
    func otherRejections() throws {
        let r = try householdWithChildren(["Ava", "Ben"], seed: 9)
        try r.setArchived("Ben", true)
        let before = try LocalState(r)
        #expect(throws: LedgerError.archived("Ben")) { try r.post("ben", signedCents: 5, note: "", source: "give") }
        #expect(throws: LedgerError.unknownChild("Cy")) { try r.post("Cy", signedCents: 5, note: "", source: "give") }
        #expect(throws: LedgerError.badNote) {
            try r.post("Ava", signedCents: 5, note: String(repeating: "x", count: Limits.noteBytesMax + 1), source: "give")
        }
        #expect(try LocalState(r) == before)
        let longest = String(repeating: "é", count: Limits.noteBytesMax / 2)
        #expect(try r.post("Ava", signedCents: 5, note: longest, source: "give").transaction.note == longest)
    }

    @Test("a post with an invalid source tag is refused instead of writing an unreadable record",
          arguments: ["", String(repeating: "s", count: Limits.sourceBytesMax + 1)])
    func invalidSource(source: String) throws {
        let r = try householdWithChildren(["Ava"], seed: 9)
        let before = try LocalState(r)
        #expect(throws: (any Error).self) { try r.post("Ava", signedCents: 5, note: "", source: source) }
        #expect(throws: (any Error).self) { try r.postAll(signedCents: 5, note: "", source: source) }
        // Whatever happened, the store must still read back (today: "the ledger store is damaged").
        let history = try? r.history()
        #expect(history != nil)
        #expect(try LocalState(r) == before)
    }
}

import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerTestSupport

/// Issue 21, point 3: clock skew is bounded. A received change stamped more than
/// ``Limits/clockAheadMillisMax`` ahead of the receiver's clock is held back (with the rest of its
/// origin) until that clock catches up, so it drags no clock or date forward, and replicas that
/// admit the same changes, in any order, agree (docs/CRDT.md, "Clock skew").
@Suite("Clock skew is bounded")
struct ClockSkewTests {
    let h = OwnedHousehold()
    let now: Int64 = 1_800_000_000_000  // 2027-01-15
    let year: Int64 = 365 * 86_400_000

    /// The owner's replica (clock `clock`) with a child, and a granted spouse's replica holding
    /// the same (clock `spouseClock`).
    func home(_ clock: TestClock, _ spouseClock: TestClock) throws -> (owner: Replica, spouse: Replica) {
        let owner = try h.replica(1, clock: clock)
        owner.signer = h.signer(h.ownerKey)
        try owner.createHousehold(name: "Home", owner: h.ownerKey, salt: h.salt) { TestVerifier.sign($0, key: h.ownerKey) }
        try owner.addChild(name: "Ava")
        try owner.commitMembership([h.grant(h.spouseKey, name: "Dad")])
        let spouse = try h.replica(2, clock: spouseClock)
        try spouse.pinHousehold(h.id, owner: h.ownerKey)
        spouse.signer = h.signer(h.spouseKey)
        try sync(owner, spouse)
        return (owner, spouse)
    }

    /// Batches from `from` to `to` until nothing more is admitted; returns the changes held back
    /// by the last batch. (A batch carries its origins' signed heads at its end, so an early change
    /// holds back the part of its origin the same batch brings before it.)
    @discardableResult
    func sync(_ from: Replica, _ to: Replica) throws -> Int {
        var heldBack = 0
        for _ in 0..<100 {
            let batch = try from.batch(notCoveredBy: try to.versionVector())
            if batch.changes.isEmpty { return 0 }
            let report = try to.applyRemote(batch)
            #expect(report.unauthenticated == 0)
            heldBack = report.heldBack
            if report.applied == 0 { return heldBack }
        }
        Issue.record("sync did not finish")
        return heldBack
    }

    @Test("a rename stamped a year ahead is held back: it drags neither the clock nor the next entry's date, and a later local rename stands while it is held back")
    func farFutureRenameIsHeldBack() throws {
        let ownerClock = TestClock(now), spouseClock = TestClock(now)
        let (owner, spouse) = try home(ownerClock, spouseClock)
        // The owner's clock is wrong by a year (or a modified client stamps what it likes): it
        // gives (this reaches the spouse), then renames and gives again.
        _ = try owner.post("Ava", signedCents: 25, note: "on time", source: "give")
        try sync(owner, spouse)
        ownerClock.millis = now + year
        _ = try owner.renameChild("Ava", to: "Future")
        _ = try owner.post("Future", signedCents: 100, note: "from the future", source: "give")

        #expect(try sync(owner, spouse) == 2)
        #expect(try spouse.children().map(\.name) == ["Ava"])
        #expect(try spouse.children().first?.balanceCents == 25)
        #expect(try spouse.verify().isIntact)

        // The spouse's own next entries are dated by its own clock, not the year-ahead stamp.
        spouseClock.millis = now + 60_000
        _ = try spouse.renameChild("Ava", to: "Eve")
        let posted = try spouse.post("Eve", signedCents: 50, note: "today", source: "give")
        #expect(posted.transaction.createdAtMillis < now + 60_000 + 1_000)
        #expect(try spouse.history().allSatisfy { $0.transaction.createdAtMillis < now + Limits.clockAheadMillisMax })

        // The owner takes the spouse's changes as usual (they are in the owner's past).
        try sync(spouse, owner)
        #expect(try spouse.versionVector() != owner.versionVector())

        // A year later the spouse's clock reaches the stamps: the held-back changes come in, and
        // both replicas hold and show the same.
        spouseClock.millis = now + year
        #expect(try sync(owner, spouse) == 0)
        try sync(spouse, owner)
        #expect(try owner.versionVector() == spouse.versionVector())
        #expect(try owner.digest() == spouse.digest())
        #expect(try owner.children().map(\.name) == spouse.children().map(\.name))
        #expect(try spouse.children().first?.balanceCents == 175)
    }

    @Test("replicas whose clocks admit the far-future changes at different times, in different batches, end identical")
    func admittedLaterOrEarlierTheSame() throws {
        let ownerClock = TestClock(now)
        let (owner, spouse) = try home(ownerClock, TestClock(now))
        let lateClock = TestClock(now), aheadClock = TestClock(now + year)
        let late = try h.replica(3, clock: lateClock), ahead = try h.replica(4, clock: aheadClock)
        for r in [late, ahead] {
            try r.pinHousehold(h.id, owner: h.ownerKey)
            try sync(owner, r)
        }
        ownerClock.millis = now + year / 2
        _ = try owner.renameChild("Ava", to: "Later")
        _ = try spouse.renameChild("Ava", to: "Sooner")
        _ = try spouse.post("Sooner", signedCents: 7, note: "", source: "give")
        // `ahead` takes everything at once; `late` takes the spouse's part now and the owner's
        // far-future rename only when its clock gets there, from the spouse.
        try sync(owner, ahead)
        try sync(spouse, ahead)
        #expect(try sync(owner, late) == 1)
        try sync(spouse, late)
        try sync(late, spouse)
        try sync(owner, spouse)
        #expect(try spouse.children().map(\.name) == ["Sooner"])  // held back at the spouse too
        lateClock.millis = now + year
        try sync(owner, late)
        #expect(try late.digest() == ahead.digest())
        #expect(try late.children().map(\.name) == ["Later"])
        #expect(try ahead.children().map(\.name) == ["Later"])
    }

    @Test("what a batch holds back: from the first early change of an origin back to the last head before it, or to it when the batch has no heads")
    func heldBackCut() {
        let a = ReplicaID(0xA), b = ReplicaID(0xB)
        let late = now + Limits.clockAheadMillisMax + 1
        let changes = [
            change(0xA, 1, millis: now, []), change(0xA, 2, millis: now, []), change(0xA, 3, millis: late, []),
            change(0xA, 4, millis: now, []), change(0xB, 1, millis: now + Limits.clockAheadMillisMax, []),
        ]
        func head(_ origin: ReplicaID, _ sequence: UInt64) -> SignedHead {
            SignedHead(origin: origin, sequence: sequence, signature: [])
        }
        #expect(Replica.heldBack(changes, heads: [], now: now) == [2, 3])
        #expect(Replica.heldBack(changes, heads: [head(a, 1), head(a, 4), head(b, 1)], now: now) == [1, 2, 3])
        #expect(Replica.heldBack(changes, heads: [head(a, 2), head(a, 4)], now: now) == [2, 3])
        #expect(Replica.heldBack(changes, heads: [head(a, 4)], now: now) == [0, 1, 2, 3])
        // At the bound exactly, nothing is held back; a clock near the end of time holds nothing back.
        #expect(Replica.heldBack(changes, heads: [], now: now + 1) == [])
        #expect(Replica.heldBack(changes, heads: [], now: .max) == [])
    }
}

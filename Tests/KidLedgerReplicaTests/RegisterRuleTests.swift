@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

/// Two concurrent renames of one child by different origins.
struct RenameRace: Sendable, CustomTestStringConvertible {
    var x: (origin: UInt64, millis: Int64, counter: UInt32, name: String)
    var y: (origin: UInt64, millis: Int64, counter: UInt32, name: String)
    var winner: String
    var why: String
    var testDescription: String { why }
}

let renameRaces: [RenameRace] = [
    RenameRace(x: (0x10, 5_000_000, 0, "Xan"), y: (0x20, 4_999_999, 9, "Yul"), winner: "Xan",
               why: "later millisecond wins over a higher counter"),
    RenameRace(x: (0x10, 5_000_000, 5, "Xan"), y: (0x20, 5_000_000, 3, "Yul"), winner: "Xan",
               why: "same millisecond: higher counter wins over higher replica id"),
    RenameRace(x: (0x10, 5_000_000, 2, "Zed"), y: (0x20, 5_000_000, 2, "Abe"), winner: "Abe",
               why: "same millisecond and counter: higher replica id wins over larger value"),
    RenameRace(x: (0xFFFF_FFFF_FFFF_FFF1, 5_000_000, 2, "Al"), y: (0x20, 5_000_000, 2, "Zoe"), winner: "Al",
               why: "replica ids compare as unsigned 64-bit numbers"),
]

@Suite("Last-writer-wins registers")
struct RegisterRuleTests {
    /// A household with child Ava made on origin A, and A's log.
    func founding() throws -> (log: [Change], ava: RecordID) {
        let a = try householdWithChildren(["Ava"], seed: 42)
        return (try a.changeLog(), try a.child(named: "Ava").id)
    }

    @Test("concurrent renames: the same winner in both delivery orders", arguments: renameRaces)
    func concurrentRenames(race: RenameRace) throws {
        let (log, ava) = try founding()
        let x = change(race.x.origin, 1, millis: race.x.millis, counter: race.x.counter,
                       [.setField(entity: ava, field: .childName, value: .text(race.x.name))])
        let y = change(race.y.origin, 1, millis: race.y.millis, counter: race.y.counter,
                       [.setField(entity: ava, field: .childName, value: .text(race.y.name))])
        let first = try makeReplica(seed: 1)
        let second = try makeReplica(seed: 2)
        #expect(try first.receive(log + [x, y]).allSatisfy { $0 == .applied })
        #expect(try second.receive(log + [y, x]).allSatisfy { $0 == .applied })
        let names = try [first, second].map { try $0.children(includeArchived: true).map(\.name) }
        #expect(names == [[race.winner], [race.winner]])
        #expect(try first.view() == second.view())
        // A late duplicate of the loser changes nothing.
        let loser = race.winner == race.x.name ? y : x
        #expect(try first.receive(loser) == .duplicate)
        #expect(try first.view() == second.view())
    }

    @Test("equal stamps: the larger canonical value bytes win, whatever the order of the writes")
    func equalStampsCompareValueBytes() throws {
        let (log, ava) = try founding()
        // Canonical bytes are length-prefixed: "Abigail" (7 bytes) encodes larger than "Zed" (3).
        #expect(KeyBytes.compare(RecordCodec.encode(FieldValue.text("Abigail")), RecordCodec.encode(FieldValue.text("Zed"))) > 0)
        let ops: [Operation] = [.setField(entity: ava, field: .childName, value: .text("Abigail")),
                                .setField(entity: ava, field: .childName, value: .text("Zed"))]
        let forward = try makeReplica(seed: 1)
        let backward = try makeReplica(seed: 2)
        try forward.receive(log + [change(0x30, 1, millis: 5_000_000, ops)])
        try backward.receive(log + [change(0x30, 1, millis: 5_000_000, ops.reversed())])
        #expect(try forward.child(named: "abigail").id == ava)
        #expect(try backward.child(named: "abigail").id == ava)
        #expect(try forward.digest() == backward.digest())
    }

    @Test("the register order is a strict total order", arguments: UInt64(0)..<5)
    func winsIsTotalAndAntisymmetric(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let values: [FieldValue] = [.text("a"), .text("b"), .text("ab"), .flag(false), .flag(true), .integer(-1), .integer(3)]
        func random() -> StoredRegister {
            StoredRegister(stamp: Stamp(hlc: HLC(millis: Int64(rng.next() % 3), counter: UInt32(rng.next() % 3)),
                                        origin: ReplicaID(rng.next() % 3)),
                           value: values[Int(rng.next() % UInt64(values.count))])
        }
        for _ in 0..<500 {
            let a = random(), b = random()
            if a == b {
                #expect(!a.wins(over: b))
            } else {
                #expect(a.wins(over: b) != b.wins(over: a), "\(a) vs \(b)")
            }
            #expect(StoredRegister.roundTrips(a))
        }
    }

    @Test("concurrent rename and archive in one millisecond: both fields keep their write")
    func renameAndArchiveAreIndependent() throws {
        let clock = FixedClock(millis: 2_000_000)
        let a = try householdWithChildren(["Ava"], seed: 42, clock: clock)
        let b = try makeReplica(seed: 43, clock: clock)
        try b.receive(try a.changeLog())
        try a.renameChild("Ava", to: "Eva")
        try b.setArchived("ava", true)
        #expect(try a.ownChanges().last!.hlc.millis == b.ownChanges().last!.hlc.millis)
        try a.receive(try b.ownChanges(), now: clock.millis)
        try b.receive(try a.ownChanges(), now: clock.millis)
        for replica in [a, b] {
            let kids = try replica.children(includeArchived: true)
            #expect(kids.map(\.name) == ["Eva"])
            #expect(kids.map(\.isArchived) == [true])
            #expect(try replica.children().isEmpty)
        }
        #expect(try a.view() == b.view())
    }

    @Test("concurrent archive and restore: the higher stamp wins on both replicas")
    func archiveVersusRestore() throws {
        let clock = FixedClock(millis: 2_000_000)
        let a = try householdWithChildren(["Ava"], seed: 42, clock: clock)
        try a.setArchived("Ava", true)
        let b = try makeReplica(seed: 43, clock: clock)
        try b.receive(try a.changeLog())
        try a.setArchived("Ava", false)          // A restores …
        try b.renameChild("Ava", to: "Ava B")    // … B renames, then
        try b.setArchived("Ava B", false)        // … restores too,
        try b.setArchived("Ava B", true)         // … and archives again.
        let restore = try a.ownChanges().last!, archive = try b.ownChanges().last!
        let restoreWins = Stamp(hlc: restore.hlc, origin: restore.origin) > Stamp(hlc: archive.hlc, origin: archive.origin)
        try a.receive(try b.ownChanges())
        try b.receive(try a.ownChanges())
        #expect(try a.view() == b.view())
        #expect(try a.child(named: "Ava B").isArchived == !restoreWins)
    }
}

extension StoredRegister {
    /// Whether the stored bytes decode back to the same register.
    static func roundTrips(_ r: StoredRegister) -> Bool {
        (try? StoredRegister.decode(r.encoded())) == r
    }
}

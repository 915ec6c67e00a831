import KidLedgerDomain
import KidLedgerReplica
import Testing

// Histories that the replica's tests and the simulator's cache tests both replay.

/// A history with everything a batch can meet: children created after transactions that name
/// them (deferred, then released), renames, archives, undo entries made twice on two replicas
/// (same-id merges), give-to-all changes with several operations, and a forked origin.
public func history(seed: UInt64) throws -> [Change] {
    let clock = TestClock(1_000_000)
    let a = try makeReplica(seed: seed, clock: clock)
    try a.createHousehold(name: "Home")
    try a.addChild(name: "Ava")
    try a.addChild(name: "Ben")
    let b = try makeReplica(seed: seed + 1, clock: clock)
    try b.applyRemote(try a.changeLog())
    var rng = SplitMix64(seed: seed)
    for step in 0..<300 {
        clock.millis += Int64(rng.next() % 5_000)
        let r = rng.next() % 2 == 0 ? a : b
        switch rng.next() % 10 {
        case 0: _ = try r.postAll(signedCents: 25, note: "all \(step)", source: "give")
        case 1: _ = try? r.undo()
        case 2: _ = try? r.renameChild(rng.next() % 2 == 0 ? "Ava" : "Ben", to: "Kid\(step)")
        case 3 where step % 50 == 3:
            // The same undo on both replicas before they hear of each other: a same-id merge.
            try b.applyRemote(try a.batch(notCoveredBy: try b.versionVector()))
            try a.applyRemote(try b.batch(notCoveredBy: try a.versionVector()))
            _ = try? a.undo()
            _ = try? b.undo()
        default:
            let children = try r.children()
            let child = children[Int(rng.next() % UInt64(children.count))]
            _ = try r.post(child.name, signedCents: Int64(rng.next() % 2_000) - 700, note: "n\(step)", source: "give")
        }
        if step == 150 {
            // A child made late on b whose transactions can reach others before it.
            try b.addChild(name: "Cy")
            _ = try b.post("Cy", signedCents: 99, note: "first", source: "give")
        }
        if step % 37 == 0 {
            try b.applyRemote(try a.batch(notCoveredBy: try b.versionVector()))
            try a.applyRemote(try b.batch(notCoveredBy: try a.versionVector()))
        }
    }
    // A fork: b's last two changes again with other stamps, as a copy of b restored from
    // stale files would have made them under the same origin and sequences.
    var log = try a.changeLog() + (try b.changeLog())
    let forkOrigin = try b.ownChanges().last!.origin
    let forked = try b.ownChanges().suffix(2).map { c in
        Change(origin: c.origin, sequence: c.sequence, hlc: HLC(millis: c.hlc.millis + 1, counter: c.hlc.counter),
               operations: c.operations)
    }
    #expect(forked.allSatisfy { $0.origin == forkOrigin })
    log += forked
    // Unique by (origin, sequence, encoding).
    var seen = Set<[UInt8]>()
    return log.filter { seen.insert(RecordCodec.encode($0)).inserted }
}

/// A household with active, archived, renamed and concurrently added children, transactions
/// (one undone) and a transaction waiting for a child that has not arrived.
public func busyReplica() throws -> Replica {
    let r = try householdWithChildren(["Ava", "Ben", "Cleo", "Dan", "Eve"], seed: 11)
    try r.renameChild("Ben", to: "Finn")
    try r.setArchived("Dan", true)
    try r.post("Ava", signedCents: 300, note: "a", source: "give")
    try r.post("Eve", signedCents: -20, note: "b", source: "take")
    try r.postAll(signedCents: 7, note: "all", source: "give-all")
    try r.undo()
    // Elsewhere: Ivy (on c), then Gus and a transaction for Ivy (on `other`); this replica
    // hears only from `other`, so the transaction waits for Ivy. And Hal, added here meanwhile.
    let c = try makeReplica(seed: 13)
    try c.applyRemote(try r.batch(notCoveredBy: [:]))
    try c.addChild(name: "Ivy")
    let other = try makeReplica(seed: 12)
    try other.applyRemote(try c.batch(notCoveredBy: [:]))
    try other.addChild(name: "Gus")
    try other.post("Ivy", signedCents: 40, note: "g", source: "give")
    try r.addChild(name: "Hal")
    let origin = other.replicaID
    try r.applyRemote(try other.changes(notCoveredBy: [:]).filter { $0.origin == origin })
    #expect(try r.counts().deferred == 1)
    return r
}

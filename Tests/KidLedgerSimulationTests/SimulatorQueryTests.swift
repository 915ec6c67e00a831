import KidLedgerDomain
import KidLedgerReplica
import Synchronization
import Testing
@testable import KidLedgerSimulation
import KidLedgerInMemory

/// What the simulator computes more cheaply than it used to must equal what it used to compute:
/// the per-node version vector, child count and "revoked" caches against fresh reads, the
/// batched transaction lookup against one lookup per id, the change logs read once per distinct
/// log against each replica's own, and the caching verifier against its base.
@Suite("Simulator queries")
struct SimulatorQueryTests {
    func simulator() throws -> Simulator { try twoReplicaSimulator(seed: 5) }

    func sync(_ from: SimNode, _ to: SimNode) throws {
        try to.replica!.applyRemote(try from.replica!.batch(notCoveredBy: try to.replica!.versionVector()))
    }

    func expectFresh(_ node: SimNode) throws {
        #expect(try node.versionVector() == node.replica!.versionVector())
        #expect(try node.childCount() == node.replica!.children(includeArchived: true).count)
        #expect(try node.childCount() == node.pickableChildren().count)
        let revoked = try node.replica!.members().contains { $0.isRevoked && $0.key == node.member.publicKey.bytes }
        #expect(try node.listsItselfRevoked() == revoked)
    }

    @Test("version vector, child count and revocation follow local, remote and replaced stores")
    func nodeQueriesFollowChanges() throws {
        let sim = try simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        try expectFresh(a)
        try expectFresh(b)
        _ = try a.replica!.addChild(name: "Ava")
        try expectFresh(a)
        try sync(a, b)
        try expectFresh(b)
        let copy = (b.store as! MemoryStore).clone()
        _ = try b.replica!.addChild(name: "Ben")
        try expectFresh(b)
        #expect(try !b.listsItselfRevoked())
        // The owner revokes b; b learns it by sync.
        try sim.revoke(1)
        try expectFresh(a)
        try sync(a, b)
        try expectFresh(b)
        #expect(try b.listsItselfRevoked())
        // A restore from the stale copy: everything is read again.
        b.crash()
        b.store = copy.clone()
        try b.boot(time: sim.time, seed: 5)
        try expectFresh(b)
        #expect(try !b.listsItselfRevoked())
    }

    @Test("the remembered allowance check answers as the replica's, across days, payments, changes and a replaced store")
    func dueAllowancesFollowDaysAndWrites() throws {
        let sim = try simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        _ = try a.replica!.addChild(name: "Ava")
        _ = try a.replica!.addChild(name: "Ben")
        let start = sim.time.millis + a.skew
        func expectSame(_ node: SimNode, _ now: Int64) throws {
            #expect(try node.hasDueAllowances(now: now) == node.replica!.hasDueAllowances(now: now), "at \(now - start) ms")
        }
        _ = try a.replica!.setAllowance("Ava", amountCents: 150, every: .week, on: nil, note: nil)
        var dues = 0
        // Every five hours for three weeks: the answer moves with the day, a payment and a change.
        for step in 0..<100 {
            let now = start + Int64(step) * 5 * 3_600_000
            try expectSame(a, now)
            try expectSame(a, now)  // asked again, unchanged: the remembered answer
            if try a.hasDueAllowances(now: now) { dues += 1 }
            if step % 7 == 3 { _ = try a.replica!.payDueAllowances(now: now) }
            if step % 11 == 5 { _ = try a.replica!.post("Ben", signedCents: 1, note: "", source: "give") }
            if step == 40 { _ = try a.replica!.stopAllowance("Ava") }
            if step == 60 { _ = try a.replica!.setAllowance("Ben", amountCents: 20, every: .week, on: 3, note: nil) }
            try sync(a, b)
            try expectSame(b, now)
            if step == 50 {
                b.store = (b.store as! MemoryStore).clone()
                try b.boot(time: sim.time, seed: 5)
                try expectSame(b, now)
            }
        }
        #expect(dues > 0 && dues < 100, "the check found something due at some steps, not all: \(dues)")
    }

    @Test("one origin's held sequence and log entries equal the vector's entry and the whole read's, forked versions too")
    func oneOriginRead() throws {
        let sim = try simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        func expectSame(_ replica: Replica) throws {
            let vector = try replica.versionVector()
            for origin in vector.keys.sorted() + [ReplicaID(12345)] {
                #expect(try replica.heldSequence(of: origin) == vector[origin] ?? 0)
                for after in 0...(vector[origin] ?? 0) + 1 {
                    var cover = vector
                    cover[origin] = after
                    // What the log holds (the whole read also names heads, and where a batch may end).
                    let whole = try replica.encodedChanges(notCoveredBy: cover).filter { $0.origin == origin }.map(\.bytes)
                    #expect(try replica.encodedChanges(of: origin, after: after).map(\.bytes) == whole)
                }
            }
        }
        _ = try a.replica!.addChild(name: "Ava")
        try sync(a, b)
        // b's first change takes its origin (derived from its key); the copy has it.
        _ = try b.replica!.addChild(name: "Dan")
        try sync(b, a)
        let copy = (b.store as! MemoryStore).clone()
        _ = try b.replica!.addChild(name: "Ben")
        try sync(b, a)
        // b comes back from its copy and reuses the sequence: a then holds two versions of it.
        b.crash()
        b.store = copy.clone()
        try b.boot(time: sim.time, seed: 5)
        _ = try b.replica!.addChild(name: "Cleo")
        try a.replica!.applyRemote(try b.replica!.batch(notCoveredBy: [:]))  // everything: a holds that sequence
        let origin = b.replica!.replicaID
        let held = try a.replica!.heldSequence(of: origin)
        #expect(try a.replica!.encodedChanges(of: origin, after: held - 1).count == 2)
        try expectSame(a.replica!)
        try expectSame(b.replica!)
    }

    @Test("a local change is recorded from its origin's entry before it, as the whole vector read recorded it")
    func localChangesRecorded() throws {
        let sim = try simulator()
        let a = sim.nodes[0]
        let before = try sim.ownSequence(a)
        #expect(try sim.recordLocalChanges(a, after: before) == nil)
        _ = try a.replica!.addChild(name: "Ava")
        _ = try a.replica!.postAll(signedCents: 3, note: "", source: "give-all")
        let carrier = try #require(try sim.recordLocalChanges(a, after: before))
        let origin = a.replica!.replicaID
        var cover = try a.replica!.versionVector()
        cover[origin] = before
        let expected = try a.replica!.encodedChanges(notCoveredBy: cover).filter { $0.origin == origin }
        #expect(carrier.origin == origin && carrier.sequences == (before + 1)...(before + 2))
        #expect(carrier.changes.map(\.encoded) == expected.map(\.bytes))
        #expect(sim.checkers.acknowledged.madeChanges.suffix(2).map(\.logged.encoded) == expected.map(\.bytes))
    }

    @Test("containsTransactions answers containsTransaction for each id")
    func batchedLookup() throws {
        let sim = try simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        _ = try a.replica!.addChild(name: "Ava")
        _ = try a.replica!.addChild(name: "Ben")
        _ = try a.replica!.addChild(name: "Cleo")
        var held = try (0..<5).map { try a.replica!.post("Ava", signedCents: Int64($0 + 1), note: "", source: "give").transaction.id }
        for i in 0..<12 {
            held += try a.replica!.postAll(signedCents: Int64(i + 1), note: "", source: "give-all").map(\.transaction.id)
        }
        // Neighbours of held ids that are not held, ids far before and after every key, repeats.
        let near = held.flatMap { [RecordID(high: $0.high, low: $0.low &+ 1), RecordID(high: $0.high, low: $0.low &- 1)] }
        let far = [RecordID(high: 1, low: 2), RecordID.zero, RecordID(high: .max, low: .max)]
        var g = SplitMix64(seed: 7)
        let sets: [[RecordID]] = [
            held, near, far, held + near + far, [held[0], held[0], held[3]], [held[2]], [near[1]],
            (held + near + far).shuffled(using: &g), Array(held.prefix(9)).reversed(),
        ]
        try sync(a, b)
        _ = try b.replica!.postAll(signedCents: 3, note: "", source: "give-all")
        for ids in sets {
            for replica in [a.replica!, b.replica!] {
                #expect(try replica.containsTransactions(ids) == ids.map { try replica.containsTransaction($0) })
            }
        }
        #expect(try a.replica!.containsTransactions([]) == [])
        #expect(try sim.nodes[1].replica!.containsTransactions(held).allSatisfy { $0 })
    }

    @Test("the final checks' change logs: each replica's log, equal ones read as one, and their union")
    func changeLogs() throws {
        let sim = try simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        func whole(_ node: SimNode) throws -> [Change] { try node.replica!.changes(notCoveredBy: [:]) }
        _ = try a.replica!.addChild(name: "Ava")
        _ = try a.replica!.post("Ava", signedCents: 7, note: "x", source: "give")
        _ = try b.replica!.addChild(name: "Ben")
        // A log holds each change as its canonical encoding, under the change's origin and sequence:
        // what changes are compared by.
        for entry in try a.replica!.encodedChanges(notCoveredBy: [:]) {
            let change = try ChangeLogs.decode(entry)
            #expect(RecordCodec.encode(change) == entry.bytes)
            #expect(change.origin == entry.origin && change.sequence == entry.sequence)
        }
        var logs = try ChangeLogs([a.replica!, b.replica!, a.replica!])
        #expect(try logs.first == whole(a))
        let all = Set(try whole(a) + whole(b))
        #expect(Set(logs.union) == all && logs.union.count == all.count)
        for change in all {
            let logged = LoggedChange(change)
            #expect(logs.held.contains(logged))
            #expect(logs.set(0).contains(logged) == (try whole(a).contains(change)))
            #expect(logs.set(1).contains(logged) == (try whole(b).contains(change)))
            #expect(logs.set(2).contains(logged) == (try whole(a).contains(change)))
        }
        #expect(try all.count > whole(a).count && all.count > whole(b).count)
        // Converged: one log, the union is it.
        try sync(a, b)
        try sync(b, a)
        logs = try ChangeLogs([b.replica!, a.replica!])
        #expect(try logs.first == whole(b) && logs.union == whole(a))
        #expect(try whole(a) == whole(b))
    }

    @Test("the per-replica checks name each replica whose transactions are wrong, equal lists or not")
    func eachReplicaChecked() throws {
        let sim = try simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        /// The acknowledged checker's per-replica answers, having heard of `acknowledged`
        /// (each transaction with the replica that made it).
        func check(_ acknowledged: [(RecordID, Int)]) throws -> [String] {
            let checker = AcknowledgedChangesChecker()
            for (id, node) in acknowledged {
                checker.committed(Carrier(node: node, origin: ReplicaID(1), sequences: 1...1, changes: []), acknowledging: [id])
            }
            let run = try sim.finalRun([a, b])
            return try [0, 1].flatMap { try checker.finalCheck(.replica($0), run) }
        }
        _ = try a.replica!.addChild(name: "Ava")
        let made = try a.replica!.post("Ava", signedCents: 5, note: "", source: "give").transaction.id
        #expect(try check([(made, 0)]) == ["r1 lost acknowledged transaction \(made.tail) (made on r0)"])
        try sync(a, b)
        #expect(try check([(made, 0)]) == [])
        // Equal lists: a transaction neither holds is lost on both.
        let never = RecordID(high: 7, low: 7)
        #expect(try check([(made, 0), (never, 1)]) == ["r0", "r1"].map { "\($0) lost acknowledged transaction \(never.tail) (made on r1)" })
    }

    @Test("a change index answers as a set of the decoded changes, forked versions included")
    func changeIndexAnswersAsASet() {
        let a = ReplicaID(1), b = ReplicaID(2)
        let ava = RecordID(high: 0xAA, low: 1)
        func change(_ origin: ReplicaID, _ sequence: UInt64, _ name: String) -> LoggedChange {
            LoggedChange(Change(origin: origin, sequence: sequence, hlc: HLC(millis: 5),
                                operations: [.setField(entity: ava, field: .childName, value: .text(name))]))
        }
        let held = [change(a, 1, "Ava"), change(a, 2, "Ben"), change(b, 1, "Cleo")]
        let forked = change(a, 2, "Dan")  // the position of Ben, another version
        var index = ChangeIndex()
        for logged in held {
            let added = index.insert(logged)
            #expect(added)
        }
        for logged in held {
            let again = index.insert(logged)
            #expect(index.contains(logged) && !again)
        }
        for logged in [forked, change(a, 3, "Ava"), change(b, 2, "Cleo"), change(b, 1, "Ava")] {
            #expect(!index.contains(logged))
        }
        let added = index.insert(forked)
        #expect(added && index.contains(forked) && index.contains(held[1]))
    }

    /// A verifier that accepts signatures starting with 1 and counts its calls.
    final class CountingVerifier: SignatureVerifier {
        let calls = Mutex(0)
        func isValid(signature: [UInt8], message: [UInt8], key: [UInt8]) -> Bool {
            calls.withLock { $0 += 1 }
            return signature.first == 1
        }
    }

    @Test("the caching verifier answers as its base, once per (signature, message, key)")
    func cachingVerifier() {
        let base = CountingVerifier()
        let cache = CachingVerifier(base)
        let good = [UInt8](repeating: 1, count: 64), bad = [UInt8](repeating: 2, count: 64)
        #expect(cache.isValid(signature: good, message: [1], key: [9]))
        #expect(!cache.isValid(signature: bad, message: [1], key: [9]))
        #expect(cache.isValid(signature: good, message: [1], key: [9]))
        #expect(base.calls.withLock { $0 } == 2)
        // Same signature, another message or key: asked again.
        #expect(cache.isValid(signature: good, message: [2], key: [9]))
        #expect(cache.isValid(signature: good, message: [1], key: [8]))
        #expect(base.calls.withLock { $0 } == 4)
        // A cache of its own: another one asks its base again.
        let other = CachingVerifier(base)
        #expect(other.isValid(signature: good, message: [1], key: [9]))
        #expect(base.calls.withLock { $0 } == 5)
    }
}

@Suite("Simulator short ids")
struct SimulatorShortIDTests {
    @Test("hexPrefix is the prefix of hex")
    func hexPrefixMatchesHex() {
        var g = SplitMix64(seed: 11)
        let ids = [RecordID.zero, RecordID(high: .max, low: .max), RecordID(high: 0x0123_4567_89ab_cdef, low: 1)]
            + (0..<50).map { _ in RecordID(high: g.next(), low: g.next()) }
        for id in ids {
            for n in [0, 1, 8, 12, 16] { #expect(id.hexPrefix(n) == String(id.hex.prefix(n))) }
        }
    }
}

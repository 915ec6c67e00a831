import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB
import Testing
@testable import KidLedgerSimulation
import KidLedgerInMemory

/// The simulator keeps what it derives from a replica's store (the children a user operation
/// picks from, the hash-chain heads of the quiet check, the give-all batches already checked)
/// until the tables it came from are written. These tests change those tables behind the cache's
/// back (remote changes, a replaced store) and compare with a fresh read each time.
@Suite("Simulator caches")
struct SimulatorCacheTests {
    func simulator() throws -> Simulator { try twoReplicaSimulator(seed: 3) }

    func fresh(_ node: SimNode) throws -> [PickableChild] {
        try node.replica!.children(includeArchived: true).map { PickableChild(id: $0.id, isArchived: $0.isArchived) }
    }

    /// Applies to `to` what `from` holds and it does not.
    func sync(_ from: SimNode, _ to: SimNode) throws {
        try to.replica!.applyRemote(try from.replica!.batch(notCoveredBy: try to.replica!.versionVector()))
    }

    @Test("the pickable children follow children added, renamed and archived remotely")
    func pickableChildrenFollowRemoteChanges() throws {
        let sim = try simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        #expect(try b.pickableChildren() == [])
        // Concurrent adds: both get sort order 0, so names decide the order.
        let ava = try a.replica!.addChild(name: "Ava")
        let cleo = try b.replica!.addChild(name: "Cleo")
        #expect(try b.pickableChildren().map(\.id) == [cleo.id])
        try sync(a, b)
        #expect(try b.pickableChildren() == fresh(b))
        #expect(try b.pickableChildren().map(\.id) == [ava.id, cleo.id])
        // A remote rename moves Ava after Cleo.
        try a.replica!.renameChild("Ava", to: "Zed")
        #expect(try b.pickableChildren().map(\.id) == [ava.id, cleo.id])
        try sync(a, b)
        #expect(try b.pickableChildren().map(\.id) == [cleo.id, ava.id])
        #expect(try b.pickableChildren() == fresh(b))
        // A remote archive.
        try a.replica!.setArchived("Zed", true)
        try sync(a, b)
        #expect(try b.pickableChildren() == fresh(b))
        #expect(try b.pickableChildren().first { $0.id == ava.id }?.isArchived == true)
        // Transactions alone leave the list as it was (and it stays right).
        try b.replica!.post("Cleo", signedCents: 5, note: "", source: "give")
        #expect(try b.pickableChildren() == fresh(b))
    }

    /// Runs `body` on a two-replica simulation whose replicas are in LMDB (closed and removed after).
    func onLMDB(_ body: (Simulator, SimNode, SimNode) throws -> Void) throws {
        var parameters = SimulationParameters.draw(seed: 3, replicas: 2...2)
        parameters.usesLMDB = true
        let base = TemporaryDirectory.make()
        defer { TemporaryDirectory.remove(base) }
        let sim = Simulator(parameters: parameters, lmdbBase: base)
        try sim.setUp()
        defer { for node in sim.nodes { (node.store as? LMDBEnvironment)?.close() } }
        #expect(sim.nodes[1].store is LMDBEnvironment)
        try body(sim, sim.nodes[0], sim.nodes[1])
    }

    @Test("on LMDB replicas, the pickable children follow local and remote changes and a reopened environment")
    func pickableChildrenFollowChangesOnLMDB() throws {
        try onLMDB { sim, a, b in
            #expect(try b.pickableChildren() == [])
            let ava = try a.replica!.addChild(name: "Ava")
            let cleo = try b.replica!.addChild(name: "Cleo")
            #expect(try b.pickableChildren().map(\.id) == [cleo.id])
            try sync(a, b)
            #expect(try b.pickableChildren().map(\.id) == [ava.id, cleo.id])
            // A remote rename moves Ava after Cleo; a local archive flags Cleo.
            try a.replica!.renameChild("Ava", to: "Zed")
            #expect(try b.pickableChildren().map(\.id) == [ava.id, cleo.id])
            try sync(a, b)
            #expect(try b.pickableChildren().map(\.id) == [cleo.id, ava.id])
            try b.replica!.setArchived("Cleo", true)
            #expect(try b.pickableChildren() == fresh(b))
            #expect(try b.pickableChildren().first { $0.id == cleo.id }?.isArchived == true)
            // Transactions alone leave the list as it was (and it stays right).
            try b.replica!.post("Zed", signedCents: 5, note: "", source: "give")
            #expect(try b.pickableChildren() == fresh(b))
            // A restart from the files: another environment object, read again.
            b.crash()
            try sim.reopenLMDB(b)
            try b.boot(time: sim.time, seed: 3)
            #expect(try b.pickableChildren() == fresh(b))
            try b.replica!.renameChild("Zed", to: "Ava")
            #expect(try b.pickableChildren() == fresh(b))
            #expect(try b.pickableChildren().map(\.id) == [ava.id, cleo.id])
        }
    }

    @Test("on LMDB replicas, the revoked keys, hash-chain heads and allowance check follow local and remote changes and a reopened environment")
    func nodeCachesFollowChangesOnLMDB() throws {
        try onLMDB { sim, a, b in
            let now = sim.time.millis
            func expectFresh(_ node: SimNode, _ at: Int64 = now) throws {
                let replica = node.replica!
                #expect(try node.revokedKeys() == Set(replica.members().filter(\.isRevoked).map(\.key)))
                #expect(node.heads() == (try replica.chains(at: replica.versionVector())))
                #expect(try node.hasDueAllowances(now: at) == replica.hasDueAllowances(now: at))
            }
            for node in [a, b] { try expectFresh(node) }
            _ = try a.replica!.addChild(name: "Ava")
            _ = try a.replica!.setAllowance("Ava", amountCents: 100, every: .week, on: nil, note: nil)
            try expectFresh(a)
            try sync(a, b)
            try expectFresh(b)
            try expectFresh(b, now + 8 * 86_400_000)  // another day: a period is due
            #expect(try b.hasDueAllowances(now: now + 8 * 86_400_000))
            _ = try b.replica!.payDueAllowances(now: now + 8 * 86_400_000)
            try expectFresh(b, now + 8 * 86_400_000)
            #expect(try !b.hasDueAllowances(now: now + 8 * 86_400_000))
            // The owner revokes b; b learns it by sync, and its heads move.
            let headsBefore = b.heads()
            try sim.revoke(1)
            try expectFresh(a)
            try sync(a, b)
            try expectFresh(b)
            #expect(b.heads() != headsBefore)
            #expect(try b.listsItselfRevoked())
            // A restart from the files: another environment object, read again.
            b.crash()
            try sim.reopenLMDB(b)
            try b.boot(time: sim.time, seed: 3)
            try expectFresh(b)
            #expect(try b.listsItselfRevoked())
        }
    }

    @Test("a replaced store (a restore from stale files) is read again")
    func replacedStoreIsReadAgain() throws {
        let sim = try simulator()
        let b = sim.nodes[1]
        let stale = (b.store as! MemoryStore).clone()
        try b.replica!.addChild(name: "Ava")
        #expect(try b.pickableChildren().count == 1)
        b.crash()
        b.store = stale
        try b.boot(time: sim.time, seed: 3)
        #expect(try b.pickableChildren() == [])
        #expect(try b.pickableChildren() == fresh(b))
    }

    @Test("the hash-chain heads follow remote changes")
    func headsFollowRemoteChanges() throws {
        let sim = try simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        #expect(a.heads() == b.heads())
        try a.replica!.addChild(name: "Ava")
        #expect(a.heads() != b.heads())
        #expect(sim.isQuiet() == false)
        try sync(a, b)
        #expect(a.heads() == b.heads())
        #expect(sim.isQuiet())
        let v = try b.replica!.versionVector()
        #expect(b.heads() == (try b.replica!.chains(at: v)))
    }

    /// Replica 0 adds a child that replica 1 then holds, and posts two transactions that the
    /// simulator records as one give-all batch. Returns b's version vector and a copy of its
    /// files from before the posts.
    func batchOfTwo(_ sim: Simulator) throws -> (before: VersionVector, files: MemoryStore, ids: [RecordID]) {
        let a = sim.nodes[0], b = sim.nodes[1]
        try a.replica!.addChild(name: "Ava")
        try sync(a, b)
        let files = try #require(b.store as? MemoryStore).clone()
        let ids = try (1...2 as ClosedRange<Int64>).map { try a.replica!.post("Ava", signedCents: $0, note: "", source: "give").transaction.id }
        try sim.madeBatch(ids, on: a.replica!)
        return (try b.replica!.versionVector(), files, ids)
    }

    @Test("a give-all batch shown in part is found after an earlier clean check")
    func partialBatchFoundAfterCleanCheck() throws {
        let sim = try simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        let (before, _, ids) = try batchOfTwo(sim)
        try sim.checkpoint([1])
        #expect(sim.failures.isEmpty)
        // Only the first of the two reaches b.
        let missing = try a.replica!.changes(notCoveredBy: before)
        try b.replica!.applyRemote(Array(missing.prefix(1)), heads: try a.replica!.signedHeads(of: a.replica!.replicaID))
        #expect(try b.replica!.containsTransaction(ids[0]) && !(try b.replica!.containsTransaction(ids[1])))
        try sim.checkpoint([1])
        #expect(sim.failures.count == 1)
    }

    @Test("a batch found whole is looked at again after a restore from a stale copy holding part of it")
    func restoreResetsWholeBatches() throws {
        let sim = try simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        let (before, old, _) = try batchOfTwo(sim)
        try sync(a, b)
        try sim.checkpoint([1])
        #expect(sim.failures.isEmpty)
        // b's files go back to a copy that holds the first of the two only.
        let partial = try Replica(store: old, clock: FixedClock(millis: HLC.millisMax), random: SplitMix64(seed: 1), verifier: a.verifier)
        try partial.applyRemote(Array(try a.replica!.changes(notCoveredBy: before).prefix(1)), heads: try a.replica!.signedHeads(of: a.replica!.replicaID))
        b.staleCopy = old.lazyCopy()
        sim.crash(b, scheduleRestart: false)
        #expect(try sim.restart(b, stale: true))
        try sim.checkpoint([1])
        #expect(sim.failures.count == 1)
    }
}

import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerSimulation

/// The give-all check skips a replica with nothing new since its clean check; a batch made since
/// is new even when the replica's transactions were not written.
@Suite("Give-all check of a quiet replica")
struct BatchCheckTests {
    @Test("a batch recorded after a clean check, already in part on the replica, is found")
    func batchRecordedAfterACleanCheck() throws {
        let cache = SimulatorCacheTests()
        let sim = try cache.simulator()
        let a = sim.nodes[0], b = sim.nodes[1]
        try a.replica!.addChild(name: "Ava")
        try cache.sync(a, b)
        let before = try b.replica!.versionVector()
        let ids = try (1...2 as ClosedRange<Int64>).map { try a.replica!.post("Ava", signedCents: $0, note: "", source: "give").transaction.id }
        try b.replica!.applyRemote(Array(try a.replica!.changes(notCoveredBy: before).prefix(1)), heads: try a.replica!.signedHeads(of: a.replica!.replicaID))
        try sim.checkpoint([1])
        try sim.checkpoint([1])  // nothing new: skipped
        #expect(sim.failures.isEmpty)
        try sim.madeBatch(ids, on: a.replica!)
        try sim.checkpoint([1])
        #expect(sim.failures == ["r1 shows 1 of 2 transactions of the batch of transaction \(ids[0].tail)"])
    }
}

import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica
import KidLedgerProtocol

/// The three-path equivalence: three ways to reach the converged state agree on its digest (and
/// pass `verify`): (a) incremental sync, as the run did it (every replica's digest); (b) a full
/// sync from empty: a fresh replica syncs everything from one converged replica through the real
/// ``SyncSession``; (c) for replicas in LMDB, a restart from the files: each environment is
/// closed, reopened and read by a new `Replica`. Runs last: it reopens the LMDB replicas.
final class EquivalenceChecker: Checker {
    /// How many ways were compared: 2, or 3 with LMDB; 0 when the run did not converge.
    private(set) var ways = 0

    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        guard stage == .equivalence, Set(run.digests).count == 1 else { return [] }
        var failures: [String] = []
        ways = try compare(run, digest: run.digests[0], failures: &failures)
        return failures
    }

    /// Compares the ways to `digest`; returns how many were compared.
    func compare(_ run: FinalRun, digest: Digest256, failures: inout [String]) throws -> Int {
        let before = failures.count
        var ways = ["incremental sync"]
        let source = run.nodes[run.nodes.count - 1]
        guard let sourceReplica = source.replica else { failures.append("equivalence: \(source.name) is down"); return 0 }
        let fresh = try Replica(store: MemoryStore(), clock: SkewedClock(time: run.time, skew: 0),
                                random: SplitMix64(seed: run.seed ^ 0xF7E5_40E0), verifier: run.verifier)
        // Pinned as `join` pins it, from the invitation's genesis hash (a thief's second genesis may come first).
        if let genesis = run.genesis, !genesis.owner.isEmpty { try fresh.pinOwnedHousehold(run.household, genesis: Membership.genesisHash(genesis)) }
        let ends = Simulator.pump(SyncSession(role: .initiator, replica: fresh, household: run.household),
                                  SyncSession(role: .responder, replica: sourceReplica, household: run.household))
        let full = try fresh.digest()
        if ends != ["finished", "finished"] {
            failures.append("equivalence: the full sync of an empty replica from \(source.name) ended \(ends.map { $0 ?? "without an outcome" }.joined(separator: " / "))")
        } else if full != digest {
            failures.append("equivalence: a full sync from empty (from \(source.name)) gives digest \(full.description.prefix(12)), incremental sync gave \(digest.description.prefix(12))")
        }
        for problem in try run.verifyOnce(fresh).problems.prefix(3) { failures.append("equivalence: the fully synced replica's verify: \(problem)") }
        ways.append("full sync from empty (\(try fresh.counts().transactions) transactions from \(source.name))")

        var reopened = 0
        for node in run.nodes where node.lmdbDirectory != nil {
            try run.restartFromFiles(node)
            let again = try node.replica!.digest()
            if again != digest {
                failures.append("equivalence: \(node.name) restarted from its LMDB files has digest \(again.description.prefix(12)), incremental sync gave \(digest.description.prefix(12))")
            }
            // Its report is computed once per distinct content, like every replica's: a reopened
            // environment holding what a verified store held reads alike (FinalRun.verifyOnce).
            for problem in try run.verifyOnce(node.replica!).problems.prefix(3) { failures.append("equivalence: \(node.name) restarted from its LMDB files, verify: \(problem)") }
            reopened += 1
        }
        if reopened > 0 { ways.append("restart from the LMDB files (\(reopened) replicas)") }
        run.log("equivalence: \(ways.joined(separator: ", ")) \(failures.count == before ? "agree" : "DIFFER") on digest \(digest.description.prefix(16))")
        return ways.count
    }
}

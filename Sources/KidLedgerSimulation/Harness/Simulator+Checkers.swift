import KidLedgerDomain
import KidLedgerReplica

extension Simulator {
    /// A give-all or take-all acknowledged `transactions` as one batch: the checkers hear of it.
    func madeBatch(_ transactions: [RecordID]) {
        for checker in checkers.all { checker.madeBatch(transactions) }
    }

    /// The checkpoint hook (every 500 virtual ms for every replica, after a delivery for the
    /// replica it reached): the checkers' failures join the run's.
    func checkpoint(_ only: [Int]? = nil) throws {
        for checker in checkers.all { failures += try checker.checkpoint(nodes, only: only) }
    }

    /// After the run is quiet: every stage of the final checks asks every checker, in order
    /// (``FinalStage/inOrder(replicas:)``); the last line of the trace says whether they passed.
    /// With a replica down nothing else is checked.
    func finalChecks() throws {
        let replicas = nodes.compactMap(\.replica)
        guard replicas.count == nodes.count else { failures.append(ConvergenceChecker.replicaDown); return }
        let run = try finalRun(replicas)
        for stage in FinalStage.inOrder(replicas: nodes.count) {
            for checker in checkers.all { failures += try checker.finalCheck(stage, run) }
        }
        log("final digest \(run.digests.first?.description ?? "-") checks \(failures.isEmpty ? "passed" : "FAILED")")
    }

    /// What the final checks read of the replicas (`replicas`: every node's, all up), and the
    /// harness's hands they need: the trace, and a restart from a replica's LMDB files. (It holds
    /// the simulator; the simulator does not hold it.)
    func finalRun(_ replicas: [Replica]) throws -> FinalRun {
        try FinalRun(nodes: nodes, replicas: replicas, household: household, time: time, seed: parameters.seed,
                     verifier: verifier, log: { self.log($0) },
                     restartFromFiles: { node in
                         try self.reopenLMDB(node)
                         try node.boot(time: self.time, seed: self.parameters.seed)
                     })
    }
}

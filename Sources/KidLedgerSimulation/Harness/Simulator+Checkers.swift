import KidLedgerDomain
import KidLedgerReplica

extension Simulator {
    /// A give-all or take-all (or an undo) acknowledged `transactions` as one batch, just
    /// written on `replica` (whose author of them is the batch's maker; nil: not known): the
    /// checkers hear of it.
    func madeBatch(_ transactions: [RecordID], on replica: Replica? = nil) throws {
        let maker = try transactions.first.flatMap { first in try replica?.transactionAuthors([first])[0] }
        for checker in checkers.all { checker.madeBatch(transactions, maker: maker) }
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
        let honest = honestNodes
        let run = try finalRun(honest)
        for stage in FinalStage.inOrder(replicas: honest.count) {
            for checker in checkers.all { failures += try checker.finalCheck(stage, run) }
        }
        failures += try stoppedChecks(run)
        failures += try hostileChecks(run)
        log("final digest \(run.digests.first?.description ?? "-") checks \(failures.isEmpty ? "passed" : "FAILED")")
    }

    /// What the final checks read of `nodes`' replicas (all up), and the
    /// harness's hands they need: the trace, and a restart from a replica's LMDB files. (It holds
    /// the simulator; the simulator does not hold it.)
    func finalRun(_ nodes: [SimNode]) throws -> FinalRun {
        try FinalRun(nodes: nodes, replicas: nodes.map { $0.replica! }, household: household, time: time, seed: parameters.seed,
                     verifier: verifier, log: { self.log($0) },
                     restartFromFiles: { node in
                         try self.reopenLMDB(node)
                         try node.boot(time: self.time, seed: self.parameters.seed)
                     })
    }
}

extension Simulator {
    /// The revoked replicas, stopped once refused: each holds the revocation and is in
    /// attentionRequired (it lists its own account as revoked, as the honest replicas list it),
    /// and still passes `verify`. Its data is kept (``refuses(_:_:)`` checks that learning the
    /// revocation loses no change); it need not converge with the others.
    func stoppedChecks(_ run: FinalRun) throws -> [String] {
        var failures: [String] = []
        let revoked = Set(try run.members().filter(\.isRevoked).map(\.key))
        let stopped = stoppedNodes
        for i in stopped.sorted() {
            let node = nodes[i]
            guard let replica = node.replica else { continue }
            if !revoked.contains(node.member.publicKey.bytes) { failures.append("\(node.name) was revoked but the others do not list it revoked") }
            if ignoresRevocation(i) { continue }  // the hostile member: it ignores its revocation
            if try !node.listsItselfRevoked() { failures.append("\(node.name) is revoked but not in attentionRequired") }
            if try !replica.holdsRevocation(of: node.member.publicKey.bytes), try !replica.holdsPlacedRevocation(of: node.member.publicKey.bytes) {
                failures.append("\(node.name) does not hold its revocation (in its log, or placed by a refusal)")
            }
            failures += try run.verifyOnce(replica).problems.prefix(3).map { "\(node.name) (stopped) verify: \($0)" }
        }
        if !stopped.isEmpty { log("stopped: \(stopped.sorted().map { "r\($0)" }.joined(separator: ",")) in attentionRequired, holding their revocations") }
        return failures
    }
}

extension Simulator {
    /// With a hostile member: every honest replica lists exactly one owner, a member the run
    /// made (never the hostile member, which cannot recover ownership: ``recover()``), not
    /// revoked; and nobody the hostile member granted is a member (``HostileStrategy/forgedHousehold``).
    func hostileChecks(_ run: FinalRun) throws -> [String] {
        guard let hostile else { return [] }
        var failures: [String] = []
        let hostileKey = nodes[hostile.node].member.publicKey.bytes
        let known = Set(nodes.map(\.member.publicKey.bytes))
        for node in run.nodes {
            guard let replica = node.replica else { continue }
            let members = try replica.members()
            let owners = members.filter(\.isOwner)
            if owners.count != 1 || owners[0].key == hostileKey || owners[0].isRevoked || !known.contains(owners[0].key) {
                failures.append("\(node.name): the owner was displaced (\(owners.count) owners\(owners.first.map { $0.key == hostileKey ? ", the hostile member's" : "" } ?? ""))")
            }
            if members.contains(where: { !known.contains($0.key) }) { failures.append("\(node.name) lists a member the hostile member granted") }
            // Only members take space: no origin of a throwaway key (``HostileStrategy/strangerFlood``)
            // is stored, and the vector holds at most (keys × origins one member may hold).
            let vector = try replica.versionVector()
            let strangers = hostile.strangerOrigins.filter { vector[$0] != nil }.count
            if strangers > 0 { failures.append("\(node.name) stores \(strangers) origins of throwaway keys") }
            if vector.count > known.count * Limits.originsPerMemberStoredMax {
                failures.append("\(node.name) holds \(vector.count) origins, over \(known.count) keys × \(Limits.originsPerMemberStoredMax)")
            }
        }
        return failures
    }
}

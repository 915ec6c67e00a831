import KidLedgerDomain
import KidLedgerReplica
import KidLedgerProtocol
import KidLedgerSecurity

extension Simulator {
    /// Three ways to reach the converged state must agree on its digest (and pass `verify`):
    /// (a) incremental sync, as the run did it (`digest`, every replica's); (b) a full sync from
    /// empty: a fresh replica syncs everything from one converged replica through the real
    /// ``SyncSession``; (c) for replicas in LMDB, a restart from the files: each environment is
    /// closed, reopened and read by a new `Replica`. Returns how many ways were compared.
    @discardableResult
    func checkEquivalence(_ digest: Digest256) throws -> Int {
        let before = failures.count
        var ways = ["incremental sync"]
        let source = nodes[nodes.count - 1]
        guard let sourceReplica = source.replica else { failures.append("equivalence: \(source.name) is down"); return 0 }
        let fresh = try Replica(store: MemoryStore(), clock: SkewedClock(time: time, skew: 0),
                                random: SplitMix64(seed: parameters.seed ^ 0xF7E5_40E0), verifier: verifier)
        let ends = Self.pump(SyncSession(role: .initiator, replica: fresh, household: household),
                             SyncSession(role: .responder, replica: sourceReplica, household: household))
        let full = try fresh.digest()
        if ends != ["finished", "finished"] {
            failures.append("equivalence: the full sync of an empty replica from \(source.name) ended \(ends.map { $0 ?? "without an outcome" }.joined(separator: " / "))")
        } else if full != digest {
            failures.append("equivalence: a full sync from empty (from \(source.name)) gives digest \(full.description.prefix(12)), incremental sync gave \(digest.description.prefix(12))")
        }
        for problem in try verifyOnce(fresh).report.problems.prefix(3) { failures.append("equivalence: the fully synced replica's verify: \(problem)") }
        ways.append("full sync from empty (\(try fresh.counts().transactions) transactions from \(source.name))")

        var reopened = 0
        for node in nodes where node.lmdbDirectory != nil {
            try reopenLMDB(node)
            try node.boot(time: time, seed: parameters.seed)
            let again = try node.replica!.digest()
            if again != digest {
                failures.append("equivalence: \(node.name) restarted from its LMDB files has digest \(again.description.prefix(12)), incremental sync gave \(digest.description.prefix(12))")
            }
            for problem in try node.replica!.verify().problems.prefix(3) { failures.append("equivalence: \(node.name) restarted from its LMDB files, verify: \(problem)") }
            reopened += 1
        }
        if reopened > 0 { ways.append("restart from the LMDB files (\(reopened) replicas)") }
        log("equivalence: \(ways.joined(separator: ", ")) \(failures.count == before ? "agree" : "DIFFER") on digest \(digest.description.prefix(16))")
        return ways.count
    }

    /// Runs two sessions against each other directly (no network, no faults) until neither has a
    /// message left; returns how each ended ("finished", "failed: …", or nil).
    static func pump(_ initiator: SyncSession, _ responder: SyncSession, maxMessages: Int = 1_000_000) -> [String?] {
        let sessions = [initiator, responder]
        var inbox: [[[UInt8]]] = [[], []]
        var ends: [String?] = [nil, nil]
        func take(_ actions: [SessionAction], _ side: Int) {
            for action in actions {
                switch action {
                case .send(let bytes): inbox[1 - side].append(bytes)
                case .finished: ends[side] = "finished"
                case .failed(let error): ends[side] = "failed: \(error)"
                }
            }
        }
        take(responder.start(), 1)
        take(initiator.start(), 0)
        var messages = 0
        while messages < maxMessages, let side = (0..<2).first(where: { !inbox[$0].isEmpty && ends[$0] == nil }) {
            take(sessions[side].receive(inbox[side].removeFirst()), side)
            messages += 1
        }
        return ends
    }
}

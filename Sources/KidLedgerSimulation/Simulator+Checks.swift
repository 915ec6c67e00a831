import KidLedgerDomain
import KidLedgerReplica

extension Simulator {
    /// No replica ever shows part of a give-all batch.
    func checkBatchesAtomic() throws {
        for node in nodes {
            guard let replica = node.replica else { continue }
            for (i, batch) in batches.enumerated() {
                var present = 0
                for id in batch where try replica.containsTransaction(id) { present += 1 }
                if present != 0 && present != batch.count {
                    failures.append("\(node.name) shows \(present) of \(batch.count) transactions of give-all batch \(i)")
                }
            }
        }
    }

    /// After the run is quiet: equal digests, intact replicas, no acknowledged transaction lost,
    /// at most one compensation per original, no undo of an undo, whole batches.
    func finalChecks() throws {
        let replicas = nodes.compactMap(\.replica)
        guard replicas.count == nodes.count else { failures.append("a replica is still down"); return }
        let digests = try replicas.map { try $0.digest() }
        if Set(digests).count != 1 {
            failures.append("digests differ: " + zip(nodes, digests).map { "\($0.name)=\($1.description.prefix(12))" }.joined(separator: " "))
        }
        for (node, replica) in zip(nodes, replicas) {
            let report = try replica.verify()
            for problem in report.problems.prefix(3) { failures.append("\(node.name) verify: \(problem)") }
            let all = try replica.allTransactions()
            var byID: [RecordID: LedgerTransaction] = [:]
            for t in all { byID[t.id] = t }
            var compensations: [RecordID: Int] = [:]
            for t in all {
                guard let original = t.reverses else { continue }
                compensations[original, default: 0] += 1
                if let o = byID[original], o.isUndo { failures.append("\(node.name) holds an undo of an undo: \(t.id)") }
            }
            for (original, n) in compensations.sorted(by: { $0.key < $1.key }) where n > 1 {
                failures.append("\(node.name) compensates \(original) \(n) times")
            }
            for id in acknowledgedOrder where !mayBeLost.contains(id) && byID[id] == nil {
                failures.append("\(node.name) lost acknowledged transaction \(id) (made on r\(acknowledged[id]!))")
                break
            }
        }
        try checkBatchesAtomic()
        log("final digest \(digests.first?.description ?? "-") checks \(failures.isEmpty ? "passed" : "FAILED")")
    }
}

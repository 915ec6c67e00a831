import KidLedgerDomain
import KidLedgerReplica

/// Convergence: once the faults heal, the run goes quiet in bounded virtual time, and then every
/// replica is up with the same digest and the same conflict journal.
final class ConvergenceChecker: Checker {
    /// The failure of a run that is not quiet `millis` after its faults healed.
    static func notQuiet(within millis: Int64) -> String {
        "did not converge within \(millis) ms after the faults healed"
    }

    /// The failure of a run that ends with a replica down (no other final check runs then).
    static let replicaDown = "a replica is still down"

    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        switch stage {
        case .converged:
            guard Set(run.digests).count != 1 else { return [] }
            return ["digests differ: " + zip(run.nodes, run.digests).map { "\($0.name)=\($1.description.prefix(12))" }.joined(separator: " ")]
        case .conflictJournals:
            let journals = try Self.conflictJournals(run.replicas)
            var failures: [String] = []
            if journals.isEmpty || journals.contains(where: { $0 != journals[0] }) {
                failures.append("conflict journals differ: " + journals.map { "\($0.count)" }.joined(separator: " "))
            }
            run.log("conflict journal: \(journals.first?.count ?? 0) lost writes")
            return failures
        default:
            return []
        }
    }

    /// Every replica's conflict journal (`fieldConflicts()`), read once per distinct content of
    /// the tables it is derived from among the in-memory replicas (``PerContent``).
    static func conflictJournals(_ replicas: [Replica]) throws -> [[FieldConflict]] {
        var journals = PerContent<[FieldConflict]>(tables: Replica.conflictJournalTables)
        return try replicas.map { replica in try journals.answer(replica) { try replica.fieldConflicts() } }
    }
}

/// Intact replicas: every replica passes `verify` at the end (the first three problems of each
/// are reported).
final class VerifyChecker: Checker {
    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        guard case .replica(let index) = stage else { return [] }
        let name = run.nodes[index].name
        return try run.report(of: index).problems.prefix(3).map { "\(name) verify: \($0)" }
    }
}

import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerSimulation

/// The final checks ask a function of a replica's tables once per distinct content: the answers
/// must be what asking every replica gives, and a replica that differs in those tables is asked.
@Suite("Answers per distinct content")
struct PerContentTests {
    func sync(_ from: SimNode, _ to: SimNode) throws {
        try to.replica!.applyRemote(try from.replica!.batch(notCoveredBy: try to.replica!.versionVector()))
    }

    @Test("equal tables are asked once, differing ones again, and every answer is the replica's own")
    func askedOncePerContent() throws {
        let sim = try twoReplicaSimulator(seed: 5)
        let a = sim.nodes[0], b = sim.nodes[1]
        let child = try a.replica!.addChild(name: "Ava").id.hex
        try sync(a, b)
        _ = try a.replica!.renameChild(child, to: "Eve")
        _ = try b.replica!.renameChild(child, to: "Cleo")
        _ = try a.replica!.post(child, signedCents: 5, note: "", source: "give")
        try sync(a, b)
        try sync(b, a)
        let replicas = [a.replica!, b.replica!, a.replica!]
        func asked(_ tables: [Table]) throws -> (answers: [[String]], computed: Int) {
            var perContent = PerContent<[String]>(tables: tables)
            var computed = 0
            let answers = try replicas.map { replica in
                try perContent.answer(replica) {
                    computed += 1
                    return try replica.fieldConflicts().map { "\($0.loserValue) \($0.winnerValue)" }
                }
            }
            return (answers, computed)
        }
        let converged = try asked(Replica.conflictJournalTables)
        #expect(converged.computed == 1)
        #expect(try converged.answers == replicas.map { try $0.fieldConflicts().map { "\($0.loserValue) \($0.winnerValue)" } })
        #expect(converged.answers[0].count == 1)
        #expect(try ConvergenceChecker.conflictJournals(replicas) == replicas.map { try $0.fieldConflicts() })
        // b renames once more without telling a: its tables differ, so it is asked.
        _ = try b.replica!.renameChild(child, to: "Dan")
        #expect(try asked(Replica.conflictJournalTables).computed == 2)
        #expect(try ConvergenceChecker.conflictJournals(replicas) == replicas.map { try $0.fieldConflicts() })
    }
}

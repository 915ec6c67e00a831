import KidLedgerDomain
import KidLedgerReplica

/// At most one compensation: no replica holds two undos of one original, nor an undo of an undo.
final class CompensationChecker: Checker {
    /// The problems found, by content (``HeldTransactions/content``).
    private var problems: [Int: [String]] = [:]

    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        guard case .replica(let index) = stage else { return [] }
        let held = try run.transactions(of: index)
        let found = problems[held.content] ?? Self.problems(held)
        problems[held.content] = found
        return found.map { "\(run.nodes[index].name) \($0)" }
    }

    /// What is wrong with the compensations of `held`, each problem to follow the replica's name.
    static func problems(_ held: HeldTransactions) -> [String] {
        var problems: [String] = []
        var compensations: [RecordID: Int] = [:]
        for t in held.all {
            guard let original = t.reverses else { continue }
            compensations[original, default: 0] += 1
            if held.isUndo[original] == true { problems.append("holds an undo of an undo: \(t.id)") }
        }
        for (original, n) in compensations.sorted(by: { $0.key < $1.key }) where n > 1 {
            problems.append("compensates \(original) \(n) times")
        }
        return problems
    }
}

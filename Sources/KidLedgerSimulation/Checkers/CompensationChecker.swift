import KidLedgerDomain
import KidLedgerReplica

/// One compensation per entry: no replica holds two undos of one original, nor an undo of an
/// undo; and a batch is undone whole: of a give-all/take-all batch's entries a replica holds, it
/// holds compensations of all or of none (an undo of a batch entry reverses the batch's
/// remaining entries in one change, those waiting for their child too).
final class CompensationChecker: Checker {
    /// The problems found, by content (``HeldTransactions/content``).
    private var problems: [Int: [String]] = [:]
    /// Every batch acknowledged (give-all, take-all, and each undo's compensations), its entries.
    private var batches: [[RecordID]] = []

    func madeBatch(_ transactions: [RecordID], maker: ReplicaID?) { batches.append(transactions) }

    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        guard case .replica(let index) = stage else { return [] }
        let held = try run.transactions(of: index)
        let found = problems[held.content] ?? Self.problems(held, batches: batches)
        problems[held.content] = found
        return found.map { "\(run.nodes[index].name) \($0)" }
    }

    /// What is wrong with the compensations of `held`, each problem to follow the replica's name.
    static func problems(_ held: HeldTransactions, batches: [[RecordID]] = []) -> [String] {
        var problems: [String] = []
        var compensations: [RecordID: Int] = [:]
        for t in held.all {
            guard let original = t.reverses else { continue }
            compensations[original, default: 0] += 1
            if held.isUndo[original] == true { problems.append("holds an undo of an undo: transaction \(t.id.tail)") }
        }
        for (original, n) in compensations.sorted(by: { $0.key < $1.key }) where n > 1 {
            problems.append("compensates transaction \(original.tail) \(n) times")
        }
        for batch in batches {
            let entries = batch.filter { held.isUndo[$0] == false }
            let undone = entries.filter { compensations[$0] != nil }.count
            if undone != 0 && undone != entries.count {
                problems.append("compensates \(undone) of the \(entries.count) entries of the batch of transaction \(batch[0].tail)")
            }
        }
        return problems
    }
}

import KidLedgerDomain
import KidLedgerReplica

/// Child merges in the simulator (issue 23, point 3): `child merge FROM INTO` as a user
/// operation of the fuzz mix and of scenarios; ``MergeChecker`` and the ``ReferenceModel`` check
/// what every replica makes of them (docs/CRDT.md, "Child merges").
extension Simulator {
    /// The index of the child-merge operation in ``SimulationParameters/operationWeights``.
    static let mergeOperation = 8

    /// The drawn merge (or, one in four, unmerge): the drawn child (`target`, as the resolver takes it) into another child
    /// drawn from the same list (maybe itself, maybe a merged one: the refusals are part of the
    /// story). Returns the trace line.
    func drawnMerge(_ node: SimNode, _ replica: Replica, target: String, label: String, childCount: Int) throws -> String {
        // One in four undoes a merge of the drawn child (refused when it is not merged).
        if Int.random(in: 0..<4, using: &g) == 0 {
            let (child, was) = try replica.unmergeChild(target)
            faults["childUnmerge", default: 0] += 1
            record(node.index, .unmerge("@" + label))
            return "\(node.name) unmerge \(child.id.hexPrefix(8)) from \(was.id.hexPrefix(8))"
        }
        var into: PickableChild?
        if childCount > 0 {
            let listed = try node.pickableChild(at: Int.random(in: 0..<childCount, using: &g))
            into = listed.child
        }
        let intoTarget = into.map { $0.id.hexPrefix(12) } ?? "nobody"
        let intoLabel = into.map { childLabels[$0.id] ?? $0.id.hex } ?? "nobody"
        let m = try replica.mergeChild(target, into: intoTarget)
        faults["childMerge", default: 0] += 1
        record(node.index, .merge("@" + label, into: "@" + intoLabel))
        return "\(node.name) merge \(m.from.id.hexPrefix(8)) into \(m.into.id.hexPrefix(8)): balance \(Money.format(cents: m.into.balanceCents))"
    }
}

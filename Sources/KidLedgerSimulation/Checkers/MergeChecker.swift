import KidLedgerDomain
import KidLedgerReplica

/// Merged balances equal sums (issue 23, point 6): on every replica, each child's balance is the
/// sum of the transactions of every child whose effective child it is (its own and those of the
/// children merged into it), and the replicas agree on which child each child counts in
/// (docs/CRDT.md, "Child merges"). The ``ReferenceModel`` restates the rule from the union of the
/// logs; this checker holds each replica to its own transactions.
final class MergeChecker: Checker {
    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        switch stage {
        case .replica(let index):
            return try sums(run.replicas[index], name: run.nodes[index].name)
        case .referenceModel:
            var first: [RecordID: RecordID]?
            for (node, replica) in zip(run.nodes, run.replicas) {
                let roots = try Self.roots(replica)
                if let first, first != roots {
                    let differing = Set(first.keys).union(roots.keys).sorted().filter { first[$0] != roots[$0] }.prefix(3)
                    return ["\(node.name) counts children elsewhere than \(run.nodes[0].name): " + differing.map {
                        "\($0.hex.prefix(8)) in \(roots[$0].map { String($0.hex.prefix(8)) } ?? "none") there, \(first[$0].map { String($0.hex.prefix(8)) } ?? "none") on \(run.nodes[0].name)"
                    }.joined(separator: "; ")]
                }
                first = first ?? roots
            }
            return []
        default:
            return []
        }
    }

    /// Each child's effective child (itself when it was not merged), as `replica` lists them.
    static func roots(_ replica: Replica) throws -> [RecordID: RecordID] {
        Dictionary(uniqueKeysWithValues: try replica.children(includeArchived: true, includeMerged: true).map { ($0.id, $0.mergedInto ?? $0.id) })
    }

    /// The children of `replica` whose balance is not the sum of their members' transactions.
    func sums(_ replica: Replica, name: String) throws -> [String] {
        let children = try replica.children(includeArchived: true, includeMerged: true)
        guard children.contains(where: { $0.mergedInto != nil }) else { return [] }
        var root: [RecordID: RecordID] = [:]
        for c in children {
            root[c.id] = c.mergedInto ?? c.id
            if let into = c.mergedInto, !children.contains(where: { $0.id == into && $0.mergedInto == nil }) {
                return ["\(name): \(c.id.hex.prefix(8)) counts in \(into.hex.prefix(8)), which is not a child that keeps its own identity"]
            }
        }
        var sums: [RecordID: Int128] = [:]
        for t in try replica.allTransactions() {
            guard let r = root[t.childID] else { continue }  // waits for its child
            sums[r, default: 0] += Int128(t.amountCents)
        }
        return children.filter { $0.mergedInto == nil && $0.balanceCents != sums[$0.id, default: 0] }.prefix(3).map {
            "\(name): \($0.name) (\($0.id.hex.prefix(8))) shows \($0.balanceCents), the transactions of the children counting in it sum to \(sums[$0.id, default: 0])"
        }
    }
}

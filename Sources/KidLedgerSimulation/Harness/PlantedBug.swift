import KidLedgerDomain

/// A deliberate bug, for testing the shrinker and the diagram's failure highlight only. Real
/// seeds pass, so a test needs a run that fails. Nothing turns one on but asking for it by name:
/// the `plantedBug` argument of the simulator's entry points, or `kidledger-sim … --plant-bug NAME`
/// (not in `--help`; docs/SIMULATOR.md). The product (`kidledger`) does not link the simulator.
public enum PlantedBug: String, Sendable, CaseIterable {
    /// A false expectation checked at every undo: "a replica only undoes transactions it made
    /// itself". The product rightly lets any replica undo the newest transaction it knows, so a
    /// run fails as soon as a replica undoes a transaction that reached it from another replica.
    /// Its smallest failing story needs two replicas, a child, a transaction and an undo.
    case crossReplicaUndo = "cross-replica-undo"
}

extension Simulator {
    /// The planted bug's check, at an undo of `original` by `node`.
    func plantedBugCheck(undo original: RecordID, by node: SimNode) {
        guard plantedBug == .crossReplicaUndo, let maker = checkers.acknowledged.maker(of: original), maker != node.index else { return }
        failures.append("planted bug cross-replica-undo: \(node.name) undid transaction \(original.tail) made on r\(maker)")
    }
}

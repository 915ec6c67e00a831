import KidLedgerDomain
import KidLedgerReplica

extension Simulator {
    /// An undo on `node` as the CLI makes it (`undo`, or `undo --mine` with `mine`): its
    /// compensations (every remaining entry of a give-all/take-all batch) are one change, so the
    /// checkers hear of them as one batch (``BatchAtomicityChecker``: every replica holds all or
    /// none of them).
    func undo(_ node: SimNode, _ replica: Replica, mine: Bool) throws -> UndoResult {
        try undo(node, replica, mine ? .mine : .newest)
    }

    /// An undo of `target` on `node` (a scenario's `undo @LABEL`: `.entry`), as above.
    func undo(_ node: SimNode, _ replica: Replica, _ target: UndoTarget) throws -> UndoResult {
        let u = try replica.undo(target)
        try madeBatch(u.entries.map(\.undo.id), on: replica)
        plantedBugCheck(undo: u.original.id, by: node)  // a batch has one maker: its entries' too
        return u
    }

    /// Whether the fuzz mix's undo is `undo --mine` (one in three), drawn by a generator of its
    /// own (from the seed and the event count), so that the mix's other draws stay what they were.
    func drawsUndoMine() -> Bool {
        var g = SplitMix64(seed: parameters.seed ^ 0x0DD0_0DD0 ^ UInt64(events))
        return Int.random(in: 0..<3, using: &g) == 0
    }
}

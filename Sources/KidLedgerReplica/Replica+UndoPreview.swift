extension Replica {
    /// The entry ``undo()`` would reverse now (the same rule: `newestUndoable`), with its child's
    /// name and its author, for a preview; nil when there is nothing to undo. Changes nothing.
    public func undoCandidate() throws -> HistoryEntry? {
        guard let (t, _) = try store.read({ r in try Self.newestUndoable(r) }) else { return nil }
        // The candidate is usually among the child's newest entries: look there first.
        for limit in [16, 1 << 10, Int.max] {
            let entries = try history(child: t.childID, limit: limit)
            if let e = entries.first(where: { $0.transaction.id == t.id }) { return e }
            if entries.count < limit { break }
        }
        throw LedgerError.corrupted("the transaction to undo is missing from its child's history")
    }
}

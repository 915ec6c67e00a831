import KidLedgerDomain

extension Replica {
    /// Merges a transaction into the grow-only set.
    static func mergeTransaction(_ t: LedgerTransaction, _ prepared: PreparedTransaction, in context: ApplyContext,
                                 digest: inout Digest256) throws {
        let w = context.store
        let key = prepared.keys.key, payload = prepared.payload
        guard let existing = try w.get(Tables.transactions, key) else {
            try w.put(Tables.transactions, key, payload)
            digest.insert(hashed: prepared.recordHash)
            try place(t, prepared.keys, in: context)
            return
        }
        if existing == payload { return }
        let old = try decodeStoredTransaction(existing)
        let (winner, loser) = KeyBytes.compare(payload, existing) < 0 ? (payload, existing) : (existing, payload)
        // Two devices undoing the same original write the same id with different notes or times:
        // that is the designed merge, not a conflict worth alarming anyone about. The kind
        // depends only on the losing payload, so every replica counts the same conflicts.
        let losing = try decodeStoredTransaction(loser)
        try w.put(Tables.conflicts, Keys.conflict(kind: losing.isUndo ? Conflict.undoMerge : Conflict.transaction,
                                                 id: t.id, payload: loser), loser)
        guard winner != existing else { return }
        try unplace(old, in: context)
        digest.remove(tag: DigestRecord.transactionTag, existing)
        digest.insert(hashed: prepared.recordHash)
        try w.put(Tables.transactions, key, winner)
        try place(t, prepared.keys, in: context)
    }

    /// Indexes a winning transaction (stored under `keys`) and adds it to its child's aggregate,
    /// or defers it when the child has not arrived yet.
    static func place(_ t: LedgerTransaction, _ keys: TransactionKeys, in context: ApplyContext) throws {
        guard try context.child(t.childID) != nil else {
            try context.store.put(Tables.deferred, Keys.deferred(t), [])
            return
        }
        try context.store.put(Tables.byTime, keys.byTime, [])
        try context.store.put(Tables.byChild, keys.byChild, [])
        let mix = context.preparer.idMix(t.id)
        try context.updateAggregate(of: t.childID) { $0.add(t, idMix: mix) }
    }

    /// The inverse of ``place(_:_:in:)``.
    static func unplace(_ t: LedgerTransaction, in context: ApplyContext) throws {
        guard try context.child(t.childID) != nil else {
            try context.store.delete(Tables.deferred, Keys.deferred(t))
            return
        }
        let keys = TransactionKeys(t)
        try context.store.delete(Tables.byTime, keys.byTime)
        try context.store.delete(Tables.byChild, keys.byChild)
        try context.updateAggregate(of: t.childID) { $0.remove(t) }
    }

    /// Applies every deferred transaction of a child that has just arrived.
    static func releaseDeferred(child: RecordID, in context: ApplyContext) throws {
        let w = context.store
        var ids: [RecordID] = []
        try w.scan(Tables.deferred, prefix: Keys.id(child)) { key, _ in
            ids.append(try Keys.trailingID(key))
            return true
        }
        for id in ids {
            guard let raw = try w.get(Tables.transactions, Keys.id(id)) else {
                throw LedgerError.corrupted("deferred transaction \(id) missing")
            }
            let t = try decodeStoredTransaction(raw)
            try w.delete(Tables.deferred, Keys.deferred(t))
            try place(t, TransactionKeys(t), in: context)
        }
    }

    static func decodeStoredTransaction(_ raw: [UInt8]) throws -> LedgerTransaction {
        do { return try RecordCodec.decodeTransaction(raw) } catch {
            throw LedgerError.corrupted("transaction record: \(error)")
        }
    }
}

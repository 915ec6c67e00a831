import KidLedgerDomain

extension Replica {
    /// Merges a transaction written under `origin` into the grow-only set. Same id, different
    /// payload: ``settleSameID(kind:id:incoming:existing:in:)`` decides, by author first.
    static func mergeTransaction(_ t: LedgerTransaction, _ prepared: PreparedTransaction, origin: ReplicaID,
                                 in context: ApplyContext, digest: inout Digest256) throws {
        let w = context.store
        let key = prepared.keys.key, payload = prepared.payload
        guard let existing = try w.get(Tables.transactions, key) else {
            try w.put(Tables.transactions, key, payload)
            digest.insert(hashed: prepared.recordHash)
            try place(t, prepared.keys, origin: origin, in: context)
            return
        }
        let old = try decodeStoredTransaction(existing)
        let held = AuthoredVersion(payload: existing, origin: try transactionOrigin(old, context.store))
        // Two devices undoing the same original write the same id with different notes or times:
        // that is the designed merge, not a conflict worth alarming anyone about. The kind
        // depends only on the losing payload, so every replica counts the same conflicts.
        let settled = try settleSameID(kind: { try decodeStoredTransaction($0).isUndo ? Conflict.undoMerge : Conflict.transaction },
                                       id: t.id, incoming: AuthoredVersion(payload: payload, origin: origin), existing: held,
                                       in: context)
        switch settled {
        case .unchanged:
            return
        case .author(let author):
            try place(old, TransactionKeys(old), origin: author, in: context, reindexOnly: true)
        case .replaced(let author):
            try unplace(old, in: context)
            digest.remove(tag: DigestRecord.transactionTag, existing)
            digest.insert(hashed: prepared.recordHash)
            try w.put(Tables.transactions, key, payload)
            try place(t, prepared.keys, origin: author, in: context)
        }
    }

    /// For each of `ids`, in order, the origin whose change wrote the stored version of that
    /// transaction (its author), or nil when this replica holds no transaction of that id; in one
    /// read. The simulator's checks ask it (whose batch a held entry belongs to, who paid an
    /// allowance period).
    package func transactionAuthors(_ ids: [RecordID]) throws -> [ReplicaID?] {
        try store.read { r in
            try ids.map { id in
                guard let raw = try r.get(Tables.transactions, Keys.id(id)) else { return nil }
                return try Self.transactionOrigin(try Self.decodeStoredTransaction(raw), r)
            }
        }
    }

    /// The origin that wrote the stored version of `t`: the value of its index entry (the time
    /// index once placed, the deferred table before its child arrived).
    static func transactionOrigin(_ t: LedgerTransaction, _ r: any KeyValueReader) throws -> ReplicaID {
        let raw = try r.get(Tables.byTime, Keys.byTime(t)) ?? r.get(Tables.deferred, Keys.deferred(t))
        guard let origin = Bytes.u64(raw) else { throw LedgerError.corrupted("transaction \(t.id) without its author") }
        return ReplicaID(origin)
    }

    /// Indexes a winning transaction (stored under `keys`, written under `origin`, which the
    /// index entries hold) and adds it to its child's aggregate, or defers it when the child has
    /// not arrived yet. `reindexOnly`: it is placed already; only its author changes.
    static func place(_ t: LedgerTransaction, _ keys: TransactionKeys, origin: ReplicaID, in context: ApplyContext,
                      reindexOnly: Bool = false) throws {
        let author = Bytes.u64(origin.rawValue)
        guard try context.child(t.childID) != nil else {
            try context.store.put(Tables.deferred, Keys.deferred(t), author)
            return
        }
        try context.store.put(Tables.byTime, keys.byTime, author)
        try context.store.put(Tables.byChild, keys.byChild, author)
        if reindexOnly { return }
        try context.updateAggregate(of: t.childID) { $0.add(t) }
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
        var ids: [(RecordID, ReplicaID)] = []
        try w.scan(Tables.deferred, prefix: Keys.id(child)) { key, value in
            guard let origin = Bytes.u64(value) else { throw LedgerError.corrupted("a deferred transaction without its author") }
            ids.append((try Keys.trailingID(key), ReplicaID(origin)))
            return true
        }
        for (id, origin) in ids {
            guard let raw = try w.get(Tables.transactions, Keys.id(id)) else {
                throw LedgerError.corrupted("deferred transaction \(id) missing")
            }
            let t = try decodeStoredTransaction(raw)
            try w.delete(Tables.deferred, Keys.deferred(t))
            try place(t, TransactionKeys(t), origin: origin, in: context)
        }
    }

    static func decodeStoredTransaction(_ raw: [UInt8]) throws -> LedgerTransaction {
        do { return try RecordCodec.decodeTransaction(raw) } catch {
            throw LedgerError.corrupted("transaction record: \(error)")
        }
    }
}

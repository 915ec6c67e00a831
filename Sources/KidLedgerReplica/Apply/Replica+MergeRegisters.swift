import KidLedgerDomain

extension Replica {
    /// Merges a register write: the highest (HLC, origin, value bytes) wins. Every write is also
    /// kept in the register's history with the stamp it overwrote (its base), from which the
    /// conflict journal is derived (see ``Replica/fieldConflicts(entity:)``).
    /// `prepared` is the write's bytes and hash (`PreparedRegister(write, ...)`).
    static func mergeRegister(_ prepared: PreparedRegister, value write: RegisterWrite,
                              in context: ApplyContext, digest: inout Digest256) throws {
        let w = context.store
        let key = prepared.key
        // The history is keyed by the write's stamp. Two different writes share a stamp only when
        // their origin forked (restored from a stale copy, it wrote again under a sequence number
        // its peers held, at the same clock reading): the entry with the greater bytes stays, so
        // every replica keeps the same one whatever order it merged them in.
        let held = try w.get(Tables.registerHistory, prepared.historyKey)
        if held.map({ KeyBytes.compare($0, prepared.historyValue) < 0 }) ?? true {
            try w.put(Tables.registerHistory, prepared.historyKey, prepared.historyValue)
        }
        if let raw = try w.get(Tables.registers, key) {
            let current = try StoredRegister.decode(raw)
            let incoming = StoredRegister(stamp: write.stamp, value: write.value)
            guard incoming != current, incoming.wins(over: current) else { return }
            digest.remove(hashed: Digest256.hash(DigestRecord.register(key: key, stored: raw)))
        }
        try w.put(Tables.registers, key, prepared.stored)
        digest.insert(hashed: prepared.recordHash)
    }
}

import KidLedgerDomain

extension Replica {
    /// ``containsTransaction(_:)`` for each of `ids`, in order, in one read of the store (the
    /// simulator's checks ask about many ids at once).
    ///
    /// The ids are looked up in key order, by short forward scans of the transactions table: the
    /// ids of one give-all batch are time-ordered ids of one moment, so they and the keys between
    /// them are neighbours in the table, and one seek answers the whole batch. A scan stops after
    /// a few keys that answer nothing; the next id then seeks again.
    public func containsTransactions(_ ids: [RecordID]) throws -> [Bool] {
        var held = [Bool](repeating: false, count: ids.count)
        let order = ids.indices.sorted { ids[$0] < ids[$1] }  // an id's order is its key's
        /// How `id`'s key (its 16 bytes, `Keys.id`) compares with `key`.
        func compare(_ id: RecordID, _ key: [UInt8]) -> Int {
            guard key.count == 16 else { return KeyBytes.compare(Keys.id(id), key) }
            let (high, low) = key.withUnsafeBytes {
                (UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                 UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            }
            if id.high != high { return id.high < high ? -1 : 1 }
            return id.low == low ? 0 : (id.low < low ? -1 : 1)
        }
        let idleKeysMax = 4
        try store.read { r in
            var next = 0  // the first id (in key order) not answered yet
            while next < order.count {
                var idle = 0, stopped = false
                try r.scan(Tables.transactions, prefix: [], from: Keys.id(ids[order[next]]), reverse: false) { key, _ in
                    let before = next
                    // Ids below `key` are absent, ids equal to it present.
                    while next < order.count {
                        let c = compare(ids[order[next]], key)
                        if c > 0 { break }
                        if c == 0 { held[order[next]] = true }
                        next += 1
                    }
                    if next == order.count { return false }
                    idle = next == before ? idle + 1 : 0
                    if idle > idleKeysMax { stopped = true; return false }
                    return true
                }
                if !stopped { next = order.count }  // past the last key: the rest are absent
            }
        }
        return held
    }
}

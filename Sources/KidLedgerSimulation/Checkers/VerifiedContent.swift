import KidLedgerReplica

// The simulator's shortcut for `verify`: a converged simulation verifies each distinct content once.
extension Replica {
    /// Whether ``verify()`` must report the same on the two stores because they hold the same
    /// entries in everything it reads (``verifiedTables`` and the stored digest). A simulation
    /// whose replicas converged verifies each distinct content once.
    ///
    /// For a store of any kind: an in-memory one is compared table by table, another (an LMDB
    /// replica's) read entry by entry and compared with `a` in key order, which costs a scan, not
    /// the hashing `verify` does.
    public static func verifiesAlike(_ a: MemoryStore, _ b: any KeyValueStore) throws -> Bool {
        try holdAlike(a, b, in: verifiedTables)
    }

    /// Whether ``verifyRecomputation()`` must find the same on the two stores: they hold the
    /// same entries in ``recomputedFrom`` and the same stored digest (the same log, usually, on
    /// replicas whose signed heads differ). `a` is a ``verifiedContent(of:)`` copy.
    public static func recomputesAlike(_ a: MemoryStore, _ b: any KeyValueStore) throws -> Bool {
        try holdAlike(a, b, in: recomputedFrom)
    }

    /// Whether ``verifyReads(headsToo:)`` without the heads must report the same on the two
    /// stores: the same entries in every verified table but the signed heads, and the same
    /// stored digest. `a` is a ``verifiedContent(of:)`` copy.
    public static func readsAlikeButHeads(_ a: MemoryStore, _ b: any KeyValueStore) throws -> Bool {
        try holdAlike(a, b, in: verifiedTables.filter { $0 != Tables.heads })
    }

    /// Whether the two stores hold the same entries in `tables` and the same stored digest.
    private static func holdAlike(_ a: MemoryStore, _ b: any KeyValueStore, in tables: [Table]) throws -> Bool {
        if let memory = b as? MemoryStore {
            guard a.hasSameEntries(as: memory, in: tables) else { return false }
            return try a.read { try $0.get(Tables.meta, verifiedMetaKey) } == memory.read { try $0.get(Tables.meta, verifiedMetaKey) }
        }
        return try a.read { mine in
            try b.read { theirs in
                guard try mine.get(Tables.meta, verifiedMetaKey) == theirs.get(Tables.meta, verifiedMetaKey) else { return false }
                for table in tables {
                    var expected: [(key: [UInt8], value: [UInt8])] = []
                    try mine.scan(table) { key, value in expected.append((key, value)); return true }
                    var i = 0, same = true
                    try theirs.scan(table) { key, value in
                        same = i < expected.count && expected[i].key == key && expected[i].value == value
                        i += 1
                        return same
                    }
                    guard same && i == expected.count else { return false }
                }
                return true
            }
        }
    }

    /// A copy of what ``verify()`` reads in `store` (``verifiedTables`` and the stored digest),
    /// held in memory: for ``verifiesAlike(_:_:)`` once `store` has moved on.
    public static func verifiedContent(of store: any KeyValueStore) throws -> MemoryStore {
        if let memory = store as? MemoryStore { return memory.clone() }
        let copy = MemoryStore()
        try store.read { r in
            try copy.write { w in
                for table in verifiedTables {
                    try r.scan(table) { key, value in try w.put(table, key, value); return true }
                }
                if let digest = try r.get(Tables.meta, verifiedMetaKey) { try w.put(Tables.meta, verifiedMetaKey, digest) }
            }
        }
        return copy
    }
}

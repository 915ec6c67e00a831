import KidLedgerReplica

// The simulator's shortcut for `verify`: a converged simulation verifies each distinct content once.
extension Replica {
    /// Whether ``verify()`` must report the same on the two stores because they hold the same
    /// entries in everything it reads (``verifiedTables`` and the stored digest). A simulation
    /// whose replicas converged verifies each distinct content once.
    public static func verifiesAlike(_ a: MemoryStore, _ b: MemoryStore) throws -> Bool {
        guard a.hasSameEntries(as: b, in: verifiedTables) else { return false }
        return try a.read { try $0.get(Tables.meta, verifiedMetaKey) } == b.read { try $0.get(Tables.meta, verifiedMetaKey) }
    }

    /// ``verifiesAlike(_:_:)`` for a store of any kind (an LMDB replica's): `b` is read entry by
    /// entry and compared with `a` in key order, which costs a scan, not the hashing `verify` does.
    public static func verifiesAlike(_ a: MemoryStore, _ b: any KeyValueStore) throws -> Bool {
        if let memory = b as? MemoryStore { return try verifiesAlike(a, memory) }
        return try a.read { mine in
            try b.read { theirs in
                guard try mine.get(Tables.meta, verifiedMetaKey) == theirs.get(Tables.meta, verifiedMetaKey) else { return false }
                for table in verifiedTables {
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

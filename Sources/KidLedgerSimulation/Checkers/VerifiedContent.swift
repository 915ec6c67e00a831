import KidLedgerReplica
import KidLedgerInMemory

// The simulator's shortcut for `verify`: a converged simulation verifies each distinct content once.
extension Replica {
    /// Whether ``verify()`` must report the same on the two stores because they hold the same
    /// entries in everything it reads (``verifiedTables`` and the stored digest). A simulation
    /// whose replicas converged verifies each distinct content once.
    ///
    /// For a store of any kind: an in-memory one is compared table by table, another (an LMDB
    /// replica's) is first read into memory (``verifiedContent(of:)``: a scan, not the hashing
    /// `verify` does). A caller comparing one such store with several contents copies it once.
    public static func verifiesAlike(_ a: MemoryStore, _ b: any KeyValueStore) throws -> Bool {
        try verifyAlikeness(a, b).everything
    }

    /// Whether ``verifyRecomputation()`` must find the same on the two stores: they hold the
    /// same entries in ``recomputedFrom`` and the same stored digest (the same log, usually, on
    /// replicas whose signed heads differ). `a` is a ``verifiedContent(of:)`` copy.
    public static func recomputesAlike(_ a: MemoryStore, _ b: any KeyValueStore) throws -> Bool {
        try verifyAlikeness(a, b).recomputation
    }

    /// Whether ``verifyReads(headsToo:)`` without the heads must report the same on the two
    /// stores: the same entries in every verified table but the signed heads, and the same
    /// stored digest. `a` is a ``verifiedContent(of:)`` copy.
    public static func readsAlikeButHeads(_ a: MemoryStore, _ b: any KeyValueStore) throws -> Bool {
        try verifyAlikeness(a, b).allButHeads
    }

    /// Which parts of ``verify()`` must report the same on two stores (``verifiesAlike(_:_:)``,
    /// ``readsAlikeButHeads(_:_:)``, ``recomputesAlike(_:_:)``).
    public struct VerifyAlikeness: Equatable, Sendable {
        public var everything, allButHeads, recomputation: Bool

        public init(everything: Bool = false, allButHeads: Bool = false, recomputation: Bool = false) {
            self.everything = everything
            self.allButHeads = allButHeads
            self.recomputation = recomputation
        }
    }

    /// The three answers at once, each table compared at most once: the stored digests first, then
    /// the tables the recomputation reads, then the others (the heads last), until every answer
    /// is known.
    public static func verifyAlikeness(_ a: MemoryStore, _ b: any KeyValueStore) throws -> VerifyAlikeness {
        var alike = VerifyAlikeness()
        guard try a.read({ try $0.get(Tables.meta, verifiedMetaKey) }) == b.read({ try $0.get(Tables.meta, verifiedMetaKey) }) else {
            return alike
        }
        let memory = try b as? MemoryStore ?? verifiedContent(of: b)
        let same: (Table) -> Bool = { a.hasSameEntries(as: memory, in: [$0]) }
        alike.recomputation = recomputedFrom.allSatisfy(same)
        let rest = verifiedTables.filter { !recomputedFrom.contains($0) && $0 != Tables.heads }
        alike.allButHeads = alike.recomputation && rest.allSatisfy(same)
        alike.everything = alike.allButHeads && same(Tables.heads)
        return alike
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

import KidLedgerDomain

/// A write-back cache in front of one write transaction, for what every applied change reads and
/// rewrites: the clock and digest (`meta`; the digest can be held decoded), the version vector,
/// the origin claims and the per-child totals (held decoded). A batch of changes then reads each of those entries from the
/// store once and writes it once, at ``flush()``, instead of once per change.
///
/// It also remembers, write-through, what the next change of a batch is about to read again: the
/// child records (every transaction looks up its child), the newest hash-chain link of each
/// origin (the next change of that origin links to it) and each member's revocation horizon (the
/// revocation rule checks every change). Those tables are still written to the store at once.
///
/// Every read and write of the transaction must go through the cache while it is in use; a scan
/// or count of a write-back table first writes that table's pending entries to the store, so it
/// sees them. The caller must call ``flush()`` before the transaction commits.
final class BatchWriter: KeyValueWriter {
    private let base: any KeyValueWriter
    // Used by one thread, and no access to its tables outlives the call that makes it: the
    // run-time exclusivity checks of these properties are left out (they cost several percent).

    /// A byte-string key hashed a buffer at a time (an array's own `hash(into:)` feeds the hasher
    /// one byte per call, which cost more than the lookup itself).
    private struct Key: Hashable {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
        static func == (a: Key, b: Key) -> Bool { KeyBytes.equal(a.bytes, b.bytes) }
    }

    /// A cached entry: the value (nil: absent or deleted) and whether it must be written.
    private struct Cached<Value> {
        var value: Value?
        var dirty: Bool
    }
    private typealias Entry = Cached<[UInt8]>

    /// One write-back table: a short list searched in order while it has few keys (the usual
    /// case: a handful of meta keys, one vector entry and one claim per origin; comparing a few
    /// short keys, often the very same array, costs less than hashing one), a dictionary beyond.
    private struct SlotMap {
        private var small: [(key: [UInt8], entry: Entry)] = []
        private var large: [Key: Entry]?
        private static let smallMax = 16

        func find(_ key: [UInt8]) -> Entry? {
            if let large { return large[Key(key)] }
            for item in small where item.key == key { return item.entry }
            return nil
        }

        mutating func set(_ key: [UInt8], _ entry: Entry) {
            if large != nil {
                large![Key(key)] = entry
                return
            }
            for i in small.indices where small[i].key == key {
                small[i].entry = entry
                return
            }
            add(key, entry)
        }

        /// ``set(_:_:)`` of a key that ``find(_:)`` just did not find: no search.
        mutating func add(_ key: [UInt8], _ entry: Entry) {
            if large != nil {
                large![Key(key)] = entry
                return
            }
            // One allocation for the list's whole life instead of a regrowth at 1, 2, 4, 8 and 16.
            if small.capacity == 0 { small.reserveCapacity(Self.smallMax + 1) }
            small.append((key, entry))
            if small.count > Self.smallMax {
                large = Dictionary(uniqueKeysWithValues: small.map { (Key($0.key), $0.entry) })
                small = []
            }
        }

        /// Hands each entry with unwritten changes to `write`, in key order, and marks it
        /// written once `write` returns (a throw leaves it and the later ones unwritten).
        mutating func flush(_ write: (_ key: [UInt8], _ value: [UInt8]?) throws -> Void) rethrows {
            guard large == nil else {
                let keys = large!.filter { $0.value.dirty }.map(\.key.bytes).sorted { KeyBytes.compare($0, $1) < 0 }
                for key in keys {
                    let value = large![Key(key)]!.value
                    try write(key, value)
                    large![Key(key)] = Entry(value: value, dirty: false)
                }
                return
            }
            // The short list by index, without building and sorting arrays of keys: usually
            // none or one entry is dirty.
            while let i = leastDirty() {
                try write(small[i].key, small[i].entry.value)
                small[i].entry.dirty = false
            }
        }

        /// The index in `small` of the dirty entry with the least key, or nil when none is dirty.
        private func leastDirty() -> Int? {
            var best: Int?
            for i in small.indices where small[i].entry.dirty {
                if let b = best, KeyBytes.compare(small[i].key, small[b].key) >= 0 { continue }
                best = i
            }
            return best
        }
    }

    /// A map that usually holds a few keys (a batch's children or origins): a short list
    /// searched in order while it has few keys (comparing a few ids costs less than hashing
    /// one; a dictionary's first insert and every lookup hash), a dictionary beyond.
    struct FewMap<Key: Hashable, Value> {
        private var small: [(key: Key, value: Value)] = []
        private var large: [Key: Value]?
        static var smallMax: Int { 16 }

        subscript(key: Key) -> Value? {
            get {
                if let large { return large[key] }
                for item in small where item.key == key { return item.value }
                return nil
            }
            set {
                if large != nil {
                    large![key] = newValue
                    return
                }
                if let i = small.firstIndex(where: { $0.key == key }) {
                    if let newValue { small[i].value = newValue } else { small.remove(at: i) }
                    return
                }
                guard let newValue else { return }
                if small.capacity == 0 { small.reserveCapacity(4) }
                small.append((key, newValue))
                if small.count > Self.smallMax {
                    large = Dictionary(uniqueKeysWithValues: small.map { ($0.key, $0.value) })
                    small = []
                }
            }
        }

        /// Changes the value of `key` in place with `body` (nil: absent; left or set to nil: absent),
        /// found with one search.
        mutating func update(_ key: Key, _ body: (inout Value?) throws -> Void) rethrows {
            if large != nil { return try body(&large![key]) }
            guard let i = small.firstIndex(where: { $0.key == key }) else {
                var value: Value?
                try body(&value)
                if value != nil { self[key] = value }
                return
            }
            var value: Value? = small[i].value
            try body(&value)
            if let value { small[i].value = value } else { small.remove(at: i) }
        }

        /// Every key, in no particular order.
        var keys: [Key] { large.map { Array($0.keys) } ?? small.map(\.key) }
    }

    /// The write-back byte tables, by slot (see ``slot(_:)``).
    @exclusivity(unchecked) private var entries: [SlotMap] = [SlotMap(), SlotMap(), SlotMap()]
    private static let slotTables: [Table] = [Tables.meta, Tables.vector, Tables.claims]
    /// The per-child totals, decoded.
    @exclusivity(unchecked) private var aggregates = FewMap<RecordID, Cached<Aggregate>>()
    /// The state digest decoded (nil: not read through ``stateDigest()``, or written as bytes
    /// since); when dirty, its bytes in the meta slot are stale until ``settleDigest()``.
    @exclusivity(unchecked) private var digest: (value: Digest256, dirty: Bool)?
    /// `Keys.digest`, read once.
    private let digestKey = Keys.digest
    /// Child records read or written in this batch (nil: absent).
    @exclusivity(unchecked) private var children = FewMap<RecordID, [UInt8]?>()
    /// The newest chain link written for each origin in this batch: (sequence, link).
    @exclusivity(unchecked) private var newestLinks = FewMap<UInt64, (sequence: UInt64, link: [UInt8])>()
    /// Revocation horizons of the member who claimed each origin, computed in this batch; emptied
    /// when a claim or a revocation is written.
    @exclusivity(unchecked) private var horizons = FewMap<UInt64, [ReplicaID: UInt64]?>()

    /// The name hashes of the tables it treats specially, read once (a static read costs a
    /// once-check per access). Every table of `Tables.all` has a distinct name hash
    /// (`BatchApplyTests` checks), so the hash alone identifies a table here.
    private let metaHash = Tables.meta.nameHash, vectorHash = Tables.vector.nameHash
    private let claimsHash = Tables.claims.nameHash, aggregatesHash = Tables.aggregates.nameHash
    private let childrenHash = Tables.children.nameHash, chainsHash = Tables.chains.nameHash
    private let revocationsHash = Tables.revocations.nameHash

    init(_ base: any KeyValueWriter) { self.base = base }

    var _batchWriter: AnyObject? { self }

    /// The write-back slot of `table`, or nil.
    @inline(__always)
    private func slot(_ table: Table) -> Int? {
        let h = table.nameHash
        if h == metaHash { return 0 }
        if h == vectorHash { return 1 }
        if h == claimsHash { return 2 }
        return nil
    }

    @inline(__always)
    private func isTable(_ table: Table, _ hash: UInt64) -> Bool { table.nameHash == hash }

    func get(_ table: Table, _ key: [UInt8]) throws -> [UInt8]? {
        if let s = slot(table) {
            if s == 0 && isDigestKey(key) { settleDigest() }
            if let entry = entries[s].find(key) { return entry.value }
            let value = try base.get(table, key)
            entries[s].add(key, Entry(value: value, dirty: false))
            return value
        }
        if key.count == 16 && isTable(table, aggregatesHash) {
            return try aggregate(Keys.id(in: key, at: 0)).map { $0.encoded() }
        }
        if key.count == 16 && isTable(table, childrenHash) {
            let id = Keys.id(in: key, at: 0)
            if let known = children[id] { return known }
            let value = try base.get(table, key)
            children[id] = .some(value)
            return value
        }
        if key.count == 16 && isTable(table, chainsHash) {
            let (origin, sequence) = Keys.words(key)
            if let newest = newestLink(ReplicaID(origin), at: sequence) { return newest }
        }
        return try base.get(table, key)
    }

    func put(_ table: Table, _ key: [UInt8], _ value: [UInt8]) throws {
        if let s = slot(table) {
            if s == 0 && isDigestKey(key) { digest = nil }
            if s == 2 { horizons = FewMap() }
            entries[s].set(key, Entry(value: value, dirty: true))
            return
        }
        if key.count == 16 && isTable(table, aggregatesHash) {
            let decoded: Aggregate
            do { decoded = try Aggregate.decode(value) } catch {
                aggregates[Keys.id(in: key, at: 0)] = nil
                return try base.put(table, key, value)
            }
            aggregates[Keys.id(in: key, at: 0)] = Cached(value: decoded, dirty: true)
            return
        }
        try base.put(table, key, value)
        noteWrite(table, key, value)
    }

    func delete(_ table: Table, _ key: [UInt8]) throws {
        if let s = slot(table) {
            if s == 0 && isDigestKey(key) { digest = nil }
            if s == 2 { horizons = FewMap() }
            entries[s].set(key, Entry(value: nil, dirty: true))
            return
        }
        if key.count == 16 && isTable(table, aggregatesHash) {
            aggregates[Keys.id(in: key, at: 0)] = Cached(value: nil, dirty: true)
            return
        }
        try base.delete(table, key)
        noteWrite(table, key, nil)
    }

    /// Keeps the write-through memos equal to the store after a write.
    private func noteWrite(_ table: Table, _ key: [UInt8], _ value: [UInt8]?) {
        if isTable(table, childrenHash) {
            if key.count == 16 { children[Keys.id(in: key, at: 0)] = .some(value) } else { children = FewMap() }
        } else if isTable(table, chainsHash) {
            guard key.count == 16 else { newestLinks = FewMap(); return }
            let (origin, sequence) = Keys.words(key)
            if let value { newestLinks[origin] = (sequence, value) } else { newestLinks[origin] = nil }
        } else if isTable(table, revocationsHash) {
            horizons = FewMap()
        }
    }

    /// Whether `key` (of the meta table) is the digest's, while the digest is held decoded.
    @inline(__always)
    private func isDigestKey(_ key: [UInt8]) -> Bool { digest != nil && KeyBytes.equal(key, digestKey) }

    /// The state digest (zero when none is stored or it is unreadable), decoded once per batch:
    /// every applied change reads it.
    func stateDigest() throws -> Digest256 {
        if let digest { return digest.value }
        let value = Digest256(bytes: try get(Tables.meta, digestKey)) ?? .zero
        digest = (value, false)
        return value
    }

    /// Replaces the state digest: encoded into the meta slot only when the meta table's digest
    /// entry is read or scanned, or at ``flush()`` (every applied change rewrites it).
    func setStateDigest(_ value: Digest256) {
        digest = (value, true)
    }

    /// Writes a replaced digest into the meta slot as bytes (still held decoded).
    private func settleDigest() {
        guard let pending = digest, pending.dirty else { return }
        entries[0].set(digestKey, Entry(value: pending.value.bytes, dirty: true))
        digest = (pending.value, false)
    }

    /// The chain link of `origin` at `sequence` when it is the newest this batch wrote for the
    /// origin (what ``get(_:_:)`` answers from memory for its chains key), else nil.
    func newestLink(_ origin: ReplicaID, at sequence: UInt64) -> [UInt8]? {
        guard let newest = newestLinks[origin.rawValue], newest.sequence == sequence else { return nil }
        return newest.link
    }

    /// The totals of `child` (nil: none stored), decoded once per batch.
    func aggregate(_ child: RecordID) throws -> Aggregate? {
        if let entry = aggregates[child] { return entry.value }
        let value = try storedAggregate(child)
        aggregates[child] = Cached(value: value, dirty: false)
        return value
    }

    /// Changes the totals of `child` with `change` (from empty totals when none are stored),
    /// found with one lookup; written at ``flush()``.
    func updateAggregate(of child: RecordID, _ change: (inout Aggregate) -> Void) throws {
        try aggregates.update(child) { entry in
            var value = try (entry.map { $0.value } ?? storedAggregate(child)) ?? Aggregate()
            change(&value)
            entry = Cached(value: value, dirty: true)
        }
    }

    /// The totals of `child` in the store (nil: none).
    private func storedAggregate(_ child: RecordID) throws -> Aggregate? {
        try base.get(Tables.aggregates, Keys.id(child)).map { try Aggregate.decode($0) }
    }

    /// The revocation horizon of the member who claimed `origin` (nil: no claim, or not
    /// revoked), computed by `compute` at most once per batch while no claim or revocation is
    /// written.
    func horizon(ofOrigin origin: ReplicaID, _ compute: () throws -> [ReplicaID: UInt64]?) rethrows -> [ReplicaID: UInt64]? {
        if let known = horizons[origin.rawValue] { return known }
        let value = try compute()
        horizons[origin.rawValue] = .some(value)
        return value
    }

    func scan(_ table: Table, prefix: [UInt8], from start: [UInt8]?, reverse: Bool,
              _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws {
        try flush(table)
        try base.scan(table, prefix: prefix, from: start, reverse: reverse, body)
    }

    func memo<T: AnyObject>(_ key: MemoKey, tables: [Table], _ compute: () throws -> T,
                            update: (_ kept: T, _ written: [[[UInt8]]]) throws -> T?) rethrows -> T {
        // The store can't see this batch's pending entries of a write-back table.
        for t in tables where slot(t) != nil || isTable(t, aggregatesHash) { return try compute() }
        return try base.memo(key, tables: tables, compute, update: update)
    }

    func count(_ table: Table) throws -> Int {
        try flush(table)
        return try base.count(table)
    }

    /// Writes every pending entry to the store (in key order, table by table).
    func flush() throws {
        try flushAggregates()
        for s in Self.slotFlushOrder { try flush(slot: s) }
    }

    /// The slots in the order ``flush()`` writes them: by table name (sorted once, not per flush).
    private static let slotFlushOrder = slotTables.indices.sorted { slotTables[$0].name < slotTables[$1].name }

    private func flush(_ table: Table) throws {
        if let s = slot(table) { try flush(slot: s) }
        if isTable(table, aggregatesHash) { try flushAggregates() }
    }

    private func flush(slot s: Int) throws {
        if s == 0 { settleDigest() }
        let table = Self.slotTables[s]
        try entries[s].flush { key, value in
            if let value {
                try base.put(table, key, value)
            } else {
                try base.delete(table, key)
            }
        }
    }

    private func flushAggregates() throws {
        let children = aggregates.keys
        // Each child found once (usually there is one: nothing to sort); an entry is marked
        // written only once its write returns.
        for child in children.count > 1 ? children.sorted() : children {
            try aggregates.update(child) { entry in
                guard var cached = entry, cached.dirty else { return }
                if let value = cached.value {
                    try base.put(Tables.aggregates, Keys.id(child), value.encoded())
                } else {
                    try base.delete(Tables.aggregates, Keys.id(child))
                }
                cached.dirty = false
                entry = cached
            }
        }
    }
}

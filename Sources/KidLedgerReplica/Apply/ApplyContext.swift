import KidLedgerDomain

/// What applying changes reads and rewrites, held for one write transaction: the clock and the
/// state digest, the version vector, the origin claims and the per-child totals are written back
/// (each entry read from the store once and written once, at the end, instead of once per
/// change); the child records, the newest hash-chain link of each origin and the revocation
/// horizon of each origin's member are written through (the store is written at once, and the
/// next change of the batch reads them from here).
///
/// Made only by ``Replica/withApplyContext(_:now:verifier:preparer:_:)``, which flushes it before
/// the transaction commits; a context dropped dirty (its transaction went on to commit without
/// the held writes) stops the process. While one is in use, the tables it holds are read and
/// written only through it; every other table through ``store``.
final class ApplyContext {
    /// The write transaction, for the tables the context does not hold.
    let store: any KeyValueWriter
    /// The time the changes are applied at (the clock's reading when the transaction began).
    let now: Int64
    let verifier: any SignatureVerifier
    let preparer: any ChangePreparer

    /// A held entry: its value (nil: absent) and whether the store lacks it yet.
    private struct Held<Value> {
        var value: Value?
        var dirty: Bool
    }

    // Not Sendable, so the compiler confines it to the thread of its transaction (Swift 6
    // checks that; its store, an LMDB transaction, checks its thread on every call too), and no
    // access to these outlives the method that makes it: the run-time exclusivity checks
    // (several percent of applying a change) are left out.
    @exclusivity(unchecked) private var hlc: Held<HLC>?
    @exclusivity(unchecked) private var digest: Held<Digest256>?
    @exclusivity(unchecked) private var vector = FewMap<UInt64, Held<UInt64>>()
    @exclusivity(unchecked) private var claims = FewMap<UInt64, Held<[UInt8]>>()
    @exclusivity(unchecked) private var aggregates = FewMap<RecordID, Held<Aggregate>>()
    @exclusivity(unchecked) private var children = FewMap<RecordID, [UInt8]?>()
    @exclusivity(unchecked) private var newestLinks = FewMap<UInt64, (sequence: UInt64, link: [UInt8])>()
    /// What the membership rule says of each origin's changes (its claimant's standing); emptied
    /// when a claim, a grant or a revocation is written.
    @exclusivity(unchecked) private var horizons = FewMap<UInt64, Standing?>()
    /// How many origins each member's valid claims name (counted once, then kept up to date).
    @exclusivity(unchecked) private var claimCounts: [[UInt8]: Int] = [:]
    /// How many children each member's changes create (counted once, then kept up to date).
    @exclusivity(unchecked) private var childCounts: [[UInt8]: Int] = [:]
    /// How many bytes of change log each member's origins hold (``Tables/memberBytes``).
    @exclusivity(unchecked) private var memberBytes: [[UInt8]: Held<UInt64>] = [:]
    /// Whether a written-back entry is not in the store yet.
    @exclusivity(unchecked) private(set) var isDirty = false
    /// Whether a change applied here needs the merged state recomputed (``Replica/rebuild(in:)``),
    /// which ``Replica/withApplyContext(_:now:verifier:preparer:_:)`` does once before
    /// the flush; until then the changes' ledger operations are not merged one by one.
    @exclusivity(unchecked) var recomputePending = false
    /// Whether the changes applied here come from a peer, so a change opening an origin is stored
    /// only when its claim names a member (``Replica/admits(_:in:)``).
    @exclusivity(unchecked) var admitsMembersOnly = false

    fileprivate init(_ store: any KeyValueWriter, now: Int64, verifier: any SignatureVerifier, preparer: any ChangePreparer) {
        self.store = store
        self.now = now
        self.verifier = verifier
        self.preparer = preparer
    }

    deinit {
        precondition(!isDirty, "an apply context dropped with writes not flushed")
    }

    // MARK: Written back

    /// The last clock reading (zero when none is stored).
    func lastHLC() throws -> HLC {
        if let hlc { return hlc.value ?? .zero }
        let value = try Replica.lastHLC(store)
        hlc = Held(value: value, dirty: false)
        return value
    }

    func setLastHLC(_ value: HLC) {
        hlc = Held(value: value, dirty: true)
        isDirty = true
    }

    /// The state digest (zero when none is stored or it is unreadable).
    func stateDigest() throws -> Digest256 {
        if let digest { return digest.value ?? .zero }
        let value = Digest256(bytes: try store.get(Tables.meta, Keys.digest)) ?? .zero
        digest = Held(value: value, dirty: false)
        return value
    }

    func setStateDigest(_ value: Digest256) {
        digest = Held(value: value, dirty: true)
        isDirty = true
    }

    /// The highest contiguous sequence held of `origin` (its version vector entry; 0 when none).
    func heldSequence(_ origin: ReplicaID) throws -> UInt64 {
        if let entry = vector[origin.rawValue] { return entry.value ?? 0 }
        let value = Bytes.u64(try store.get(Tables.vector, Keys.origin(origin)))
        vector[origin.rawValue] = Held(value: value, dirty: false)
        return value ?? 0
    }

    func setHeldSequence(_ sequence: UInt64, of origin: ReplicaID) {
        precondition(sequence >= 1, "a vector entry below 1")
        vector[origin.rawValue] = Held(value: sequence, dirty: true)
        isDirty = true
    }

    /// The member key that claimed `origin`, or nil.
    func claim(_ origin: ReplicaID) throws -> [UInt8]? {
        if let entry = claims[origin.rawValue] { return entry.value }
        let value = try store.get(Tables.claims, Keys.origin(origin))
        claims[origin.rawValue] = Held(value: value, dirty: false)
        return value
    }

    /// Records `member`'s claim of `origin`, in place of `replacing` (another member's claim of it).
    func setClaim(_ member: [UInt8], of origin: ReplicaID, replacing previous: [UInt8]? = nil) {
        precondition(!member.isEmpty, "a claim without a member")
        claims[origin.rawValue] = Held(value: member, dirty: true)
        if let previous { claimCounts[previous]? -= 1 }
        claimCounts[member]? += 1
        horizons = FewMap()
        isDirty = true
    }

    /// Changes the totals of `child` with `change` (from empty totals when none are stored),
    /// found with one lookup.
    func updateAggregate(of child: RecordID, _ change: (inout Aggregate) -> Void) throws {
        try aggregates.update(child) { entry in
            var value = try (entry.map { $0.value } ?? storedAggregate(child)) ?? Aggregate()
            change(&value)
            entry = Held(value: value, dirty: true)
        }
        isDirty = true
    }

    private func storedAggregate(_ child: RecordID) throws -> Aggregate? {
        try store.get(Tables.aggregates, Keys.id(child)).map { try Aggregate.decode($0) }
    }

    // MARK: Written through

    /// The stored record of child `id`, or nil.
    func child(_ id: RecordID) throws -> [UInt8]? {
        if let known = children[id] { return known }
        let value = try store.get(Tables.children, Keys.id(id))
        children[id] = .some(value)
        return value
    }

    func setChild(_ id: RecordID, _ record: [UInt8]) throws {
        try store.put(Tables.children, Keys.id(id), record)
        children[id] = .some(record)
    }

    /// The chain link of `origin` at `sequence`, or nil when none is stored.
    func chainLink(_ origin: ReplicaID, at sequence: UInt64) throws -> [UInt8]? {
        if let newest = newestLinks[origin.rawValue], newest.sequence == sequence { return newest.link }
        let stored = try store.get(Tables.chains, Keys.change(origin, sequence))
        // The read side of ``setChainLink(_:of:at:)``'s check: a store that holds another length is damaged.
        if let stored, stored.count != 16 { throw LedgerError.corrupted("a chain link of \(stored.count) bytes") }
        return stored
    }

    /// The link before `sequence` of `origin`: sixteen zeros at the first sequence (or when it is
    /// missing).
    func chainLink(before sequence: UInt64, of origin: ReplicaID) throws -> [UInt8] {
        guard sequence > 1 else { return Replica.zeroLink }
        return try chainLink(origin, at: sequence - 1) ?? Replica.zeroLink
    }

    func setChainLink(_ link: [UInt8], of origin: ReplicaID, at sequence: UInt64) throws {
        precondition(link.count == 16, "a chain link of \(link.count) bytes")
        precondition(sequence >= 1, "a chain link below sequence 1")
        try store.put(Tables.chains, Keys.change(origin, sequence), link)
        newestLinks[origin.rawValue] = (sequence, link)
    }

    /// Stores a verified grant or revocation (`table`) under `key`.
    func putSigned(_ table: Table, _ key: [UInt8], _ encoded: [UInt8]) throws {
        try store.put(table, key, encoded)
        horizons = FewMap()
    }

    /// How many origins valid claims give `member`: one scan of the claims the first time a
    /// context is asked of a member, then kept up to date by ``setClaim(_:of:replacing:)``.
    func claimCount(of member: [UInt8]) throws -> Int {
        if let known = claimCounts[member] { return known }
        try flush()
        var count = 0
        try store.scan(Tables.claims) { _, value in
            if value == member { count += 1 }
            return true
        }
        claimCounts[member] = count
        return count
    }

    /// How many children `member`'s changes create (``Tables/childCreations``).
    func childCount(of member: [UInt8]) throws -> Int {
        if let known = childCounts[member] { return known }
        var count = 0
        try store.scan(Tables.childCreations, prefix: member) { _, _ in
            count += 1
            return true
        }
        childCounts[member] = count
        return count
    }

    /// Records that `member`'s change creates `child`; returns whether that is new.
    func noteChildCreation(_ child: RecordID, by member: [UInt8]) throws -> Bool {
        let key = member + child.bytes
        guard try store.get(Tables.childCreations, key) == nil else { return false }
        let count = try childCount(of: member)
        try store.put(Tables.childCreations, key, [])
        childCounts[member] = count + 1
        horizons = FewMap()
        return true
    }

    /// How many bytes of change log `member`'s origins hold here (``Tables/memberBytes``).
    func storedBytes(of member: [UInt8]) throws -> UInt64 {
        if let held = memberBytes[member] { return held.value ?? 0 }
        let value = Bytes.u64(try store.get(Tables.memberBytes, member)) ?? 0
        memberBytes[member] = Held(value: value, dirty: false)
        return value
    }

    /// Adds `count` bytes to what `member`'s origins hold; returns whether that takes it past
    /// ``Limits/bytesPerMemberMax`` just now.
    func addStoredBytes(_ count: Int, to member: [UInt8]) throws -> Bool {
        let before = try storedBytes(of: member)
        let after = before &+ UInt64(count)
        memberBytes[member] = Held(value: after, dirty: true)
        isDirty = true
        let crossed = before <= Limits.bytesPerMemberMax && after > Limits.bytesPerMemberMax
        if crossed { horizons = FewMap() }
        return crossed
    }

    /// Forgets the standings computed so far: an origin's lowest forked sequence moved, and it
    /// bounds what a revocation's cut covers there (``Replica/covered(_:_:seenUpTo:forkedFrom:)``).
    func forgetStandings() { horizons = FewMap() }

    /// The standing of the member who claimed `origin` (nil: every change of it counts),
    /// computed by `compute` at most once while no claim, grant or revocation is written.
    func horizon(ofOrigin origin: ReplicaID, _ compute: () throws -> Standing?) rethrows -> Standing? {
        if let known = horizons[origin.rawValue] { return known }
        let value = try compute()
        horizons[origin.rawValue] = .some(value)
        return value
    }

    // MARK: Flush

    /// Writes every held entry the store lacks, table by table (aggregates, claims, member bytes,
    /// meta, vector), each in key order.
    func flush() throws {
        let children = aggregates.keys
        for child in children.count > 1 ? children.sorted() : children {
            try aggregates.update(child) { entry in
                guard var held = entry, held.dirty else { return }
                try write(Tables.aggregates, Keys.id(child), held.value?.encoded())
                held.dirty = false
                entry = held
            }
        }
        try flush(&claims, Tables.claims) { $0 }
        for key in memberBytes.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            guard let held = memberBytes[key], held.dirty else { continue }
            try write(Tables.memberBytes, key, held.value.map { Bytes.u64($0) })
            memberBytes[key]?.dirty = false
        }
        if let held = digest, held.dirty {
            try write(Tables.meta, Keys.digest, held.value.map(\.bytes))
            digest?.dirty = false
        }
        if let held = hlc, held.dirty {
            try write(Tables.meta, Keys.hlc, held.value.map(Replica.encodeHLC))
            hlc?.dirty = false
        }
        try flush(&vector, Tables.vector) { Bytes.u64($0) }
        precondition(hlc?.dirty != true, "the clock not flushed")
        precondition(digest?.dirty != true, "the digest not flushed")
        isDirty = false
    }

    /// Forgets what the context holds of the tables a rebuild empties (claims, totals, children,
    /// horizons), after writing it: the rebuild reads them afresh.
    func flushAndForgetDerived() throws {
        try flush()
        claims = FewMap()
        aggregates = FewMap()
        children = FewMap()
        horizons = FewMap()
        claimCounts = [:]
        childCounts = [:]
        memberBytes = [:]
    }

    /// Writes the dirty entries of `map` (keyed by origin) to `table`, in key order.
    private func flush<Value>(_ map: inout FewMap<UInt64, Held<Value>>, _ table: Table,
                              _ encode: (Value) -> [UInt8]) throws {
        for origin in map.keys.sorted() {
            guard var held = map[origin], held.dirty else { continue }
            try write(table, Keys.origin(ReplicaID(origin)), held.value.map(encode))
            held.dirty = false
            map[origin] = held
        }
    }

    private func write(_ table: Table, _ key: [UInt8], _ value: [UInt8]?) throws {
        if let value { try store.put(table, key, value) } else { try store.delete(table, key) }
    }
}

extension Replica {
    /// Runs `body` with an apply context on write transaction `w`, and flushes it when `body`
    /// returns (before `w` commits). When `body` throws, the transaction aborts: the context is
    /// dropped unflushed.
    static func withApplyContext<T>(_ w: any KeyValueWriter, now: Int64, verifier: any SignatureVerifier,
                                    preparer: any ChangePreparer,
                                    _ body: (ApplyContext) throws -> T) throws -> T {
        let context = ApplyContext(w, now: now, verifier: verifier, preparer: preparer)
        do {
            let result = try body(context)
            if context.recomputePending {
                try rebuild(in: context)
                context.recomputePending = false
            }
            try context.flush()
            return result
        } catch {
            context.discard()
            throw error
        }
    }
}

extension ApplyContext {
    /// Marks the held writes as abandoned: their transaction aborts.
    fileprivate func discard() { isDirty = false }
}

/// A map that usually holds a few keys (a batch's children or origins): a short list searched in
/// order while it has few keys (comparing a few ids costs less than hashing one; a dictionary's
/// first insert and every lookup hash), a dictionary beyond.
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

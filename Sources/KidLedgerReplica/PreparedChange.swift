import KidLedgerDomain

/// Runs the two halves of applying a batch: `produce` (pure work on one item), `consume`
/// (applying it, in order, on the calling thread) and `discard` (dropping what `produce` made).
/// Injected like the clock: the replica itself never starts a thread (the simulator and the tests
/// use ``SequentialWork``); the CLI passes one that produces ahead on another core while the
/// calling thread consumes.
public protocol WorkSplitter: Sendable {
    /// Calls `produce(i)` once for each `i` in `0..<count`, in increasing order and one call at a
    /// time, and `consume(i)` on the calling thread in increasing order, each after `produce(i)`
    /// has returned, and `discard(i)` once for every
    /// produced item after its `consume(i)` returned or was skipped, on the thread that produced it
    /// (memory is then freed by the thread that allocated it). `produce` may run ahead on another
    /// thread. When `consume` throws, stops producing and rethrows; returns (or throws) only after
    /// every `produce` and `discard` call has returned.
    func pipeline(_ count: Int, produce: @escaping @Sendable (Int) -> Void, consume: (Int) throws -> Void,
                  discard: @escaping @Sendable (Int) -> Void) throws
}

/// Everything on the calling thread: produce one item, consume it, discard it, and so on.
public struct SequentialWork: WorkSplitter {
    /// Creates the splitter.
    public init() {}

    public func pipeline(_ count: Int, produce: @escaping @Sendable (Int) -> Void, consume: (Int) throws -> Void,
                         discard: @escaping @Sendable (Int) -> Void) throws {
        for i in 0..<count {
            produce(i)
            defer { discard(i) }
            try consume(i)
        }
    }
}

/// What applying a change computes from the change alone, before the write transaction: its
/// canonical encoding and version hash and, for a change that adds one transaction, the
/// transaction's record and hashes. A pure function of the change, so a batch can be prepared
/// in parallel (``Replica/prepare(_:splitter:)``) and apply gives the same result either way.
struct PreparedChange: Sendable {
    /// `RecordCodec.encode(change)`.
    var encoded: [UInt8]
    /// `Keys.version(encoded)`.
    var version: [UInt8]
    /// Its key in the change log.
    var logKey: [UInt8]
    /// For a change of one operation that adds a transaction or writes a register.
    var operation: PreparedOperation?
    /// For a change of several operations (a give-all, a new child): one entry per operation,
    /// prepared for those that add a transaction or write a register; empty for a change of one
    /// operation.
    var operations: [PreparedOperation?] = []
    /// The hash-chain link this change gets if the link before it is `previous` (predicted from
    /// the store's chain heads when the batch began and the changes prepared before it); apply
    /// uses it only when the actual previous link is the same.
    var chain: (previous: [UInt8], link: [UInt8])?
    /// Whether no operation breaks a domain rule (``Replica/problem(with:)``): apply skips the check.
    var operationsValid: Bool

    /// `withIDMix`: whether a transaction's ``PreparedTransaction/idMix`` is computed here (else
    /// applying computes it).
    init(_ change: Change, withIDMix: Bool = true) {
        self.init(change, encoded: RecordCodec.encode(change), withIDMix: withIDMix)
    }

    /// `encoded` must be `RecordCodec.encode(change)`.
    init(_ change: Change, encoded: [UInt8], withIDMix: Bool = true) {
        self.encoded = encoded
        version = Keys.version(encoded)
        logKey = Keys.change(change.origin, change.sequence, version: version)
        operationsValid = change.operations.allSatisfy { Replica.problem(with: $0) == nil }
        let stamp = Stamp(hlc: change.hlc, origin: change.origin)
        if change.operations.count == 1 {
            // A transaction's record is the end of the change's bytes: copied, not encoded again.
            operation = PreparedOperation(change.operations[0], stamp: stamp,
                                          payload: RecordCodec.soleTransaction(of: change, encoded: encoded), withIDMix: withIDMix)
        } else {
            operations = change.operations.map { PreparedOperation($0, stamp: stamp, withIDMix: withIDMix) }
        }
    }

    /// The prepared operation `i`, if it adds a transaction or writes a register.
    func operation(at i: Int) -> PreparedOperation? {
        operations.isEmpty ? (i == 0 ? operation : nil) : operations[i]
    }

    /// Every register write prepared.
    var registers: [PreparedRegister] {
        (operations.isEmpty ? [operation] : operations).compactMap { if case .register(let r)? = $0 { r } else { nil } }
    }
}

/// What preparing computes for one operation.
enum PreparedOperation: Sendable {
    case transaction(PreparedTransaction)
    case register(PreparedRegister)

    /// Prepares `op` of a change stamped `stamp`, when it adds a transaction or writes a register.
    /// `payload`, when given, must be `RecordCodec.encode(t)` of the transaction `op` adds.
    init?(_ op: Operation, stamp: Stamp, payload: [UInt8]? = nil, withIDMix: Bool = true) {
        switch op {
        case .addTransaction(let t): self = .transaction(PreparedTransaction(t, payload: payload, withIDMix: withIDMix))
        case .setField(let entity, let field, let value, let base):
            self = .register(PreparedRegister(RegisterWrite(stamp: stamp, base: base, value: value), entity: entity, field: field))
        default: return nil
        }
    }

    var transaction: PreparedTransaction? { if case .transaction(let t) = self { t } else { nil } }
    var register: PreparedRegister? { if case .register(let r) = self { r } else { nil } }
}

/// A register write's key, stored bytes, digest record and hash, and history entry. A class, like
/// ``PreparedTransaction``: handing it on (to apply, from the cache) then costs one reference
/// count instead of one per array.
final class PreparedRegister: Sendable {
    /// `Keys.register(entity, field)`.
    let key: [UInt8]
    /// The write as the registers table stores it (``StoredRegister/encoded()``).
    let stored: [UInt8]
    /// ``DigestRecord/register(key:stored:)`` and its hash (``Digest256/hash(_:)``).
    let record: [UInt8]
    let recordHash: Digest256
    /// Its entry in the register history.
    let historyKey, historyValue: [UInt8]

    init(_ write: RegisterWrite, entity: RecordID, field: Field) {
        key = Keys.register(entity, field)
        stored = StoredRegister(stamp: write.stamp, value: write.value).encoded()
        record = DigestRecord.register(key: key, stored: stored)
        recordHash = Digest256.hash(record)
        let history = write.entry(entity: entity, field: field)
        historyKey = history.key
        historyValue = history.value
    }
}

/// A transaction's stored record and keys, the hash the state digest adds for it, and its id's
/// share of its child's id hash. A class, immutable: handing it on (copying a prepared change out
/// of the cache, picking the operation to apply) costs one reference count, not one per array.
final class PreparedTransaction: Sendable {
    let payload: [UInt8]
    let recordHash: Digest256
    /// ``Aggregate/idMix(_:)`` of its id; nil when prepared without it (applying computes it).
    let idMix: (high: UInt64, low: UInt64)?
    /// `Keys.id` of the transaction and of its child, `Keys.byTime`, `Keys.byChild`.
    let key, childKey, byTimeKey, byChildKey: [UInt8]

    /// `payload`, when given, must be `RecordCodec.encode(t)`.
    init(_ t: LedgerTransaction, payload: [UInt8]? = nil, withIDMix: Bool = true) {
        key = Keys.id(t.id)
        childKey = Keys.id(t.childID)
        byTimeKey = Keys.byTime(t)
        byChildKey = Keys.byChild(t)
        assert(payload == nil || payload == RecordCodec.encode(t), "not the transaction's encoding")
        self.payload = payload ?? RecordCodec.encode(t)
        recordHash = Digest256.hash(tag: DigestRecord.transactionTag, self.payload)
        idMix = withIDMix ? Aggregate.idMix(t.id) : nil
    }
}

/// Remembers prepared changes by their canonical encoding, for a process that applies the same
/// changes to many replicas: the simulator, where every change reaches every replica (and the
/// final checks' fresh ones). Preparing is a pure function of the encoding, so a hit gives exactly
/// what preparing again would (the chain prediction, which depends on the replica, is left out);
/// what it saves is the hashing. Like the simulator's signature cache. Single-threaded: only with
/// ``SequentialWork``.
public final class PreparationCache: @unchecked Sendable {
    // Used by one thread, and no access to its tables outlives the call that makes it: the
    // run-time exclusivity checks of its properties are left out (as in ``BatchWriter``).

    /// An encoding as a dictionary key, hashed a buffer at a time: a long one by its length, its
    /// first 48 bytes and its last 16 (a change's origin, sequence and clock come first; equality
    /// still compares every byte).
    private struct Key: Hashable {
        let bytes: [UInt8]
        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { raw in
                guard raw.count > 64 else { return hasher.combine(bytes: raw) }
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: raw[..<48]))
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: raw[(raw.count - 16)...]))
                hasher.combine(raw.count)
            }
        }
        static func == (a: Key, b: Key) -> Bool { KeyBytes.equal(a.bytes, b.bytes) }
    }
    @exclusivity(unchecked) private var entries: [Key: PreparedChange] = [:]
    /// Chain links by the link before them and the only version at their sequence: every replica
    /// that takes a change after the same history computes the same link.
    @exclusivity(unchecked) private var links: [LinkKey: [UInt8]] = [:]
    /// A link (16 bytes) and a version (8) as three words: no array to build per lookup, and
    /// fewer bytes to hash.
    private struct LinkKey: Hashable {
        let previousHigh, previousLow, version: UInt64

        /// The key of `previous` and `version`, or nil when they are not 16 and 8 bytes long
        /// (never from a sound store).
        init?(_ previous: [UInt8], _ version: [UInt8]) {
            guard previous.count == 16, version.count == 8 else { return nil }
            (previousHigh, previousLow) = Keys.words(previous)
            self.version = version.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        }
    }
    /// Digest hashes of register records (``DigestRecord/register(key:stored:)``): each stored
    /// register is added to the digest of every replica, and removed again when overwritten.
    @exclusivity(unchecked) private var registerHashes: [Key: Digest256] = [:]
    /// Id hashes (``Aggregate/idMix(_:)``) of transactions placed without a prepared record
    /// (those that waited for their child).
    @exclusivity(unchecked) private var idMixes: [RecordID: (high: UInt64, low: UInt64)] = [:]
    /// Lookups answered from the cache, and changes prepared afresh.
    @exclusivity(unchecked) public private(set) var hits = 0, misses = 0

    /// Creates an empty cache.
    public init() {}

    /// `PreparedChange(change)`, remembered.
    func prepared(_ change: Change) -> PreparedChange {
        prepared(change, encoded: RecordCodec.encode(change))
    }

    /// `PreparedChange(change)`, remembered; `encoded` must be `RecordCodec.encode(change)`.
    func prepared(_ change: Change, encoded: [UInt8]) -> PreparedChange {
        if let known = known(encoded) { return known }
        misses += 1
        let fresh = PreparedChange(change, encoded: encoded)
        entries[Key(bytes: encoded)] = fresh
        // Where a later write replaces one of these registers, the digest removes its hash.
        for register in fresh.registers { registerHashes[Key(bytes: register.record)] = register.recordHash }
        return fresh
    }

    /// The prepared change whose canonical encoding is `bytes`, if one is remembered. Bytes a
    /// change was decoded from can be looked up so: a hit proves them canonical (they are the
    /// encoding of a change, which decodes to that change), so the change is the one prepared.
    func known(_ bytes: [UInt8]) -> PreparedChange? {
        guard let known = entries[Key(bytes: bytes)] else { return nil }
        hits += 1
        return known
    }

    /// `Replica.link(after: previous, onlyVersion: version)`, remembered.
    func link(after previous: [UInt8], onlyVersion version: [UInt8]) -> [UInt8] {
        guard let key = LinkKey(previous, version) else { return Replica.link(after: previous, onlyVersion: version) }
        if let known = links[key] { return known }
        let fresh = Replica.link(after: previous, onlyVersion: version)
        links[key] = fresh
        return fresh
    }

    /// `Aggregate.idMix(id)`, remembered.
    func idMix(_ id: RecordID) -> (high: UInt64, low: UInt64) {
        if let known = idMixes[id] { return known }
        let fresh = Aggregate.idMix(id)
        idMixes[id] = fresh
        return fresh
    }

    /// The hash the digest adds for register record `record`, remembered.
    func registerHash(_ record: [UInt8]) -> Digest256 {
        let key = Key(bytes: record)
        if let known = registerHashes[key] { return known }
        let fresh = Digest256.hash(record)
        registerHashes[key] = fresh
        return fresh
    }
}

extension Replica {
    /// Applies `changes` in `w` in order, each prepared by `splitter` (possibly ahead, on another
    /// thread; through `cache` when there is one, then on the calling thread); `body` sees each
    /// change and its outcome.
    /// `received` (optional) holds the bytes each change was decoded from, for looking it up in
    /// `cache`.
    static func apply(_ changes: [Change], received: [[UInt8]]? = nil, in w: any KeyValueWriter, now: Int64,
                      verifier: any SignatureVerifier, splitter: any WorkSplitter, cache: PreparationCache? = nil,
                      _ body: (Change, ApplyOutcome) throws -> Void) throws {
        precondition(cache == nil || splitter is SequentialWork, "a preparation cache is single-threaded")
        let slots = UnsafeMutableBufferPointer<PreparedChange?>.allocate(capacity: changes.count)
        slots.initialize(repeating: nil)
        defer {
            _ = slots.deinitialize()
            slots.deallocate()
        }
        nonisolated(unsafe) let target = slots
        // The chain link before each origin's first change in the batch, read now, so the
        // preparing thread can chain the links of the changes that follow it.
        let predictor = LinkPredictor(cache: cache)
        // Without a cache each prepared change is applied once, and on two threads the preparing
        // one is the busier (mostly SHA-256): the applying side hashes each transaction id's share
        // of its child's id hash (`Aggregate.idMix`, one SHA-256 block) itself. With a cache the
        // prepared change serves every replica, so it keeps the share.
        for change in changes where change.sequence >= 1 && predictor.heads[change.origin.rawValue] == nil {
            predictor.heads[change.origin.rawValue] = (change.sequence - 1, try previousLink(change.origin, change.sequence, w))
        }
        try splitter.pipeline(changes.count, produce: { i in
            var prepared = cache.map { cache in
                received.flatMap { cache.known($0[i]) } ?? cache.prepared(changes[i])
            } ?? PreparedChange(changes[i], withIDMix: false)
            predictor.predict(changes[i], &prepared)
            target[i] = prepared
        }, consume: { i in
            // Moved out of its slot and back, not copied: a copy retains each of its arrays, and
            // on two threads each of those retains pulls a cache line from the preparing core.
            let prepared = target[i].take()
            defer { target[i] = consume prepared }
            let outcome = try apply(changes[i], prepared: prepared, in: w, now: now, verifier: verifier, cache: cache)
            try body(changes[i], outcome)
        }, discard: { i in
            target[i] = nil
        })
    }
}

/// The chain links a batch will probably write, one origin at a time: used by the one thread that
/// prepares the batch, in order.
final class LinkPredictor: @unchecked Sendable {
    /// Per origin: the sequence of the newest predicted link, and that link. A batch holds the
    /// changes of a few origins: a short list searched in order costs less than hashing. Used by
    /// one thread at a time (the run-time exclusivity checks are left out).
    @exclusivity(unchecked) var heads = BatchWriter.FewMap<UInt64, (sequence: UInt64, link: [UInt8])>()
    /// Remembers links across replicas (single-threaded, like the predictor's one thread).
    private let cache: PreparationCache?

    init(cache: PreparationCache?) { self.cache = cache }

    func predict(_ change: Change, _ prepared: inout PreparedChange) {
        guard let head = heads[change.origin.rawValue], head.sequence &+ 1 == change.sequence else { return }
        let link = cache?.link(after: head.link, onlyVersion: prepared.version)
            ?? Replica.link(after: head.link, onlyVersion: prepared.version)
        prepared.chain = (head.link, link)
        heads[change.origin.rawValue] = (change.sequence, link)
    }
}

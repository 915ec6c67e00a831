import Synchronization
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

/// Prepares changes for applying: the pure work (encodings, hashes, keys), injected like the
/// ``WorkSplitter``. The product uses ``PlainPreparer``; a driver may pass a decorator that
/// remembers its answers, each exactly what ``PlainPreparer`` would give.
public protocol ChangePreparer: Sendable {
    /// ``PreparedChange/init(_:encoded:)``; `encoded` is `RecordCodec.encode(change)`.
    func prepare(_ change: Change, encoded: [UInt8]) -> PreparedChange
    /// Whether it may prepare on the splitter's other thread (else only with ``SequentialWork``).
    var isThreadSafe: Bool { get }
}

/// Computes every answer each time: the product's preparer.
public struct PlainPreparer: ChangePreparer {
    /// Creates the preparer.
    public init() {}

    public func prepare(_ change: Change, encoded: [UInt8]) -> PreparedChange { PreparedChange(change, encoded: encoded) }

    public var isThreadSafe: Bool { true }
}

/// What applying a change computes from the change alone, before the write transaction: its
/// canonical encoding and version hash, and each operation's records and hashes. A pure function
/// of the change, so a batch can be prepared on another thread (``Replica/apply(_:in:splitter:_:)``).
/// Every applied change is prepared first: a local one, a received one, and each change of the
/// log when a revocation rebuilds the state.
public struct PreparedChange: Sendable {
    /// `RecordCodec.encode(change)`.
    var encoded: [UInt8]
    /// `Keys.version(encoded)`: the 8-byte version hash its chain link takes.
    public internal(set) var version: [UInt8]
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
    /// The first domain rule an operation breaks (``Replica/problem(with:)``), or nil.
    var problem: String?

    /// Prepares `change`; `encoded` must be `RecordCodec.encode(change)`.
    public init(_ change: Change, encoded: [UInt8]) {
        self.encoded = encoded
        version = Keys.version(encoded)
        logKey = Keys.change(change.origin, change.sequence, version: version)
        problem = change.operations.lazy.compactMap { Replica.problem(with: $0) }.first
        let stamp = Stamp(hlc: change.hlc, origin: change.origin)
        if change.operations.count == 1 {
            // A transaction's record is the end of the change's bytes: copied, not encoded again.
            operation = PreparedOperation(change.operations[0], stamp: stamp,
                                          payload: RecordCodec.soleTransaction(of: change, encoded: encoded))
        } else {
            operations = change.operations.map { PreparedOperation($0, stamp: stamp) }
        }
    }

    /// The prepared operation `i`, if it adds a transaction or writes a register.
    func operation(at i: Int) -> PreparedOperation? {
        operations.isEmpty ? (i == 0 ? operation : nil) : operations[i]
    }
}

/// What preparing computes for one operation.
enum PreparedOperation: Sendable {
    case transaction(PreparedTransaction)
    case register(PreparedRegister)

    /// Prepares `op` of a change stamped `stamp`, when it adds a transaction or writes a register.
    /// `payload`, when given, must be `RecordCodec.encode(t)` of the transaction `op` adds.
    init?(_ op: Operation, stamp: Stamp, payload: [UInt8]? = nil) {
        switch op {
        case .addTransaction(let t): self = .transaction(PreparedTransaction(t, payload: payload))
        case .setField(let entity, let field, let value, let base):
            self = .register(PreparedRegister(RegisterWrite(stamp: stamp, base: base, value: value), entity: entity, field: field))
        default: return nil
        }
    }
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

/// A transaction's stored record, its keys and the hash the state digest adds for it. A class,
/// immutable: handing it on (copying a prepared change out of the cache, picking the operation to
/// apply) costs one reference count, not one per array.
final class PreparedTransaction: Sendable {
    let payload: [UInt8]
    let recordHash: Digest256
    let keys: TransactionKeys

    /// `payload`, when given, must be `RecordCodec.encode(t)`.
    init(_ t: LedgerTransaction, payload: [UInt8]? = nil) {
        keys = TransactionKeys(t)
        assert(payload == nil || payload == RecordCodec.encode(t), "not the transaction's encoding")
        self.payload = payload ?? RecordCodec.encode(t)
        recordHash = Digest256.hash(tag: DigestRecord.transactionTag, self.payload)
    }
}

/// The keys a transaction is stored and indexed under.
struct TransactionKeys: Sendable {
    /// `Keys.id`, `Keys.byTime` and `Keys.byChild` of the transaction.
    let key, byTime, byChild: [UInt8]

    init(_ t: LedgerTransaction) {
        key = Keys.id(t.id)
        byTime = Keys.byTime(t)
        byChild = Keys.byChild(t)
    }
}

extension Replica {
    /// Applies `changes` in `context` in order, each prepared by the context's preparer on
    /// `splitter`'s producing side (possibly ahead, on another thread); `body` sees each change
    /// its outcome and its version hash.
    static func apply(_ changes: [Change], in context: ApplyContext,
                      splitter: any WorkSplitter, _ body: (Change, ApplyOutcome, [UInt8]) throws -> Void) throws {
        let preparer = context.preparer
        precondition(preparer.isThreadSafe || splitter is SequentialWork, "this preparer is single-threaded")
        let slots = UnsafeMutableBufferPointer<PreparedChange?>.allocate(capacity: changes.count)
        slots.initialize(repeating: nil)
        defer {
            _ = slots.deinitialize()
            slots.deallocate()
        }
        // Slot i is written by produce(i) and read by consume(i) and discard(i), which the
        // splitter orders after it (``WorkSplitter``): never two threads at one slot at once.
        nonisolated(unsafe) let target = slots
        // The chain link before each origin's first change in the batch, read now, so the
        // preparing thread can chain the links of the changes that follow it.
        let predictor = LinkPredictor()
        for change in changes where change.sequence >= 1 && predictor.heads[change.origin.rawValue] == nil {
            predictor.heads[change.origin.rawValue] = (change.sequence - 1, try context.chainLink(before: change.sequence, of: change.origin))
        }
        try splitter.pipeline(changes.count, produce: { i in
            var prepared = preparer.prepare(changes[i], encoded: RecordCodec.encode(changes[i]))
            predictor.predict(changes[i], &prepared)
            target[i] = prepared
        }, consume: { i in
            // Moved out of its slot and back, not copied: a copy retains each of its arrays, and
            // on two threads each of those retains pulls a cache line from the preparing core.
            let prepared = target[i].take()!
            defer { target[i] = consume prepared }
            let outcome = try apply(changes[i], prepared, in: context)
            try body(changes[i], outcome, prepared.version)
        }, discard: { i in
            target[i] = nil
        })
    }
}

/// The chain links a batch will probably write, one origin at a time. Unchecked Sendable: filled
/// by the applying thread before the pipeline starts, then used only by ``WorkSplitter``'s
/// produce calls, one at a time (checked: ``predict(_:_:)`` traps on an overlapping call).
final class LinkPredictor: @unchecked Sendable {
    /// Per origin: the sequence of the newest predicted link, and that link. A batch holds the
    /// changes of a few origins: a short list searched in order costs less than hashing.
    var heads = FewMap<UInt64, (sequence: UInt64, link: [UInt8])>()
    /// Whether a ``predict(_:_:)`` call is running.
    private let busy = Atomic<Bool>(false)

    func predict(_ change: Change, _ prepared: inout PreparedChange) {
        precondition(!busy.exchange(true, ordering: .acquiring), "two threads predict at once")
        defer { busy.store(false, ordering: .releasing) }
        guard let head = heads[change.origin.rawValue], head.sequence &+ 1 == change.sequence else { return }
        let link = Replica.chainLink(after: head.link, onlyVersion: prepared.version)
        prepared.chain = (head.link, link)
        heads[change.origin.rawValue] = (change.sequence, link)
    }
}

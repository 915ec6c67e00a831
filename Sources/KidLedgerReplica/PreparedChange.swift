import KidLedgerDomain

/// Runs the two halves of applying a batch: `produce` (pure work on one item), `consume`
/// (applying it, in order, on the calling thread) and `discard` (dropping what `produce` made).
/// Injected like the clock: the replica itself never starts a thread (the simulator and the tests
/// use ``SequentialWork``); the CLI passes one that produces ahead on another core while the
/// calling thread consumes.
public protocol WorkSplitter: Sendable {
    /// Calls `produce(i)` once for each `i` in `0..<count` and `consume(i)` on the calling thread
    /// in increasing order, each after `produce(i)` has returned, and `discard(i)` once for every
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
    /// For a change whose only operation adds a transaction.
    var transaction: PreparedTransaction?

    init(_ change: Change) {
        encoded = RecordCodec.encode(change)
        version = Keys.version(encoded)
        logKey = Keys.change(change.origin, change.sequence, version: version)
        if change.operations.count == 1, case .addTransaction(let t) = change.operations[0] {
            transaction = PreparedTransaction(t)
        }
    }
}

/// A transaction's stored record and keys, the hash the state digest adds for it, and its id's
/// share of its child's id hash.
struct PreparedTransaction: Sendable {
    var payload: [UInt8]
    var recordHash: Digest256
    var idMix: (high: UInt64, low: UInt64)
    /// `Keys.id` of the transaction and of its child, `Keys.byTime`, `Keys.byChild`.
    var key, childKey, byTimeKey, byChildKey: [UInt8]

    init(_ t: LedgerTransaction) {
        key = Keys.id(t.id)
        childKey = Keys.id(t.childID)
        byTimeKey = Keys.byTime(t)
        byChildKey = Keys.byChild(t)
        payload = RecordCodec.encode(t)
        recordHash = Digest256.hash(tag: DigestRecord.transactionTag, payload)
        idMix = Aggregate.idMix(t.id)
    }
}

extension Replica {
    /// Applies `changes` in `w` in order, each prepared by `splitter` (possibly ahead, on another
    /// thread); `body` sees each change and its outcome.
    static func apply(_ changes: [Change], in w: any KeyValueWriter, now: Int64, verifier: any SignatureVerifier,
                      splitter: any WorkSplitter, _ body: (Change, ApplyOutcome) throws -> Void) throws {
        let slots = UnsafeMutableBufferPointer<PreparedChange?>.allocate(capacity: changes.count)
        slots.initialize(repeating: nil)
        defer {
            _ = slots.deinitialize()
            slots.deallocate()
        }
        nonisolated(unsafe) let target = slots
        try splitter.pipeline(changes.count, produce: { i in
            target[i] = PreparedChange(changes[i])
        }, consume: { i in
            let outcome = try apply(changes[i], prepared: target[i], in: w, now: now, verifier: verifier)
            try body(changes[i], outcome)
        }, discard: { i in
            target[i] = nil
        })
    }
}

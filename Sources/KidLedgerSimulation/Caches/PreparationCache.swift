import KidLedgerDomain
import KidLedgerReplica

/// A ``ChangePreparer`` that remembers its answers, for a process that applies the same changes
/// to many replicas: the simulator, where every change reaches every replica. Preparing is a pure
/// function of a change's encoding, so a kept answer is exactly what ``PlainPreparer`` would give
/// again (the chain prediction, which depends on the replica, is left out); what it saves is the
/// hashing. Like ``CachingVerifier``, it changes only the cost.
///
/// Unchecked Sendable: a ``ChangePreparer`` must be Sendable, but this one is used by one thread
/// (``isThreadSafe`` is false, so a replica uses it only with ``SequentialWork``); ``ThreadCheck``
/// traps a use from another thread in debug builds.
public final class PreparationCache: ChangePreparer, @unchecked Sendable {
    // One thread, and no access to these outlives the call that makes it: the run-time
    // exclusivity checks of its tables are left out.
    private let plain = PlainPreparer()
    private let thread = ThreadCheck()

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
        static func == (a: Key, b: Key) -> Bool { a.bytes.count == b.bytes.count && KeyBytes.compare(a.bytes, b.bytes) == 0 }
    }
    @exclusivity(unchecked) private var entries: [Key: PreparedChange] = [:]
    /// Lookups answered from the cache, and changes prepared afresh.
    @exclusivity(unchecked) public private(set) var hits = 0, misses = 0

    /// Creates an empty cache.
    public init() {}

    public var isThreadSafe: Bool { false }

    public func prepare(_ change: Change, encoded: [UInt8]) -> PreparedChange {
        thread.check()
        let key = Key(bytes: encoded)
        if let known = entries[key] {
            hits += 1
            return known
        }
        misses += 1
        let fresh = plain.prepare(change, encoded: encoded)
        entries[key] = fresh
        return fresh
    }
}

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
            (previousHigh, previousLow) = previous.withUnsafeBytes {
                ($0.loadUnaligned(fromByteOffset: 0, as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            }
            self.version = version.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        }
    }
    /// Digest hashes of register records: each stored register is added to the digest of every
    /// replica, and removed again when overwritten.
    @exclusivity(unchecked) private var registerHashes: [Key: Digest256] = [:]
    /// Id hashes of transactions (``PlainPreparer/idMix(_:)``).
    @exclusivity(unchecked) private var idMixes: [RecordID: (high: UInt64, low: UInt64)] = [:]
    /// Lookups answered from the cache, and changes prepared afresh.
    @exclusivity(unchecked) public private(set) var hits = 0, misses = 0

    /// Creates an empty cache.
    public init() {}

    public var isThreadSafe: Bool { false }
    public var usesReceivedBytes: Bool { true }

    public func prepare(_ change: Change, encoded: [UInt8]) -> PreparedChange {
        if let known = known(encoded) { return known }
        misses += 1
        let fresh = plain.prepare(change, encoded: encoded)
        entries[Key(bytes: encoded)] = fresh
        // Where a later write replaces one of these registers, the digest removes its hash.
        for register in fresh.registerRecords { registerHashes[Key(bytes: register.record)] = register.hash }
        return fresh
    }

    /// Bytes a change was decoded from are looked up as they are: a hit proves them canonical
    /// (they are the encoding of a change, which decodes to that change), so the change is the
    /// one prepared.
    public func prepare(_ change: Change, received: [UInt8]?) -> PreparedChange {
        if let received, let known = known(received) { return known }
        return prepare(change, encoded: RecordCodec.encode(change))
    }

    /// The prepared change whose canonical encoding is `bytes`, if one is remembered.
    private func known(_ bytes: [UInt8]) -> PreparedChange? {
        thread.check()
        guard let known = entries[Key(bytes: bytes)] else { return nil }
        hits += 1
        return known
    }

    public func link(after previous: [UInt8], onlyVersion version: [UInt8]) -> [UInt8] {
        thread.check()
        guard let key = LinkKey(previous, version) else { return plain.link(after: previous, onlyVersion: version) }
        if let known = links[key] { return known }
        let fresh = plain.link(after: previous, onlyVersion: version)
        links[key] = fresh
        return fresh
    }

    public func idMix(_ id: RecordID) -> (high: UInt64, low: UInt64) {
        thread.check()
        if let known = idMixes[id] { return known }
        let fresh = plain.idMix(id)
        idMixes[id] = fresh
        return fresh
    }

    public func registerHash(_ record: [UInt8]) -> Digest256 {
        thread.check()
        let key = Key(bytes: record)
        if let known = registerHashes[key] { return known }
        let fresh = plain.registerHash(record)
        registerHashes[key] = fresh
        return fresh
    }
}

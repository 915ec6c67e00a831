import KidLedgerDomain

/// A version vector: for each origin replica, the highest contiguous sequence held.
public typealias VersionVector = [ReplicaID: UInt64]

/// One change of the log in its canonical encoding.
public struct EncodedChange: Equatable, Sendable {
    /// The replica that made it.
    public var origin: ReplicaID
    /// Its sequence number at that origin.
    public var sequence: UInt64
    /// `RecordCodec.encode(change)`.
    public var bytes: [UInt8]
}

/// What applying a batch of received changes did.
public struct ApplyReport: Equatable, Sendable {
    /// Changes written.
    public var applied = 0
    /// Changes already held.
    public var duplicates = 0
    /// Changes refused because a predecessor is missing.
    public var gaps = 0
    /// Other versions of changes already held (a forked origin), kept and merged.
    public var forkedVersions = 0
    /// Whether this replica learned that its own history forked (it was restored from a stale
    /// copy of its files) and continues under a new replica id.
    public var rotatedReplicaID = false
}

extension Replica {
    /// The version vector of what this replica holds.
    public func versionVector() throws -> VersionVector {
        try store.read { r in try Self.versionVector(r, queryCache) }
    }

    static func versionVector(_ r: any KeyValueReader, _ queries: any QueryCache) throws -> VersionVector {
        try queries.value(.versionVector, tables: vectorTables, reading: r) { Memo(try readVersionVector(r)) }.value
    }

    /// What ``versionVector(_:)`` reads.
    private static let vectorTables = [Tables.vector]

    static func readVersionVector(_ r: any KeyValueReader) throws -> VersionVector {
        var vector: VersionVector = [:]
        try r.scan(Tables.vector) { key, value in
            if let origin = Bytes.u64(key), let sequence = Bytes.u64(value) { vector[ReplicaID(origin)] = sequence }
            return true
        }
        return vector
    }

    /// The hash chain of `origin` at `sequence` (16 bytes), or nil when not held.
    public func chain(_ origin: ReplicaID, at sequence: UInt64) throws -> [UInt8]? {
        try store.read { r in try r.get(Tables.chains, Keys.change(origin, sequence)) }
    }

    /// The hash chain at the head of every origin in `vector`.
    public func chains(at vector: VersionVector) throws -> [ReplicaID: [UInt8]] {
        try store.read { r in
            var result: [ReplicaID: [UInt8]] = [:]
            for (origin, sequence) in vector where sequence > 0 {
                result[origin] = try r.get(Tables.chains, Keys.change(origin, sequence))
            }
            return result
        }
    }

    /// Changes this replica holds that `vector` does not cover, origin by origin in sequence
    /// order (every version of a forked sequence, never split), about `limit` of them. Costs one
    /// cursor range per origin: proportional to what is missing, not to the size of the ledger.
    /// The owner's origins come first (then the others, each group in ascending order), so a
    /// joining replica receives the genesis, grants and revocations before the members' changes
    /// they judge, and need not recompute its state when the genesis arrives.
    public func changes(notCoveredBy vector: VersionVector, limit: Int = .max) throws -> [Change] {
        try encodedChanges(notCoveredBy: vector, limit: limit).map { entry in
            do { return try RecordCodec.decodeChange(entry.bytes) } catch {
                throw LedgerError.corrupted("change log entry: \(error)")
            }
        }
    }

    /// ``changes(notCoveredBy:limit:)`` as the log holds them: each change's canonical encoding,
    /// with its origin and sequence (from the log key), not decoded. What a sync sends.
    public func encodedChanges(notCoveredBy vector: VersionVector, limit: Int = .max) throws -> [EncodedChange] {
        try store.read { r in
            var result: [EncodedChange] = []
            let mine = try Self.versionVector(r, queryCache)
            var missing = mine.filter { (vector[$0.key] ?? 0) < $0.value }.keys.sorted()
            if let (_, ownerKey) = try Self.owner(r, queryCache) {
                var owners: [ReplicaID] = [], others: [ReplicaID] = []
                for origin in missing {
                    if try r.get(Tables.claims, Keys.origin(origin)) == ownerKey { owners.append(origin) } else { others.append(origin) }
                }
                missing = owners + others
            }
            for origin in missing {
                guard result.count < limit else { break }
                let start = Keys.change(origin, (vector[origin] ?? 0) + 1)
                var lastSequence: UInt64 = 0
                try r.scan(Tables.changes, prefix: Keys.origin(origin), from: start, reverse: false) { key, value in
                    guard key.count == 24 else { throw LedgerError.corrupted("change log key") }
                    let sequence = key.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
                    if result.count >= limit && sequence != lastSequence { return false }
                    result.append(EncodedChange(origin: origin, sequence: sequence, bytes: value))
                    lastSequence = sequence
                    return true
                }
            }
            return result
        }
    }

    /// Applies received changes in one write transaction, idempotently. Each change is applied
    /// whole or not at all; duplicates are skipped and gaps refused (they will be sent again).
    ///
    /// A received change of this replica's own origin that it does not hold proves its files
    /// were restored from an older copy: it then continues under a fresh replica id (in the same
    /// transaction), so it never hands out a (replica id, sequence) pair twice.
    ///
    /// `received`, when given, holds the bytes each change was decoded from (one per change, not
    /// necessarily canonical): a ``preparer`` that remembers changes may find a change's
    /// prepared form by them without encoding it again.
    @discardableResult
    public func applyRemote(_ changes: [Change], received: [[UInt8]]? = nil) throws -> ApplyReport {
        precondition(received == nil || received!.count == changes.count, "one received encoding per change")
        let now = clock.nowMillis()
        var generator = random
        let verifier = self.verifier
        let splitter = workSplitter
        let (report, current): (ApplyReport, ReplicaID) = try store.write { w in
            // Read here, not from `replicaID`: another process (the CLI, when this is the daemon)
            // may have taken a derived id for its first change in the household, or rotated.
            let me = try Self.currentReplicaID(w)
            var report = ApplyReport()
            var ownHistoryForked = false
            try Self.withApplyContext(w, now: now, verifier: verifier, preparer: preparer, queries: queryCache) { context in
                // The pure part of each change (encodings and hashes) is prepared on the
                // injected splitter's producing side, on another core in the CLI, while this
                // thread applies.
                try Self.apply(changes, received: received, in: context, splitter: splitter) { change, outcome in
                    switch outcome {
                    case .applied: report.applied += 1
                    case .duplicate: report.duplicates += 1
                    case .gap: report.gaps += 1
                    case .forkedVersion: report.forkedVersions += 1
                    }
                    if change.origin == me && (outcome == .applied || outcome == .forkedVersion) { ownHistoryForked = true }
                }
            }
            guard ownHistoryForked else { return (report, me) }
            // Such changes prove nothing today (changes are not authenticated to their author:
            // issue 20, point 2), so a member could send them every session: a replica takes
            // at most ``rotationsMax`` fresh ids in its life for them, then refuses the batch.
            let rotations = Bytes.u64(try w.get(Tables.meta, Keys.rotations)) ?? 0
            guard rotations < UInt64(Self.rotationsMax) else { throw LedgerError.tooManyRotations }
            try w.put(Tables.meta, Keys.rotations, Bytes.u64(rotations + 1))
            report.rotatedReplicaID = true
            return (report, try Self.rotate(from: me, in: w, generator: &generator))
        }
        random = generator
        replicaID = current
        return report
    }

    /// The most fresh replica ids a replica takes because changes of its own origin that it
    /// does not hold arrived (restores from stale copies: rare; see docs/SYNC.md).
    public static let rotationsMax = 8

    static func currentReplicaID(_ r: any KeyValueReader) throws -> ReplicaID {
        guard let raw = Bytes.u64(try r.get(Tables.meta, Keys.replica)) else { throw LedgerError.corrupted("replica id missing") }
        return ReplicaID(raw)
    }

    static func rotate(from old: ReplicaID, in w: any KeyValueWriter, generator: inout any RandomNumberGenerator) throws -> ReplicaID {
        var fresh = ReplicaID(generator.next() | 1)
        while true {
            let taken = try w.get(Tables.vector, Keys.origin(fresh)) != nil
            if fresh != old && !taken { break }
            fresh = ReplicaID(generator.next() | 1)
        }
        try w.put(Tables.meta, Keys.replica, Bytes.u64(fresh.rawValue))
        return fresh
    }
}

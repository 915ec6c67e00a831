import KidLedgerDomain

/// A version vector: for each origin replica, the highest contiguous sequence held.
public typealias VersionVector = [ReplicaID: UInt64]

/// What applying a batch of received changes did.
public struct ApplyReport: Equatable, Sendable {
    /// Changes written.
    public var applied = 0
    /// Changes already held.
    public var duplicates = 0
    /// Changes refused because a predecessor is missing.
    public var gaps = 0
}

extension Replica {
    /// The version vector of what this replica holds.
    public func versionVector() throws -> VersionVector {
        try store.read { r in try versionVectorIn(r) }
    }

    /// Changes this replica holds that `vector` does not cover, origin by origin in sequence
    /// order, at most `limit` of them. Costs one cursor range per origin: proportional to what is
    /// missing, not to the size of the ledger.
    public func changes(notCoveredBy vector: VersionVector, limit: Int = .max) throws -> [Change] {
        try store.read { r in
            var result: [Change] = []
            let mine = try versionVectorIn(r)
            for origin in mine.keys.sorted() where (vector[origin] ?? 0) < mine[origin]! {
                guard result.count < limit else { break }
                let start = Keys.change(origin, (vector[origin] ?? 0) + 1)
                try r.scan(Tables.changes, prefix: Keys.origin(origin), from: start, reverse: false) { _, value in
                    do { result.append(try RecordCodec.decodeChange(value)) } catch {
                        throw LedgerError.corrupted("change log entry: \(error)")
                    }
                    return result.count < limit
                }
            }
            return result
        }
    }

    private func versionVectorIn(_ r: any KeyValueReader) throws -> VersionVector {
        var vector: VersionVector = [:]
        try r.scan(Tables.vector) { key, value in
            if let origin = Bytes.u64(key), let sequence = Bytes.u64(value) { vector[ReplicaID(origin)] = sequence }
            return true
        }
        return vector
    }

    /// Applies received changes in one write transaction, idempotently. Each change is applied
    /// whole or not at all; duplicates are skipped and gaps refused (they will be sent again).
    @discardableResult
    public func applyRemote(_ changes: [Change]) throws -> ApplyReport {
        let now = clock.nowMillis()
        return try store.write { w in
            var report = ApplyReport()
            for change in changes {
                switch try Self.apply(change, in: w, now: now) {
                case .applied: report.applied += 1
                case .duplicate: report.duplicates += 1
                case .gap: report.gaps += 1
                }
            }
            return report
        }
    }
}

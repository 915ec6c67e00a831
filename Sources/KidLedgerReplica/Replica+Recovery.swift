import KidLedgerDomain

/// Stale-copy recovery (the Riak KV679 problem).
///
/// A replica restored from an older copy of its files has forgotten changes it already sent to
/// peers. Its next local changes reuse (replica id, sequence) pairs that peers hold with other
/// contents, and version vectors would silently hide one of the two forks. A peer's vector that
/// shows more of this replica's own origin than it holds reveals the restore; recovery then
/// moves the forked changes to a fresh replica id, so both histories survive.
extension Replica {
    /// The highest own sequence a peer was seen to hold identically (meta key "ownConfirmed").
    /// Own changes up to it existed before any restore point that can be taken later, so they
    /// never collide; recovery re-issues only the changes after it.
    public func confirmedOwnSequence() throws -> UInt64 {
        try store.read { r in Bytes.u64(try r.get(Tables.meta, Keys.ownConfirmed)) ?? 0 }
    }

    /// Records that a peer holds this replica's own changes up to `sequence` (clamped to what this
    /// replica holds). Called by the sync session after a vector exchange or an acknowledgement.
    public func confirmOwnChanges(heldByPeerUpTo sequence: UInt64) throws {
        let me = replicaID
        try store.write { w in
            let held = Bytes.u64(try w.get(Tables.vector, Keys.origin(me))) ?? 0
            let current = Bytes.u64(try w.get(Tables.meta, Keys.ownConfirmed)) ?? 0
            let next = min(sequence, held)
            if next > current { try w.put(Tables.meta, Keys.ownConfirmed, Bytes.u64(next)) }
        }
    }

    /// Recovers from a restore of stale files after a peer showed it holds this replica's own
    /// origin up to `peerHolds`, beyond what this replica holds. Does nothing otherwise.
    ///
    /// In one write transaction: draws a fresh replica id from the injected generator; re-issues
    /// the operations of every own change after ``confirmedOwnSequence()`` as new changes under
    /// the fresh id (keeping their HLC stamps, so register merges order them as before); deletes
    /// those colliding log entries of the old origin and lowers the vector of the old origin to
    /// the confirmed sequence, so the peer's real versions are received next; rebuilds the merged
    /// state from the change log (so no effect of a deleted entry lingers); stores the new id.
    ///
    /// - Returns: whether recovery happened.
    @discardableResult
    public func recoverFromStaleCopy(peerHolds: UInt64) throws -> Bool {
        let old = replicaID
        var generator = random
        let now = clock.nowMillis()
        let fresh: ReplicaID? = try store.write { w in
            let held = Bytes.u64(try w.get(Tables.vector, Keys.origin(old))) ?? 0
            guard peerHolds > held else { return nil }
            var fresh = ReplicaID(generator.next() | 1)
            while true {
                let taken = try w.get(Tables.vector, Keys.origin(fresh)) != nil
                if fresh != old && !taken { break }
                fresh = ReplicaID(generator.next() | 1)
            }
            let keep = min(Bytes.u64(try w.get(Tables.meta, Keys.ownConfirmed)) ?? 0, held)

            // Move the forked own changes to the fresh origin.
            var forked: [Change] = []
            try w.scan(Tables.changes, prefix: Keys.origin(old), from: Keys.change(old, keep + 1), reverse: false) { _, value in
                forked.append(try Self.decodeLogEntry(value))
                return true
            }
            for change in forked { try w.delete(Tables.changes, Keys.change(old, change.sequence)) }
            for (index, change) in forked.enumerated() {
                let moved = Change(origin: fresh, sequence: UInt64(index + 1), hlc: change.hlc, operations: change.operations)
                try w.put(Tables.changes, Keys.change(fresh, moved.sequence), RecordCodec.encode(moved))
            }

            // Rebuild every derived table from the log.
            for table in Tables.all where table != Tables.meta && table != Tables.changes {
                var keys: [[UInt8]] = []
                try w.scan(table) { key, _ in
                    keys.append(key)
                    return true
                }
                for key in keys { try w.delete(table, key) }
            }
            try w.put(Tables.meta, Keys.digest, Digest256.zero.bytes)
            var log: [Change] = []
            try w.scan(Tables.changes) { _, value in
                log.append(try Self.decodeLogEntry(value))
                return true
            }
            for change in log {
                guard try Self.apply(change, in: w, now: now) == .applied else {
                    throw LedgerError.corrupted("change log has a gap at \(change.origin):\(change.sequence)")
                }
            }
            try w.put(Tables.meta, Keys.replica, Bytes.u64(fresh.rawValue))
            try w.delete(Tables.meta, Keys.ownConfirmed)
            return fresh
        }
        random = generator
        guard let fresh else { return false }
        replicaID = fresh
        return true
    }

    static func decodeLogEntry(_ value: [UInt8]) throws -> Change {
        do { return try RecordCodec.decodeChange(value) } catch {
            throw LedgerError.corrupted("change log entry: \(error)")
        }
    }
}

extension Keys {
    /// Meta key: the highest own sequence a peer was seen to hold (see ``Replica/confirmedOwnSequence()``).
    static let ownConfirmed: [UInt8] = Array("ownConfirmed".utf8)
}

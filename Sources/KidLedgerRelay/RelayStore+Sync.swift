import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity

/// One page of ``RelayStore/pending(for:after:countMax:bytesMax:)``.
public struct RelayPage: Equatable, Sendable {
    /// Whole envelopes (header included) above the member's vector, in stream and sequence order.
    public let envelopes: [[UInt8]]
    /// Where the next call continues (pass it as `after`), or nil when the store was read to its end.
    public let next: RelayEnvelopeHeader?

    /// A page (tests compare with one).
    public init(envelopes: [[UInt8]], next: RelayEnvelopeHeader?) {
        self.envelopes = envelopes
        self.next = next
    }
}

/// What one ``RelayStore/collect(visitingAtMost:)`` call did.
public struct RelayCollection: Equatable, Sendable {
    /// Envelopes deleted.
    public let deleted: Int
    /// Their bytes (released from their uploaders' charges).
    public let freedBytes: UInt64
    /// Whether this call reached the end of the store (the next call starts again at its beginning).
    public let reachedEnd: Bool

    /// A result (tests compare with one).
    public init(deleted: Int, freedBytes: UInt64, reachedEnd: Bool) {
        self.deleted = deleted
        self.freedBytes = freedBytes
        self.reachedEnd = reachedEnd
    }
}

/// What any listed member may see of another member key: opaque to the relay.
public struct RelayMemberStatus: Equatable, Sendable {
    /// The member relay key.
    public let key: RelayMemberKey
    /// Its quota and the bytes charged to it.
    public let quotaBytes: UInt64, usedBytes: UInt64
    /// When it last acknowledged (milliseconds, as the relay's driver passed them), or nil.
    public let lastSyncMilliseconds: Int64?

    /// A status (tests compare with one).
    public init(key: RelayMemberKey, quotaBytes: UInt64, usedBytes: UInt64, lastSyncMilliseconds: Int64?) {
        self.key = key
        self.quotaBytes = quotaBytes
        self.usedBytes = usedBytes
        self.lastSyncMilliseconds = lastSyncMilliseconds
    }
}

extension RelayStore {
    /// Sets `member`'s acknowledged sequences of the streams in `vector` (a sequence of 0 forgets
    /// that stream; a lower one is taken as given: a member restored from a backup says what it
    /// holds) and its last sync time to `milliseconds`. Streams not named keep their sequence.
    /// - Throws: ``RelayStoreError/notOnAccessList``, ``RelayStoreError/invalidArgument(_:)``
    ///   (more than ``streamsPerMemberMax`` entries, a sequence above 2^62),
    ///   ``RelayStoreError/tooManyStreams(_:)``; nothing changes then.
    ///
    /// Work: two store operations per entry (≤ ``streamsPerMemberMax``). Collection is
    /// ``collect(visitingAtMost:)``'s.
    public func acknowledge(_ vector: [RelayStreamTag: UInt64], from member: RelayMemberKey,
                            atMilliseconds milliseconds: Int64) throws {
        guard vector.count <= Int(Self.streamsPerMemberMax) else {
            throw RelayStoreError.invalidArgument("a vector names at most \(Self.streamsPerMemberMax) streams, got \(vector.count)")
        }
        guard vector.values.allSatisfy({ $0 <= Limits.sequenceMax }) else { throw RelayStoreError.invalidArgument("a sequence above 2^62") }
        try store.write { w in
            _ = try Self.listing(w, member)
            var record = try w.get(RelayTables.members, member.bytes).map { v throws(RelayStoreError) in try MemberRecord.decode(v) } ?? MemberRecord()
            for (stream, sequence) in vector.sorted(by: { KeyBytes.compare($0.key.bytes, $1.key.bytes) < 0 }) {
                let key = RelayValues.vectorKey(member, stream)
                let held = try w.get(RelayTables.vectors, key).map { v throws(RelayStoreError) in try RelayValues.decodeSequence(v) }
                if sequence == 0 {
                    guard held != nil else { continue }
                    guard record.streams > 0 else { throw RelayTables.damaged(RelayTables.members, "stream count below its entries") }
                    try w.delete(RelayTables.vectors, key)
                    record.streams -= 1
                } else {
                    if held == nil {
                        guard record.streams < Self.streamsPerMemberMax else { throw RelayStoreError.tooManyStreams(Int(Self.streamsPerMemberMax)) }
                        record.streams += 1
                    }
                    try w.put(RelayTables.vectors, key, RelayValues.sequence(sequence))
                }
            }
            record.lastSyncMilliseconds = milliseconds
            try w.put(RelayTables.members, member.bytes, record.encoded)
        }
    }

    /// `member`'s acknowledged vector (empty on a wiped relay, so members upload again).
    /// Work: ≤ ``streamsPerMemberMax`` entries.
    public func vector(of member: RelayMemberKey) throws -> [RelayStreamTag: UInt64] {
        try store.read { try Self.vector($0, member) }
    }

    /// Every listed key's quota, charge and last sync time, in key order (what members see of
    /// each other). Work: ≤ 1,000 keys.
    public func members() throws -> [RelayMemberStatus] {
        try store.read { r in
            guard let list = try Self.accessList(r) else { return [] }
            return try list.members.map { key in
                let record = try r.get(RelayTables.members, key.bytes).map { v throws(RelayStoreError) in try MemberRecord.decode(v) }
                return RelayMemberStatus(key: key, quotaBytes: list.quotas[key]!, usedBytes: try Self.usage(r, key),
                                         lastSyncMilliseconds: record?.lastSyncMilliseconds)
            }
        }
    }

    /// The envelopes above `member`'s vector (last sequence above its acknowledged one), in stream
    /// and sequence order, after the header `after` (nil: from the start). A page holds at most
    /// `countMax` (1...``pendingCountMax``) envelopes and `bytesMax` bytes (but always one
    /// envelope, if any is pending), and visits at most ``pendingVisitsMax``; `next` continues it.
    public func pending(for member: RelayMemberKey, after: RelayEnvelopeHeader? = nil,
                        countMax: Int = RelayStore.pendingCountMax, bytesMax: Int = RelayEnvelope.bytesMax) throws -> RelayPage {
        guard (1...Self.pendingCountMax).contains(countMax), bytesMax >= 1 else {
            throw RelayStoreError.invalidArgument("a page holds 1 to \(Self.pendingCountMax) envelopes and at least a byte")
        }
        return try store.read { r in
            _ = try Self.listing(r, member)
            let vector = try Self.vector(r, member)
            let start = after?.encoded
            var page: [[UInt8]] = []
            var bytes = 0, visited = 0
            var lastVisited: RelayEnvelopeHeader?
            var more = false
            try r.scan(RelayTables.envelopes, prefix: [], from: start, reverse: false) { key, value in
                if key == start { return true }
                guard visited < Self.pendingVisitsMax, page.count < countMax else { more = true; return false }
                let stored = try StoredEnvelope.decode(key: key, value: value)
                if stored.header.lastSequence > vector[stored.header.stream] ?? 0 {
                    guard page.isEmpty || bytes + stored.envelope.count <= bytesMax else { more = true; return false }
                    page.append(stored.envelope)
                    bytes += stored.envelope.count
                }
                visited += 1
                lastVisited = stored.header
                return true
            }
            return RelayPage(envelopes: page, next: more ? lastVisited : nil)
        }
    }

    /// Deletes the envelopes whose last sequence every listed key acknowledged, visiting at most
    /// `count` (1...``collectVisitsMax``) from where the previous call stopped; the relay's
    /// driver calls it after sessions and after a new access list until `reachedEnd`.
    /// Work: `count` envelopes, and one get per listed key for each distinct stream among them.
    public func collect(visitingAtMost count: Int = RelayStore.collectVisitsMax) throws -> RelayCollection {
        guard (1...Self.collectVisitsMax).contains(count) else {
            throw RelayStoreError.invalidArgument("a collection visits 1 to \(Self.collectVisitsMax) envelopes")
        }
        return try store.write { w in
            guard let list = try Self.accessList(w) else { return RelayCollection(deleted: 0, freedBytes: 0, reachedEnd: true) }
            let cursor = try w.get(RelayTables.meta, RelayTables.collectCursorKey)
            guard cursor == nil || cursor!.count == RelayEnvelopeHeader.byteCount else {
                throw RelayTables.damaged(RelayTables.meta, "a collection cursor of \(cursor!.count) bytes")
            }
            var visited: [StoredEnvelope] = []
            var more = false
            try w.scan(RelayTables.envelopes, prefix: [], from: cursor, reverse: false) { key, value in
                if key == cursor { return true }
                guard visited.count < count else { more = true; return false }
                visited.append(try StoredEnvelope.decode(key: key, value: value))
                return true
            }
            var horizons: [RelayStreamTag: UInt64] = [:]
            var deleted = 0
            var freed: UInt64 = 0
            for stored in visited {
                let stream = stored.header.stream
                if horizons[stream] == nil { horizons[stream] = try Self.horizon(w, list, stream) }
                guard stored.header.lastSequence <= horizons[stream]! else { continue }
                let size = UInt64(stored.envelope.count)
                let used = try Self.usage(w, stored.uploader)
                guard used >= size else { throw RelayTables.damaged(RelayTables.usage, "a charge below the envelopes it covers") }
                try w.delete(RelayTables.envelopes, stored.header.encoded)
                if used == size { try w.delete(RelayTables.usage, stored.uploader.bytes) }
                else { try w.put(RelayTables.usage, stored.uploader.bytes, RelayValues.usage(used - size)) }
                deleted += 1
                freed += size
            }
            if more, let last = visited.last { try w.put(RelayTables.meta, RelayTables.collectCursorKey, last.header.encoded) }
            else { try w.delete(RelayTables.meta, RelayTables.collectCursorKey) }
            return RelayCollection(deleted: deleted, freedBytes: freed, reachedEnd: !more)
        }
    }

    static func vector(_ r: any KeyValueReader, _ member: RelayMemberKey) throws -> [RelayStreamTag: UInt64] {
        var vector: [RelayStreamTag: UInt64] = [:]
        try r.scan(RelayTables.vectors, prefix: member.bytes) { key, value in
            guard key.count == RelayMemberKey.byteCount + RelayStreamTag.byteCount,
                  vector.count < Int(streamsPerMemberMax) else {
                throw RelayTables.damaged(RelayTables.vectors, "a key of \(key.count) bytes or too many entries")
            }
            // 16 bytes by the check above.
            vector[RelayStreamTag(bytes: Array(key[RelayMemberKey.byteCount...]))!] = try RelayValues.decodeSequence(value)
            return true
        }
        return vector
    }
}

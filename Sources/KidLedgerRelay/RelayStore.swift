import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity

/// The relay's store (docs/RELAY-DESIGN.md, "The relay's store"): a pure state machine over a
/// ``KeyValueStore`` that files sealed envelopes by their clear header, charges them to the
/// member key that uploaded them, keeps each member key's acknowledged vector, last sync time and
/// mailbox of epoch boxes, and collects envelopes every listed key has acknowledged.
///
/// It holds no key and never opens an envelope; it reads only the 37-byte clear header. No I/O of
/// its own, no clock (times are passed in), no threads. Every call is one transaction: a refusal
/// stores nothing. Every call's work is bounded by the constants below, never by the store's size.
public final class RelayStore {
    /// The tables an environment must open for this store.
    public static let tables: [Table] = RelayTables.all
    /// Most streams one member key acknowledges (one per origin the household ever had).
    public static let streamsPerMemberMax: UInt32 = 1_024
    /// Most envelopes one ``pending(for:after:countMax:bytesMax:)`` call returns.
    public static let pendingCountMax = 256
    /// Most envelopes one ``pending(for:after:countMax:bytesMax:)`` call visits (served or skipped).
    public static let pendingVisitsMax = 4_096
    /// Most envelopes one ``collect(visitingAtMost:)`` call visits.
    public static let collectVisitsMax = 1_024
    /// Most epoch boxes one member key's mailbox holds.
    public static let mailboxBoxesMax = 16

    let store: any KeyValueStore

    /// The relay's store over `store`, whose environment opened ``tables``. An empty store is a
    /// wiped relay: no access list, no envelopes, empty vectors.
    public init(store: any KeyValueStore) {
        self.store = store
    }

    /// The access list held, or nil before the first one.
    public func accessList() throws -> RelayAccessList? {
        try store.read { try Self.accessList($0) }
    }

    /// Installs `list` unless the held one's number is the same or higher (a stale or replayed
    /// list is ignored: returns false), or whatever the held number when `overridingHeld` (the
    /// new owner's first list after an owner change, ``RelayOwnerChange``). Keys no longer listed lose their vector, last sync time
    /// and mailbox, and no longer hold collection back; the envelopes they uploaded stay (other
    /// members may still need them), charged to them until collected.
    ///
    /// Work: one delete per vector entry and box of each removed key (≤ 1,000 keys ×
    /// (``streamsPerMemberMax`` + ``mailboxBoxesMax``)); the owner, not a member, sends lists.
    public func install(_ list: RelayAccessList, overridingHeld: Bool = false) throws -> Bool {
        try store.write { w in
            let held = try Self.accessList(w)
            if !overridingHeld, let held, held.number >= list.number { return false }
            for key in held?.members ?? [] where list.quotas[key] == nil {
                try w.delete(RelayTables.members, key.bytes)
                try Self.deletePrefix(w, RelayTables.vectors, key.bytes)
                try Self.deletePrefix(w, RelayTables.mailbox, key.bytes)
            }
            try w.put(RelayTables.meta, RelayTables.accessListKey, list.encoded)
            return true
        }
    }

    /// What ``upload(_:from:)`` did with an envelope.
    public enum UploadResult: Equatable, Sendable {
        /// Stored and charged to the uploader.
        case stored
        /// Not stored, not charged: an envelope with this header is held already (a replay, or
        /// another member's upload of the same range; the first one is kept), or every listed key
        /// has acknowledged its last sequence.
        case alreadyHeld
    }

    /// Stores `envelope` under its clear header, charged to `member`.
    /// - Throws: ``RelayStoreError/notOnAccessList``, ``RelayStoreError/malformedEnvelope(_:)``
    ///   (size outside 78 bytes...1 MiB + 77, or a bad header), ``RelayStoreError/overQuota(quotaBytes:usedBytes:envelopeBytes:)``
    ///   when the member's charged bytes plus the envelope's would pass its quota (nothing is stored).
    ///
    /// Work: one envelope's bytes, a few gets, and one get per listed key (the collection horizon).
    public func upload(_ envelope: [UInt8], from member: RelayMemberKey) throws -> UploadResult {
        let header: RelayEnvelopeHeader
        do { header = try RelayEnvelope.header(of: envelope) } catch { throw RelayStoreError.malformedEnvelope(error) }
        return try store.write { w in
            let list = try Self.listing(w, member)
            let key = header.encoded
            if let held = try w.get(RelayTables.envelopes, key) {
                _ = try StoredEnvelope.decode(key: key, value: held)
                return .alreadyHeld
            }
            if header.lastSequence <= (try Self.horizon(w, list, header.stream)) { return .alreadyHeld }
            let used = try Self.usage(w, member)
            let size = UInt64(envelope.count)
            let quota = list.quotas[member]!
            guard used + size <= quota else {
                throw RelayStoreError.overQuota(quotaBytes: quota, usedBytes: used, envelopeBytes: size)
            }
            try w.put(RelayTables.envelopes, key, StoredEnvelope.value(uploader: member, envelope: envelope))
            try w.put(RelayTables.usage, member.bytes, RelayValues.usage(used + size))
            return .stored
        }
    }

    /// The bytes of envelopes charged to `key` (also after it left the access list, until they are collected).
    public func usedBytes(of key: RelayMemberKey) throws -> UInt64 {
        try store.read { try Self.usage($0, key) }
    }

    /// The bytes of every envelope held (the sum of the charges): at most the sum of the listed
    /// keys' quotas, plus what keys since removed uploaded before and is not yet collected.
    /// Work: one read per key with a charge.
    public func storedBytes() throws -> UInt64 {
        try store.read { r in
            var total: UInt64 = 0
            try r.scan(RelayTables.usage) { key, value in
                guard key.count == RelayMemberKey.byteCount else { throw RelayTables.damaged(RelayTables.usage, "a key of \(key.count) bytes") }
                total += try RelayValues.decodeUsage(value)
                return true
            }
            return total
        }
    }

    // MARK: - Reading inside a transaction

    static func accessList(_ r: any KeyValueReader) throws -> RelayAccessList? {
        guard let bytes = try r.get(RelayTables.meta, RelayTables.accessListKey) else { return nil }
        do { return try RelayAccessList.decode(bytes) } catch { throw RelayTables.damaged(RelayTables.meta, "access list: \(error)") }
    }

    /// The held list, if `member` is on it; throws ``RelayStoreError/notOnAccessList`` otherwise.
    static func listing(_ r: any KeyValueReader, _ member: RelayMemberKey) throws -> RelayAccessList {
        guard let list = try accessList(r), list.quotas[member] != nil else { throw RelayStoreError.notOnAccessList }
        return list
    }

    static func usage(_ r: any KeyValueReader, _ key: RelayMemberKey) throws -> UInt64 {
        try r.get(RelayTables.usage, key.bytes).map { v throws(RelayStoreError) in try RelayValues.decodeUsage(v) } ?? 0
    }

    /// The highest sequence of `stream` every key on `list` acknowledged (0 when one has not).
    /// Work: one get per listed key.
    static func horizon(_ r: any KeyValueReader, _ list: RelayAccessList, _ stream: RelayStreamTag) throws -> UInt64 {
        var lowest = UInt64.max
        for key in list.quotas.keys {
            guard let value = try r.get(RelayTables.vectors, RelayValues.vectorKey(key, stream)) else { return 0 }
            lowest = min(lowest, try RelayValues.decodeSequence(value))
        }
        return lowest
    }

    static func deletePrefix(_ w: any KeyValueWriter, _ table: Table, _ prefix: [UInt8]) throws {
        var keys: [[UInt8]] = []
        try w.scan(table, prefix: prefix) { key, _ in keys.append(key); return true }
        for key in keys { try w.delete(table, key) }
    }
}

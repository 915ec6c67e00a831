import KidLedgerDomain

/// The replica's tables and the layout of their keys. Integers in keys are big-endian so byte
/// order is numeric order. See docs/ARCHITECTURE.md for the full layout.
public enum Tables {
    /// Schema version, replica id, last HLC, digest.
    public static let meta = Table("meta")
    /// The change log: origin (8) + sequence (8) + version hash (8) → encoded ``Change``. Also the
    /// pending-sync queue. Normally one version per (origin, sequence); a replica restored from a
    /// stale copy of its files can fork its own history, and then every version is kept.
    public static let changes = Table("changes")
    /// Per-origin hash chains: origin (8) + sequence (8) → 16 bytes, the hash of the chain before
    /// it and the sorted version hashes at this sequence. Two replicas agree on an origin's history
    /// up to a sequence exactly when their chains there are equal.
    public static let chains = Table("chains")
    /// The version vector: origin (8) → highest contiguous sequence held (8).
    public static let vector = Table("vector")
    /// Household creation records: id (16) → encoded record.
    public static let households = Table("households")
    /// Child creation records: id (16) → encoded record.
    public static let children = Table("children")
    /// LWW registers: entity (16) + field (1) → stamp + value.
    public static let registers = Table("registers")
    /// The grow-only transaction set (winning payload per id): id (16) → encoded transaction.
    public static let transactions = Table("transactions")
    /// Applied transactions by time: createdAt (8, ordered) + id (16) → empty.
    public static let byTime = Table("byTime")
    /// Applied transactions by child and time: child (16) + createdAt (8) + id (16) → empty.
    public static let byChild = Table("byChild")
    /// Per-child aggregate: child (16) → count, sum (Int128), id hash.
    public static let aggregates = Table("aggregates")
    /// Transactions whose child has not arrived: child (16) + id (16) → empty.
    public static let deferred = Table("deferred")
    /// Losing payloads of same-id conflicts: kind (1) + id (16) + payload hash (16) → payload.
    public static let conflicts = Table("conflicts")

    /// Every register write ever seen: entity (16) + field (1) + stamp → base stamp + value. The
    /// conflict journal is derived from it. Informational; not part of the digest.
    public static let registerHistory = Table("registerHistory")

    /// Every table, for opening the store.
    public static let all: [Table] = [meta, changes, chains, vector, households, children, registers,
                                      transactions, byTime, byChild, aggregates, deferred, conflicts,
                                      registerHistory, peers, invites, settings, claims, grants, revocations,
                                      rejected, forged, pendingClaims]
}

/// Key builders.
enum Keys {
    static func id(_ id: RecordID) -> [UInt8] {
        var w = ByteWriter(capacity: 16)
        w.write(id: id)
        return w.bytes
    }

    /// The log key prefix of every version of (origin, sequence); also the chains-table key.
    static func change(_ origin: ReplicaID, _ sequence: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: 24)
        w.write(bigEndian: origin.rawValue)
        w.write(bigEndian: sequence)
        return w.bytes
    }

    /// The log key of one version of a change.
    static func change(_ origin: ReplicaID, _ sequence: UInt64, version: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: 16 + version.count)
        w.write(bigEndian: origin.rawValue)
        w.write(bigEndian: sequence)
        w.write(raw: version)
        return w.bytes
    }

    /// The 8-byte version hash of a change's canonical bytes.
    static func version(_ encoded: [UInt8]) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(encoded)
        return hasher.finalizeWords().prefix(8)
    }

    static func origin(_ origin: ReplicaID) -> [UInt8] {
        var w = ByteWriter(capacity: 8)
        w.write(bigEndian: origin.rawValue)
        return w.bytes
    }

    static func register(_ entity: RecordID, _ field: Field) -> [UInt8] {
        var w = ByteWriter(capacity: 17)
        w.write(id: entity)
        w.write(field.rawValue)
        return w.bytes
    }

    static func byTime(_ t: LedgerTransaction) -> [UInt8] {
        var w = ByteWriter(capacity: 24)
        w.write(orderedSigned: t.createdAtMillis)
        w.write(id: t.id)
        return w.bytes
    }

    static func byChild(_ t: LedgerTransaction) -> [UInt8] {
        var w = ByteWriter(capacity: 40)
        w.write(id: t.childID)
        w.write(orderedSigned: t.createdAtMillis)
        w.write(id: t.id)
        return w.bytes
    }

    static func deferred(_ t: LedgerTransaction) -> [UInt8] {
        var w = ByteWriter(capacity: 32)
        w.write(id: t.childID)
        w.write(id: t.id)
        return w.bytes
    }

    static func conflict(kind: UInt8, id: RecordID, payload: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: 33)
        w.write(kind)
        w.write(id: id)
        w.write(raw: SHA256.hash(payload).prefix(16))
        return w.bytes
    }

    /// The trailing 16-byte id of an index key; a shorter key (a damaged store) throws.
    static func trailingID(_ key: [UInt8]) throws -> RecordID {
        guard key.count >= 16 else { throw LedgerError.corrupted("an index key of \(key.count) bytes") }
        return id(in: key, at: key.count - 16)
    }

    /// The id that is a whole 16-byte key; another length (a damaged store) throws.
    static func storedID(_ key: [UInt8]) throws -> RecordID {
        guard key.count == 16 else { throw LedgerError.corrupted("a record key of \(key.count) bytes") }
        return id(in: key, at: 0)
    }

    /// The id in the 16 bytes of `key` from `offset` (the caller checked the length): two loads,
    /// where the generic `RecordID(bytes:)` costs several hundred instructions.
    @inline(__always)
    static func id(in key: [UInt8], at offset: Int) -> RecordID {
        let (high, low) = words(key, at: offset)
        return RecordID(high: high, low: low)
    }

    /// The two big-endian words of `key` from `offset` (16 bytes there, checked by the caller): a
    /// chain key's origin and sequence, or an id's two halves.
    @inline(__always)
    static func words(_ key: [UInt8], at offset: Int = 0) -> (UInt64, UInt64) {
        key.withUnsafeBytes {
            (UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)),
             UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
        }
    }

    static let schema: [UInt8] = Array("schema".utf8)
    static let replica: [UInt8] = Array("replica".utf8)
    static let hlc: [UInt8] = Array("hlc".utf8)
    static let digest: [UInt8] = Array("digest".utf8)
}

/// Fixed-width integer helpers for values.
enum Bytes {
    static func u64(_ v: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: 8)
        w.write(bigEndian: v)
        return w.bytes
    }

    static func u64(_ bytes: [UInt8]?) -> UInt64? {
        guard let bytes, bytes.count == 8 else { return nil }
        var r = ByteReader(bytes)
        return try? r.readBigEndianUInt64()
    }
}

import KidLedgerDomain

/// The replica's tables and the layout of their keys. Integers in keys are big-endian so byte
/// order is numeric order. See docs/STORE.md for the full layout.
public enum Tables {
    /// Schema version (``Migrations``), replica id, last HLC, digest, the writer's product version.
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
    /// Applied transactions by time: createdAt (8, ordered) + id (16) → the origin (8) that wrote
    /// the stored version (its author).
    public static let byTime = Table("byTime")
    /// Applied transactions by child and time: child (16) + createdAt (8) + id (16) → origin (8),
    /// as in `byTime`.
    public static let byChild = Table("byChild")
    /// Per-child aggregate: child (16) → count, sum (Int128), id hash.
    public static let aggregates = Table("aggregates")
    /// Transactions whose child has not arrived: child (16) + id (16) → origin (8), as in `byTime`.
    public static let deferred = Table("deferred")
    /// Losing payloads of same-id conflicts: kind (1) + id (16) + payload hash (16) → the
    /// loser's origin (8), then its payload.
    public static let conflicts = Table("conflicts")

    /// Every register write ever seen: entity (16) + field (1) + stamp → base stamp + value. The
    /// conflict journal is derived from it. Informational; not part of the digest.
    public static let registerHistory = Table("registerHistory")

    /// Every table, for opening the store.
    public static let all: [Table] = [meta, changes, chains, vector, households, children, registers,
                                      transactions, byTime, byChild, aggregates, deferred, conflicts,
                                      registerHistory, peers, invites, shortInvites, settings, claims, grants, revocations,
                                      rejected, forged, pendingClaims, transfers, creators, heads, forks,
                                      forkFloods, childCreations, inbound, memberBytes, relay]
}

/// A short byte string (at most ``capacity`` bytes: a key or a fixed-width value) built in a
/// buffer on the stack, then copied into an array of exactly its length: one allocation, and each
/// integer stored as one big-endian word. The keys and values that every applied change builds
/// cost about half as much so as with a `ByteWriter`, which reserves capacity and then appends a
/// byte at a time (an array made with `init(unsafeUninitializedCapacity:)` costs more still: its
/// allocation looks up the array's generic metadata on every call).
struct ShortBytes {
    /// The most bytes it holds: the longest key built so (`Keys.byChild`, 40) and a child's
    /// totals (at most 42) fit.
    static let capacity = 48
    private var storage: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)
    /// How many bytes are written so far.
    private(set) var count = 0

    private init() {}

    /// The bytes that `body` writes.
    @inline(__always)
    static func make(_ body: (inout ShortBytes) -> Void) -> [UInt8] {
        var w = ShortBytes()
        body(&w)
        let n = w.count
        return withUnsafeBytes(of: &w.storage) { Array(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
    }

    /// Stores `n` bytes at the end with `store` (given the buffer and the offset).
    @inline(__always)
    private mutating func append(_ n: Int, _ store: (UnsafeMutableRawBufferPointer, Int) -> Void) {
        precondition(n <= Self.capacity - count, "a short byte string longer than \(Self.capacity) bytes")
        let at = count
        withUnsafeMutableBytes(of: &storage) { store($0, at) }
        count += n
    }

    /// Appends one byte.
    @inline(__always)
    mutating func write(_ byte: UInt8) {
        append(1) { $0.storeBytes(of: byte, toByteOffset: $1, as: UInt8.self) }
    }

    /// Appends a fixed-width big-endian unsigned integer (``ByteWriter/write(bigEndian:)``).
    @inline(__always)
    mutating func write(bigEndian value: UInt64) {
        append(8) { $0.storeBytes(of: value.bigEndian, toByteOffset: $1, as: UInt64.self) }
    }

    /// Appends a signed integer as ``ByteWriter/write(orderedSigned:)`` does: big-endian with the
    /// sign bit flipped.
    @inline(__always)
    mutating func write(orderedSigned value: Int64) {
        write(bigEndian: UInt64(bitPattern: value) ^ (1 << 63))
    }

    /// Appends an unsigned LEB128 varint (``ByteWriter/write(varint:)``).
    @inline(__always)
    mutating func write(varint value: UInt64) {
        var v = value
        while v >= 0x80 {
            write(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        write(UInt8(v))
    }

    /// Appends a 16-byte record id.
    @inline(__always)
    mutating func write(id: RecordID) {
        write(bigEndian: id.high)
        write(bigEndian: id.low)
    }

    /// Appends raw bytes.
    @inline(__always)
    mutating func write(raw: [UInt8]) {
        raw.withUnsafeBytes { raw in
            append(raw.count) { UnsafeMutableRawBufferPointer(rebasing: $0[$1...]).copyMemory(from: raw) }
        }
    }
}

extension KeyBytes {
    /// Whether `a` and `b` hold the same bytes: compared eight at a time (`Array`'s `==` compares
    /// one byte per step, which dominated looking up an encoded change of a hundred bytes or more).
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && compare(a, b) == 0
    }
}

/// Key builders.
enum Keys {
    static func id(_ id: RecordID) -> [UInt8] {
        ShortBytes.make { $0.write(id: id) }
    }

    /// The log key prefix of every version of (origin, sequence); also the chains-table key.
    static func change(_ origin: ReplicaID, _ sequence: UInt64) -> [UInt8] {
        ShortBytes.make {
            $0.write(bigEndian: origin.rawValue)
            $0.write(bigEndian: sequence)
        }
    }

    /// The log key of one version of a change.
    static func change(_ origin: ReplicaID, _ sequence: UInt64, version: [UInt8]) -> [UInt8] {
        ShortBytes.make {
            $0.write(bigEndian: origin.rawValue)
            $0.write(bigEndian: sequence)
            $0.write(raw: version)
        }
    }

    /// The 8-byte version hash of a change's canonical bytes.
    static func version(_ encoded: [UInt8]) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(encoded)
        return hasher.finalizeWords().prefix(8)
    }

    static func origin(_ origin: ReplicaID) -> [UInt8] {
        ShortBytes.make { $0.write(bigEndian: origin.rawValue) }
    }

    static func register(_ entity: RecordID, _ field: Field) -> [UInt8] {
        ShortBytes.make {
            $0.write(id: entity)
            $0.write(field.rawValue)
        }
    }

    static func byTime(_ t: LedgerTransaction) -> [UInt8] {
        ShortBytes.make {
            $0.write(orderedSigned: t.createdAtMillis)
            $0.write(id: t.id)
        }
    }

    /// The prefix of every `byTime` key of one millisecond.
    static func byTimePrefix(_ millis: Int64) -> [UInt8] {
        ShortBytes.make { $0.write(orderedSigned: millis) }
    }

    static func byChild(_ t: LedgerTransaction) -> [UInt8] {
        ShortBytes.make {
            $0.write(id: t.childID)
            $0.write(orderedSigned: t.createdAtMillis)
            $0.write(id: t.id)
        }
    }

    static func deferred(_ t: LedgerTransaction) -> [UInt8] {
        ShortBytes.make {
            $0.write(id: t.childID)
            $0.write(id: t.id)
        }
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
    /// The household this replica belongs to: its id (16), then its owner key (32, absent for a
    /// household without membership), then its genesis's hash (32; `HouseholdPin`). Set once, at
    /// `init`, at `join` or at the first genuine genesis applied; only that genesis is ever applied.
    static let household: [UInt8] = Array("household".utf8)
    /// How many times this replica took a fresh id because changes of its own origin that it
    /// did not hold arrived (``Replica/rotationsMax`` at most).
    static let rotations: [UInt8] = Array("rotations".utf8)
    /// The product version (UTF-8) of the kidledger that created the store or last migrated it
    /// (from schema 4): named when a store is too new for the kidledger opening it.
    static let writer: [UInt8] = Array("writer".utf8)
}

/// Fixed-width integer helpers for values.
enum Bytes {
    /// The big-endian u64 at `offset` of `bytes` (which must hold 8 bytes there).
    static func u64(at offset: Int, _ bytes: [UInt8]) -> UInt64 {
        precondition(offset >= 0 && offset + 8 <= bytes.count, "a u64 beyond the bytes")
        return bytes.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
    }

    static func u64(_ v: UInt64) -> [UInt8] {
        ShortBytes.make { $0.write(bigEndian: v) }
    }

    static func u64(_ bytes: [UInt8]?) -> UInt64? {
        guard let bytes, bytes.count == 8 else { return nil }
        var r = ByteReader(bytes)
        return try? r.readBigEndianUInt64()
    }
}

import KidLedgerDomain

/// A register's stored winner: its stamp and value.
struct StoredRegister: Equatable {
    var stamp: Stamp
    var value: FieldValue

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 32)
        RecordCodec.encode(stamp, into: &w)
        RecordCodec.encode(value, into: &w)
        return w.bytes
    }

    static func decode(_ raw: [UInt8]) throws -> StoredRegister {
        var r = ByteReader(raw)
        do {
            let stamp = try RecordCodec.decodeStamp(&r)
            let value = try RecordCodec.decodeValue(&r)
            try r.expectEnd()
            return StoredRegister(stamp: stamp, value: value)
        } catch {
            throw LedgerError.corrupted("register: \(error)")
        }
    }

    /// The deterministic last-writer-wins order: stamp, then the value's canonical bytes.
    func wins(over other: StoredRegister) -> Bool {
        if stamp != other.stamp { return stamp > other.stamp }
        return KeyBytes.compare(RecordCodec.encode(value), RecordCodec.encode(other.value)) > 0
    }
}

/// A child's running totals over its applied transactions: recomputable, and checked by `verify`.
public struct Aggregate: Equatable, Sendable {
    /// How many transactions.
    public var count: UInt64 = 0
    /// Their sum in cents (wide: a merged sum can exceed Int64 even when each write was checked).
    public var sumCents: Int128 = 0
    /// XOR of the first 16 bytes of SHA-256 of each transaction id.
    public var idHash: [UInt8] {
        ShortBytes.make {
            $0.write(bigEndian: hashHigh)
            $0.write(bigEndian: hashLow)
        }
    }
    /// ``idHash`` as two big-endian words, held inline (no array per aggregate).
    var hashHigh: UInt64 = 0, hashLow: UInt64 = 0

    /// An empty aggregate.
    public init() {}

    mutating func add(_ t: LedgerTransaction) {
        count += 1
        sumCents += Int128(t.amountCents)
        mix(Self.idMix(t.id))
    }

    mutating func remove(_ t: LedgerTransaction) {
        count -= 1
        sumCents -= Int128(t.amountCents)
        mix(Self.idMix(t.id))
    }

    /// XOR is its own inverse: adding and removing an id mix alike.
    private mutating func mix(_ m: (high: UInt64, low: UInt64)) {
        hashHigh ^= m.high
        hashLow ^= m.low
    }

    /// The id's share of ``idHash``: the first 16 bytes of SHA-256 of the id, as two words.
    static func idMix(_ id: RecordID) -> (high: UInt64, low: UInt64) {
        var hasher = SHA256Hasher()
        var words = (id.high.bigEndian, id.low.bigEndian)
        withUnsafeBytes(of: &words) { hasher.update($0) }
        let h = hasher.finalizeWords()
        return (h.w0, h.w1)
    }

    func encoded() -> [UInt8] {
        ShortBytes.make {
            $0.write(varint: count)
            $0.write(bigEndian: UInt64(truncatingIfNeeded: sumCents >> 64))
            $0.write(bigEndian: UInt64(truncatingIfNeeded: sumCents))
            $0.write(bigEndian: hashHigh)
            $0.write(bigEndian: hashLow)
        }
    }

    static func decode(_ raw: [UInt8]) throws -> Aggregate {
        var r = ByteReader(raw)
        do {
            var a = Aggregate()
            a.count = try r.readVarint("count")
            let high = try r.readBigEndianUInt64("sum")
            let low = try r.readBigEndianUInt64("sum")
            a.sumCents = (Int128(Int64(bitPattern: high)) << 64) | Int128(low)
            a.hashHigh = try r.readBigEndianUInt64("id hash")
            a.hashLow = try r.readBigEndianUInt64("id hash")
            try r.expectEnd()
            return a
        } catch {
            throw LedgerError.corrupted("child totals: \(error)")
        }
    }

    static func load(_ child: RecordID, _ r: any KeyValueReader) throws -> Aggregate {
        guard let raw = try r.get(Tables.aggregates, Keys.id(child)) else { return Aggregate() }
        return try decode(raw)
    }
}

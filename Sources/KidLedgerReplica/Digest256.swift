import KidLedgerDomain

/// A 256-bit set hash: the sum, modulo 2^256, of the SHA-256 of every record's canonical bytes.
///
/// Adding and removing a record is O(1) and order-independent, so two replicas hold equal digests
/// exactly when they hold the same records (up to hash collisions), however the records arrived.
public struct Digest256: Hashable, Sendable, CustomStringConvertible {
    /// Four 64-bit limbs, most significant first.
    public private(set) var limbs: [UInt64]

    /// The digest of the empty set.
    public static let zero = Digest256(limbs: [0, 0, 0, 0])

    init(limbs: [UInt64]) { self.limbs = limbs }

    /// Reads 32 big-endian bytes.
    public init?(bytes: [UInt8]?) {
        guard let bytes, bytes.count == 32 else { return nil }
        var limbs = [UInt64](repeating: 0, count: 4)
        for i in 0..<32 { limbs[i / 8] = (limbs[i / 8] << 8) | UInt64(bytes[i]) }
        self.limbs = limbs
    }

    /// 32 big-endian bytes.
    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: 32)
        for l in limbs { w.write(bigEndian: l) }
        return w.bytes
    }

    /// 64 lowercase hex digits.
    public var description: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Adds the hash of `record`.
    public mutating func insert(_ record: [UInt8]) { add(Digest256(bytes: SHA256.hash(record))!, sign: 1) }

    /// Removes the hash of `record` (inverse of ``insert(_:)``).
    public mutating func remove(_ record: [UInt8]) { add(Digest256(bytes: SHA256.hash(record))!, sign: -1) }

    private mutating func add(_ other: Digest256, sign: Int) {
        var carry: UInt64 = 0
        for i in stride(from: 3, through: 0, by: -1) {
            if sign > 0 {
                let (s1, o1) = limbs[i].addingReportingOverflow(other.limbs[i])
                let (s2, o2) = s1.addingReportingOverflow(carry)
                limbs[i] = s2
                carry = (o1 ? 1 : 0) + (o2 ? 1 : 0)
            } else {
                let (d1, o1) = limbs[i].subtractingReportingOverflow(other.limbs[i])
                let (d2, o2) = d1.subtractingReportingOverflow(carry)
                limbs[i] = d2
                carry = (o1 ? 1 : 0) + (o2 ? 1 : 0)
            }
        }
    }
}

/// The canonical bytes that represent each merged record in the digest.
enum DigestRecord {
    static func household(_ h: Household) -> [UInt8] {
        var w = ByteWriter()
        w.write(UInt8(ascii: "H"))
        RecordCodec.encode(.createHousehold(h), into: &w)
        return w.bytes
    }

    static func child(_ c: ChildRecord) -> [UInt8] {
        var w = ByteWriter()
        w.write(UInt8(ascii: "C"))
        RecordCodec.encode(.createChild(c), into: &w)
        return w.bytes
    }

    static func register(key: [UInt8], stored: [UInt8]) -> [UInt8] {
        [UInt8(ascii: "R")] + key + stored
    }

    static func transaction(_ payload: [UInt8]) -> [UInt8] {
        [UInt8(ascii: "T")] + payload
    }
}

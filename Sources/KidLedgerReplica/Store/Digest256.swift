import KidLedgerDomain

/// A 256-bit set hash: the sum, modulo 2^256, of the SHA-256 of every record's canonical bytes.
///
/// Adding and removing a record is O(1) and order-independent, so two replicas hold equal digests
/// exactly when they hold the same records (up to hash collisions), however the records arrived.
public struct Digest256: Hashable, Sendable, CustomStringConvertible {
    /// Four 64-bit limbs, most significant first.
    public var limbs: [UInt64] { [l0, l1, l2, l3] }
    private var l0: UInt64, l1: UInt64, l2: UInt64, l3: UInt64

    /// The digest of the empty set.
    public static let zero = Digest256(0, 0, 0, 0)

    init(_ l0: UInt64, _ l1: UInt64, _ l2: UInt64, _ l3: UInt64) {
        (self.l0, self.l1, self.l2, self.l3) = (l0, l1, l2, l3)
    }

    /// Reads 32 big-endian bytes.
    public init?(bytes: [UInt8]?) {
        guard let bytes, bytes.count == 32 else { return nil }
        self = bytes.withUnsafeBytes { Self(raw: $0) }
    }

    /// Reads 32 big-endian bytes from `raw` (at least 32 long).
    init(raw: UnsafeRawBufferPointer) {
        func limb(_ i: Int) -> UInt64 { UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8 * i, as: UInt64.self)) }
        self.init(limb(0), limb(1), limb(2), limb(3))
    }

    /// 32 big-endian bytes.
    public var bytes: [UInt8] {
        ShortBytes.make {
            $0.write(bigEndian: l0)
            $0.write(bigEndian: l1)
            $0.write(bigEndian: l2)
            $0.write(bigEndian: l3)
        }
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
    public mutating func insert(_ record: [UInt8]) { add(Self.hash(record), sign: 1) }

    /// Removes the hash of `record` (inverse of ``insert(_:)``).
    public mutating func remove(_ record: [UInt8]) { add(Self.hash(record), sign: -1) }

    /// Adds the hash of the record `tag ‖ body` without building it (``insert(_:)`` of the
    /// concatenation).
    mutating func insert(tag: UInt8, _ body: [UInt8]) { insert(hashed: Self.hash(tag: tag, body)) }

    /// The inverse of ``insert(tag:_:)``.
    mutating func remove(tag: UInt8, _ body: [UInt8]) { add(Self.hash(tag: tag, body), sign: -1) }

    /// Adds a record hash computed beforehand by ``hash(tag:_:)`` or ``hash(_:)``.
    mutating func insert(hashed: Digest256) { add(hashed, sign: 1) }

    /// The inverse of ``insert(hashed:)``.
    mutating func remove(hashed: Digest256) { add(hashed, sign: -1) }

    /// The hash ``insert(tag:_:)`` adds.
    static func hash(tag: UInt8, _ body: [UInt8]) -> Digest256 {
        var hasher = SHA256Hasher()
        var t = tag
        withUnsafeBytes(of: &t) { hasher.update($0) }
        hasher.update(body)
        let h = hasher.finalizeWords()
        return Digest256(h.w0, h.w1, h.w2, h.w3)
    }

    /// The hash ``insert(_:)`` adds.
    static func hash(_ record: [UInt8]) -> Digest256 {
        var hasher = SHA256Hasher()
        hasher.update(record)
        let h = hasher.finalizeWords()
        return Digest256(h.w0, h.w1, h.w2, h.w3)
    }

    private mutating func add(_ other: Digest256, sign: Int) {
        if sign > 0 {
            var carry = false
            (l3, carry) = Self.add(l3, other.l3, carry)
            (l2, carry) = Self.add(l2, other.l2, carry)
            (l1, carry) = Self.add(l1, other.l1, carry)
            (l0, _) = Self.add(l0, other.l0, carry)
        } else {
            var borrow = false
            (l3, borrow) = Self.subtract(l3, other.l3, borrow)
            (l2, borrow) = Self.subtract(l2, other.l2, borrow)
            (l1, borrow) = Self.subtract(l1, other.l1, borrow)
            (l0, _) = Self.subtract(l0, other.l0, borrow)
        }
    }

    private static func add(_ a: UInt64, _ b: UInt64, _ carry: Bool) -> (UInt64, Bool) {
        let (s1, o1) = a.addingReportingOverflow(b)
        let (s2, o2) = s1.addingReportingOverflow(carry ? 1 : 0)
        return (s2, o1 || o2)
    }

    private static func subtract(_ a: UInt64, _ b: UInt64, _ borrow: Bool) -> (UInt64, Bool) {
        let (d1, o1) = a.subtractingReportingOverflow(b)
        let (d2, o2) = d1.subtractingReportingOverflow(borrow ? 1 : 0)
        return (d2, o1 || o2)
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

    /// The first byte of a transaction's digest record, `T ‖ payload`, hashed without building it
    /// (``Digest256/insert(tag:_:)``).
    static let transactionTag = UInt8(ascii: "T")
}

/// A 16-byte identifier (RFC 4122/9562 UUID layout), stored as two big-endian UInt64 halves.
///
/// Ordering is by (`high`, `low`), which is the same as comparing the 16 bytes lexicographically.
public struct RecordID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The first 8 bytes, big-endian.
    public var high: UInt64
    /// The last 8 bytes, big-endian.
    public var low: UInt64

    /// Creates an id from its two big-endian halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Creates an id from exactly 16 bytes (precondition), most significant first.
    public init(bytes: some Collection<UInt8>) {
        precondition(bytes.count == 16, "RecordID needs exactly 16 bytes, got \(bytes.count)")
        // Contiguous bytes (arrays and their slices, the usual case) are read as two words.
        if let id = bytes.withContiguousStorageIfAvailable({ buffer in
            let raw = UnsafeRawBufferPointer(buffer)
            return RecordID(high: UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)),
                            low: UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }) {
            self = id
            return
        }
        var high: UInt64 = 0, low: UInt64 = 0
        for (i, byte) in bytes.enumerated() {
            if i < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.init(high: high, low: low)
    }

    /// The 16 bytes, big-endian.
    public var bytes: [UInt8] {
        var words = (high.bigEndian, low.bigEndian)
        return withUnsafeBytes(of: &words) { Array($0) }
    }

    /// Lowercase canonical form "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
    public var description: String {
        String(unsafeUninitializedCapacity: 36) { writeHex(into: $0, dashed: true) }
    }

    /// Lowercase hex without dashes (32 characters); user-typed id prefixes are matched against it.
    public var hex: String {
        String(unsafeUninitializedCapacity: 32) { writeHex(into: $0, dashed: false) }
    }

    /// Parses the canonical 8-4-4-4-12 form (any case) or 32 hex digits without dashes; nil otherwise.
    public init?(string: String) {
        let utf8 = Array(string.utf8)
        var digits: [UInt8]
        switch utf8.count {
        case 32:
            digits = utf8
        case 36:
            digits = []
            digits.reserveCapacity(32)
            for (i, byte) in utf8.enumerated() {
                if i == 8 || i == 13 || i == 18 || i == 23 {
                    guard byte == UInt8(ascii: "-") else { return nil }
                } else {
                    digits.append(byte)
                }
            }
        default:
            return nil
        }
        var high: UInt64 = 0, low: UInt64 = 0
        for (i, byte) in digits.enumerated() {
            guard let nibble = Self.hexValue(byte) else { return nil }
            if i < 16 { high = high << 4 | UInt64(nibble) } else { low = low << 4 | UInt64(nibble) }
        }
        self.init(high: high, low: low)
    }

    /// A random version-4 id drawn from `generator` (no system randomness is used here).
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> RecordID {
        RecordID(high: generator.next(), low: generator.next()).withVersion(4)
    }

    /// A time-ordered version-7 id (RFC 9562 section 5.7): the 48-bit Unix milliseconds `millis`
    /// (clamped to 0 ..< 2^48), then 74 random bits from `generator`. Ids made later sort later, so
    /// a table keyed by them grows at its end (few B-tree pages touched per write transaction)
    /// instead of at random places.
    public static func timeOrdered<G: RandomNumberGenerator>(millis: Int64, using generator: inout G) -> RecordID {
        let ms = UInt64(min(max(millis, 0), (1 << 48) - 1))
        return RecordID(high: ms << 16 | (generator.next() & 0xFFFF), low: generator.next()).withVersion(7)
    }

    /// A version-5 (SHA-1, name-based) id per RFC 9562 section 5.5.
    public static func v5(namespace: RecordID, name: [UInt8]) -> RecordID {
        var hasher = SHA1Hasher()
        var words = (namespace.high.bigEndian, namespace.low.bigEndian)
        withUnsafeBytes(of: &words) { hasher.update($0) }
        hasher.update(name)
        return RecordID(bytes: hasher.finalize().prefix(16)).withVersion(5)
    }

    /// A version-5 id for the UTF-8 bytes of `name`.
    public static func v5(namespace: RecordID, name: String) -> RecordID {
        v5(namespace: namespace, name: Array(name.utf8))
    }

    /// The kidledger namespace for version-5 ids: 6b1d3c2e-5f2a-4c39-9a57-2f0f6c8e1d40.
    public static let namespaceKidLedger = RecordID(high: 0x6b1d_3c2e_5f2a_4c39, low: 0x9a57_2f0f_6c8e_1d40)

    /// The all-zero (nil) id.
    public static let zero = RecordID(high: 0, low: 0)

    /// Compares by (`high`, `low`), i.e. byte order.
    public static func < (lhs: RecordID, rhs: RecordID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }

    // MARK: - Private helpers

    /// Sets the version nibble (byte 6) and the RFC variant bits `10` (byte 8).
    private func withVersion(_ version: UInt64) -> RecordID {
        RecordID(
            high: (high & ~0xF000) | (version << 12),
            low: (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        )
    }

    /// Writes the 32 lowercase hex digits (with the four dashes of the canonical form when
    /// `dashed`) at the start of `out`, which must have room for them; returns how many bytes.
    @inline(__always)
    func writeHex(into out: UnsafeMutableBufferPointer<UInt8>, dashed: Bool) -> Int {
        var n = 0
        for i in 0..<32 {
            if dashed && (i == 8 || i == 12 || i == 16 || i == 20) {
                out[n] = UInt8(ascii: "-")
                n += 1
            }
            let word = i < 16 ? high : low
            let nibble = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (i % 16))) & 0xF
            out[n] = nibble < 10 ? 0x30 + nibble : 0x57 + nibble
            n += 1
        }
        return n
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

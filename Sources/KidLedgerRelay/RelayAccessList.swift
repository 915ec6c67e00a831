import KidLedgerDomain

/// A member's public key for one relay (docs/RELAY-DESIGN.md, "Member relay keys"): 32 bytes,
/// opaque to the relay, which files everything of that member under it.
public struct RelayMemberKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Length of a member relay key in bytes.
    public static let byteCount = 32

    /// The 32 public key bytes.
    public let bytes: [UInt8]

    /// Wraps exactly 32 bytes; nil otherwise.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// Unsigned byte order (the store's key order).
    public static func < (a: RelayMemberKey, b: RelayMemberKey) -> Bool {
        for i in 0..<byteCount where a.bytes[i] != b.bytes[i] { return a.bytes[i] < b.bytes[i] }
        return false
    }

    /// Lowercase hex.
    public var description: String { Hex.encode(bytes) }
}

/// The access list the owner hands the relay: which member relay keys it serves, each with a
/// quota in bytes, under a number that only grows (the newest list wins).
///
/// ```
/// version u8 = 1 | number u64 BE | count u32 BE (1...membersMax)
/// | per member, keys strictly ascending: member key 32 | quota bytes u64 BE (≤ quotaBytesMax)
/// ```
///
/// Checking the owner's signature of the list is the session layer's work; the store takes the
/// list it is handed.
public struct RelayAccessList: Equatable, Sendable {
    /// The encoding's version byte.
    public static let version: UInt8 = 1
    /// Most member keys on one list.
    public static let membersMax = 1_000
    /// The largest quota of one key: 1 TiB.
    public static let quotaBytesMax: UInt64 = 1 << 40

    /// The list's number (epoch or version): a list whose number is not above the held one is ignored.
    public let number: UInt64
    /// The quota in bytes of each member key served.
    public let quotas: [RelayMemberKey: UInt64]

    /// A list; throws ``RelayStoreError/invalidArgument(_:)`` for no members, more than
    /// ``membersMax`` or a quota above ``quotaBytesMax``.
    public init(number: UInt64, quotas: [RelayMemberKey: UInt64]) throws(RelayStoreError) {
        if let problem = Self.problem(quotas) { throw .invalidArgument(problem) }
        self.number = number
        self.quotas = quotas
    }

    private static func problem(_ quotas: [RelayMemberKey: UInt64]) -> String? {
        guard !quotas.isEmpty, quotas.count <= membersMax else { return "an access list names 1 to \(membersMax) keys, got \(quotas.count)" }
        guard quotas.values.allSatisfy({ $0 <= quotaBytesMax }) else { return "a quota is above \(quotaBytesMax) bytes" }
        return nil
    }

    /// The member keys in ascending order.
    public var members: [RelayMemberKey] { quotas.keys.sorted() }

    /// The canonical bytes.
    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 13 + quotas.count * 40)
        w.write(Self.version)
        w.write(bigEndian: number)
        w.write(bigEndian: UInt32(quotas.count))
        for key in members {
            w.write(raw: key.bytes)
            w.write(bigEndian: quotas[key]!)
        }
        return w.bytes
    }

    /// Decodes ``encoded``; throws ``DecodeError`` for anything else (short, trailing, out of
    /// range, keys not strictly ascending). Never traps.
    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> RelayAccessList {
        var r = ByteReader(bytes)
        guard try r.readByte("access list version") == version else { throw .invalid("access list version") }
        let number = try r.readBigEndianUInt64("access list number")
        let count = try r.readBigEndianUInt32("access list count")
        guard count >= 1, count <= membersMax else { throw .invalid("access list count \(count)") }
        guard r.remaining == Int(count) * 40 else { throw .invalid("access list length") }
        var quotas: [RelayMemberKey: UInt64] = [:]
        var previous: RelayMemberKey?
        for _ in 0..<count {
            // 32 bytes by construction.
            let key = RelayMemberKey(bytes: try r.readRaw(count: RelayMemberKey.byteCount, "member key"))!
            guard previous.map({ $0 < key }) ?? true else { throw .invalid("access list keys out of order") }
            let quota = try r.readBigEndianUInt64("quota")
            guard quota <= quotaBytesMax else { throw .invalid("quota \(quota)") }
            quotas[key] = quota
            previous = key
        }
        try r.expectEnd()
        // Checked above: 1...membersMax keys, quotas in range.
        return try! RelayAccessList(number: number, quotas: quotas)
    }
}

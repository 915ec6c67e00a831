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
/// quota in bytes, under a number that only grows (the newest list wins). A key is a member's or
/// a guest's (docs/RELAY-DESIGN.md, "Joining through the relay": the key a joiner derives from
/// its invitation, which may post only its join request to a mailbox).
///
/// ```
/// version u8 = 1 | number u64 BE | count u32 BE (1...membersMax)
/// | per member, keys strictly ascending: member key 32 | quota bytes u64 BE (≤ quotaBytesMax)
/// version u8 = 2 | number | count | per key: key 32 | quota u64 BE | kind u8 (0 member, 1 guest)
/// ```
///
/// A list with no guest is written as version 1 (the bytes of a list before guests existed);
/// one with a guest as version 2. Both decode.
///
/// Checking the owner's signature of the list is the session layer's work; the store takes the
/// list it is handed.
public struct RelayAccessList: Equatable, Sendable {
    /// The encoding's version byte of a list without guests.
    public static let version: UInt8 = 1
    /// The encoding's version byte of a list with guests.
    public static let guestVersion: UInt8 = 2
    /// Most member keys on one list.
    public static let membersMax = 1_000
    /// The largest quota of one key: 1 TiB.
    public static let quotaBytesMax: UInt64 = 1 << 40

    /// The list's number (epoch or version): a list whose number is not above the held one is ignored.
    public let number: UInt64
    /// The quota in bytes of each key served (members' and guests').
    public let quotas: [RelayMemberKey: UInt64]
    /// The keys of ``quotas`` that are guests' (a joiner's key before it is a member).
    public let guests: Set<RelayMemberKey>

    /// A list; throws ``RelayStoreError/invalidArgument(_:)`` for no members, more than
    /// ``membersMax`` or a quota above ``quotaBytesMax``. `guests` are keys of `quotas`.
    public init(number: UInt64, quotas: [RelayMemberKey: UInt64], guests: Set<RelayMemberKey> = []) throws(RelayStoreError) {
        if let problem = Self.problem(quotas) { throw .invalidArgument(problem) }
        guard guests.allSatisfy({ quotas[$0] != nil }) else { throw .invalidArgument("a guest key is not on the list") }
        self.number = number
        self.quotas = quotas
        self.guests = guests
    }

    /// Whether `key` is a guest's.
    public func isGuest(_ key: RelayMemberKey) -> Bool { guests.contains(key) }

    private static func problem(_ quotas: [RelayMemberKey: UInt64]) -> String? {
        guard !quotas.isEmpty, quotas.count <= membersMax else { return "an access list names 1 to \(membersMax) keys, got \(quotas.count)" }
        guard quotas.values.allSatisfy({ $0 <= quotaBytesMax }) else { return "a quota is above \(quotaBytesMax) bytes" }
        return nil
    }

    /// The member keys in ascending order.
    public var members: [RelayMemberKey] { quotas.keys.sorted() }

    /// The canonical bytes.
    public var encoded: [UInt8] {
        let kinds = !guests.isEmpty
        var w = ByteWriter(capacity: 13 + quotas.count * 41)
        w.write(kinds ? Self.guestVersion : Self.version)
        w.write(bigEndian: number)
        w.write(bigEndian: UInt32(quotas.count))
        for key in members {
            w.write(raw: key.bytes)
            w.write(bigEndian: quotas[key]!)
            if kinds { w.write(UInt8(guests.contains(key) ? 1 : 0)) }
        }
        return w.bytes
    }

    /// Decodes ``encoded``; throws ``DecodeError`` for anything else (short, trailing, out of
    /// range, keys not strictly ascending). Never traps.
    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> RelayAccessList {
        var r = ByteReader(bytes)
        let format = try r.readByte("access list version")
        guard format == version || format == guestVersion else { throw .invalid("access list version") }
        let kinds = format == guestVersion
        let number = try r.readBigEndianUInt64("access list number")
        let count = try r.readBigEndianUInt32("access list count")
        guard count >= 1, count <= membersMax else { throw .invalid("access list count \(count)") }
        guard r.remaining == Int(count) * (kinds ? 41 : 40) else { throw .invalid("access list length") }
        var quotas: [RelayMemberKey: UInt64] = [:]
        var guests: Set<RelayMemberKey> = []
        var previous: RelayMemberKey?
        for _ in 0..<count {
            // 32 bytes by construction.
            let key = RelayMemberKey(bytes: try r.readRaw(count: RelayMemberKey.byteCount, "member key"))!
            guard previous.map({ $0 < key }) ?? true else { throw .invalid("access list keys out of order") }
            let quota = try r.readBigEndianUInt64("quota")
            guard quota <= quotaBytesMax else { throw .invalid("quota \(quota)") }
            quotas[key] = quota
            if kinds {
                switch try r.readByte("key kind") {
                case 0: break
                case 1: guests.insert(key)
                case let kind: throw .invalid("key kind \(kind)")
                }
            }
            previous = key
        }
        try r.expectEnd()
        // A version 2 list names a guest: one without has one encoding only (version 1).
        guard !kinds || !guests.isEmpty else { throw .invalid("a version 2 access list without a guest") }
        // Checked above: 1...membersMax keys, quotas in range, guests listed.
        return try! RelayAccessList(number: number, quotas: quotas, guests: guests)
    }
}

import KidLedgerDomain

/// A one-time, expiring invitation to join a household: what the joiner needs to reach the
/// household (addresses, household id) and a secret the inviter checks once.
///
/// Text form: `KL1-` followed by base64url (no padding) of: version u8 (3), household id (16),
/// owner key (32), genesis hash (32), secret (16), expiry millis zigzag, address count varint
/// (1...8), addresses as strings, and in version 3 only: relay count varint (1: a code without a
/// relay is written as version 2, so each code has one encoding), then relay key 32 | stream
/// key 32 | owner relay key 32 | address count varint (1...4) | addresses. The owner key lets the
/// joiner authenticate the inviting device; the genesis hash pins the one creation record the
/// joiner applies (any other, even one the owner key signed, is forged); the relay is where the
/// joiner asks when the addresses do not answer (docs/RELAY-DESIGN.md, "Joining through the
/// relay"). Version 2 (no relay part) still parses; version 1 (no genesis hash) is refused:
/// ``isOlderVersion(_:)``.
public struct InviteCode: Equatable, Sendable {
    /// A relay the household granted, as an invitation names it.
    public struct Relay: Equatable, Sendable {
        /// The relay's device key (the joiner pins it).
        public var key: [UInt8]
        /// The household's stream key for that relay.
        public var streamKey: [UInt8]
        /// The key the owner's laptop uses with that relay (whose mailbox takes the request).
        public var ownerRelayKey: [UInt8]
        /// Where the relay listens (1...4).
        public var addresses: [String]

        /// A relay part.
        public init(key: [UInt8], streamKey: [UInt8], ownerRelayKey: [UInt8], addresses: [String]) {
            self.key = key
            self.streamKey = streamKey
            self.ownerRelayKey = ownerRelayKey
            self.addresses = addresses
        }
    }

    /// The household to join.
    public var household: RecordID
    /// The household owner's account key (32 bytes): the inviting device must prove it.
    public var owner: [UInt8]
    /// ``Membership/genesisHash(_:)`` of the household's genesis (32 bytes): the joiner pins it.
    public var genesis: [UInt8]
    /// The one-time secret.
    public var secret: [UInt8]
    /// When the invitation expires, Unix milliseconds.
    public var expiresAtMillis: Int64
    /// Where the inviter's daemon listens ("host:port").
    public var addresses: [String]
    /// The relay to ask through when no address answers (nil: none granted).
    public var relay: Relay?

    /// Most addresses in one code.
    public static let addressesMax = 8
    /// Most addresses of the relay part.
    public static let relayAddressesMax = 4

    /// Creates a code.
    public init(household: RecordID, owner: [UInt8], genesis: [UInt8], secret: [UInt8], expiresAtMillis: Int64, addresses: [String],
                relay: Relay? = nil) {
        self.household = household
        self.owner = owner
        self.genesis = genesis
        self.secret = secret
        self.expiresAtMillis = expiresAtMillis
        self.addresses = addresses
        self.relay = relay
    }

    /// The text to hand to the other device.
    public var text: String {
        var w = ByteWriter(capacity: 64)
        // Without a relay, the version 2 bytes (one encoding per code: version 3 always names one).
        w.write(relay == nil ? 2 : Self.version)
        w.write(id: household)
        w.write(raw: owner)
        w.write(raw: genesis)
        w.write(raw: secret)
        w.write(zigzag: expiresAtMillis)
        w.write(varint: UInt64(addresses.count))
        for a in addresses { w.write(string: a) }
        if let relay {
            w.write(varint: 1)
            w.write(raw: relay.key)
            w.write(raw: relay.streamKey)
            w.write(raw: relay.ownerRelayKey)
            w.write(varint: UInt64(relay.addresses.count))
            for a in relay.addresses { w.write(string: a) }
        }
        return "KL1-" + Base64URL.encode(w.bytes)
    }

    /// Parses a code; nil for anything that is not a well-formed kidledger invitation.
    public init?(text raw: String) {
        guard let bytes = Base64URL.decode(code: raw, prefix: "KL1-") else { return nil }
        var r = ByteReader(bytes)
        guard let version = try? r.readByte(), version == Self.version || version == 2,
              let household = try? r.readID(),
              let owner = try? r.readRaw(count: 32),
              let genesis = try? r.readRaw(count: Membership.genesisHashBytes),
              let secret = try? r.readRaw(count: 16),
              let expiry = try? r.readZigzag(),
              let count = try? r.readVarint(), count >= 1, count <= UInt64(Self.addressesMax) else { return nil }
        guard let addresses = Self.addresses(&r, count: count) else { return nil }
        var relay: Relay?
        if version == Self.version {
            // Canonical: a code without a relay is version 2.
            guard let relays = try? r.readVarint(), relays == 1,
                  let key = try? r.readRaw(count: 32), let streamKey = try? r.readRaw(count: 32),
                  let ownerRelayKey = try? r.readRaw(count: 32),
                  let n = try? r.readVarint(), n >= 1, n <= UInt64(Self.relayAddressesMax),
                  let at = Self.addresses(&r, count: n) else { return nil }
            relay = Relay(key: key, streamKey: streamKey, ownerRelayKey: ownerRelayKey, addresses: at)
        }
        guard r.isAtEnd else { return nil }
        self.init(household: household, owner: owner, genesis: genesis, secret: secret, expiresAtMillis: expiry, addresses: addresses, relay: relay)
    }

    private static func addresses(_ r: inout ByteReader, count: UInt64) -> [String]? {
        var addresses: [String] = []
        for _ in 0..<count {
            guard let a = try? r.readString(maxBytes: 300), !a.isEmpty else { return nil }
            addresses.append(a)
        }
        return addresses
    }

    /// The format version this code writes (3); it reads 2 and 3.
    public static let version: UInt8 = 3

    /// Whether `raw` is a well-encoded invitation of an older format (version 1, without the
    /// genesis hash): `join` says to ask for a new one instead of "not an invitation".
    public static func isOlderVersion(_ raw: String) -> Bool {
        Base64URL.decode(code: raw, prefix: "KL1-")?.first == 1
    }
}

/// RFC 4648 base64url without padding.
public enum Base64URL {
    /// The bytes of a code typed or pasted as `prefix` + base64url (`KL1-…`, `KLR1-…`): white
    /// space anywhere is ignored; nil without the prefix, past 2,000 characters or not base64url.
    public static func decode(code raw: String, prefix: String) -> [UInt8]? {
        let text = Substring(raw.filter { !$0.isWhitespace })
        guard text.hasPrefix(prefix) else { return nil }
        let body = text.dropFirst(prefix.count)
        guard body.count <= 2_000 else { return nil }
        return decode(String(body))
    }

    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes bytes.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i < bytes.count {
            let b0 = UInt32(bytes[i]), b1 = i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0, b2 = i + 2 < bytes.count ? UInt32(bytes[i + 2]) : 0
            let n = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            if i + 1 < bytes.count { out.append(alphabet[Int(n >> 6 & 63)]) }
            if i + 2 < bytes.count { out.append(alphabet[Int(n & 63)]) }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes text; nil on any character outside the alphabet or an impossible length.
    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt32] = []
        for c in text.utf8 {
            guard let v = alphabet.firstIndex(of: c) else { return nil }
            values.append(UInt32(v))
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            var n: UInt32 = 0
            for (k, v) in chunk.enumerated() { n |= v << (18 - 6 * UInt32(k)) }
            out.append(UInt8(n >> 16 & 255))
            if chunk.count > 2 { out.append(UInt8(n >> 8 & 255)) }
            if chunk.count > 3 { out.append(UInt8(n & 255)) }
            i += 4
        }
        guard encode(out) == text else { return nil }  // canonical only
        return out
    }
}

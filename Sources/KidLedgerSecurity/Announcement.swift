import CSodium
import KidLedgerDomain

/// The key a household's daemons seal their LAN announcements with (issue 22, point 1).
///
/// It is derived from the owner's signature over the household's genesis
/// (``Household/signature``): every member holds it (the genesis is the first change every
/// replica receives), nobody else does (the genesis never crosses the wire in clear, and the
/// invitation code carries only the household id and the owner's key, from which the signature
/// cannot be computed). A revoked member keeps it: it can still recognise the household's
/// announcements, which tell it no more than it knew (which member keys are on this network).
public struct DiscoveryKey: Equatable, Sendable {
    /// The 32 key bytes.
    public let bytes: [UInt8]

    /// The household's key, or nil for a household without an owner (no signed genesis: no
    /// discovery, peers are typed).
    public init?(household: Household) {
        guard household.signature.count == 64 else { return nil }
        _ = Sodium.ready
        var message = Array("kidledger discovery key v1".utf8)
        message.append(0)
        message += household.id.bytes
        bytes = Sodium.genericHash(message, key: household.signature, outputCount: 32)
    }

    /// A key from raw bytes (tests).
    public init(bytes: [UInt8]) {
        precondition(bytes.count == 32, "a discovery key is 32 bytes")
        self.bytes = bytes
    }
}

/// One LAN announcement: "the daemon of member `member` listens on TCP `port` of the address
/// this packet came from", sealed so only the household's members can read it.
///
/// Packet (``packetBytes`` = 86 bytes, one UDP datagram):
///
/// ```
/// magic "KLd1" 4 | nonce 24 | XChaCha20-Poly1305 ciphertext of (member Ed25519 key 32 | TCP port u16
///                           | sent at, Unix millis i64, big-endian) 42 | tag 16
/// ```
///
/// The associated data is the magic. The nonce is fresh per packet (injected randomness), so two
/// packets of one daemon share no byte but the magic: an observer who is not a member learns that a
/// kidledger daemon is on the network, and nothing that links its packets to each other, to a
/// household or to a device across time.
public struct Announcement: Equatable, Sendable {
    /// The announcing device's member key (32 bytes).
    public var member: [UInt8]
    /// The TCP port its daemon accepts peers on.
    public var port: UInt16
    /// When it was sent, by the sender's clock (Unix milliseconds).
    public var sentAtMillis: Int64

    /// The first bytes of every announcement.
    public static let magic: [UInt8] = Array("KLd1".utf8)
    /// Bytes of injected randomness one packet needs (its nonce).
    public static let nonceBytes = 24
    static let plaintextBytes = 32 + 2 + 8
    static let tagBytes = 16
    /// The size of every announcement packet.
    public static let packetBytes = 4 + nonceBytes + plaintextBytes + tagBytes

    /// Creates an announcement.
    public init(member: [UInt8], port: UInt16, sentAtMillis: Int64) {
        self.member = member
        self.port = port
        self.sentAtMillis = sentAtMillis
    }

    /// The packet, sealed under `key` with `nonce` (``nonceBytes`` of fresh randomness).
    public func sealed(key: DiscoveryKey, nonce: [UInt8]) -> [UInt8] {
        precondition(nonce.count == Self.nonceBytes && member.count == 32, "an announcement needs a 24-byte nonce and a 32-byte key")
        _ = Sodium.ready
        var plain = ByteWriter(capacity: Self.plaintextBytes)
        plain.write(raw: member)
        plain.write(raw: [UInt8(port >> 8), UInt8(port & 0xFF)])
        plain.write(bigEndian: UInt64(bitPattern: sentAtMillis))
        var cipher = [UInt8](repeating: 0, count: Self.plaintextBytes + Self.tagBytes)
        var cipherLength: UInt64 = 0
        let rc = crypto_aead_xchacha20poly1305_ietf_encrypt(&cipher, &cipherLength, plain.bytes, UInt64(Self.plaintextBytes),
                                                             Self.magic, UInt64(Self.magic.count), nil, nonce, key.bytes)
        precondition(rc == 0, "XChaCha20-Poly1305 encryption failed with valid sizes")
        return Self.magic + nonce + cipher
    }

    /// The announcement in `packet` if it is one sealed under `key`; nil for anything else (another
    /// household's, a stranger's, a damaged or truncated packet).
    public static func open(_ packet: [UInt8], key: DiscoveryKey) -> Announcement? {
        guard packet.count == packetBytes, Array(packet[0..<4]) == magic else { return nil }
        _ = Sodium.ready
        let nonce = Array(packet[4..<(4 + nonceBytes)])
        let cipher = Array(packet[(4 + nonceBytes)...])
        var plain = [UInt8](repeating: 0, count: plaintextBytes)
        var plainLength: UInt64 = 0
        let rc = crypto_aead_xchacha20poly1305_ietf_decrypt(&plain, &plainLength, nil, cipher, UInt64(cipher.count),
                                                             magic, UInt64(magic.count), nonce, key.bytes)
        // Authenticated and of the exact size: the fields are at fixed offsets.
        guard rc == 0, plainLength == UInt64(plaintextBytes) else { return nil }
        let port = UInt16(plain[32]) << 8 | UInt16(plain[33])
        guard port != 0 else { return nil }
        let sent = plain[34..<42].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Announcement(member: Array(plain[0..<32]), port: port, sentAtMillis: Int64(bitPattern: sent))
    }
}

/// The LAN announcement of an open short code (issue 22, point 4): "the daemon that holds the
/// short invitation in `slot` whose locator is `locator` listens on TCP `port` of the address this
/// packet came from". A `join` with a short code dials only daemons whose announcement matches
/// its code, so it never spends a try of another family's invitation.
///
/// Packet (``packetBytes`` = 9 bytes, sent every second while a short code is open):
///
/// ```
/// magic "KLi1" 4 | slot u8 | locator 2 | TCP port u16 big-endian
/// locator = the first 2 bytes of BLAKE2b-256(key: the code's password, "kidledger invitation locator v1")
/// ```
///
/// It reveals that a kidledger invitation is open, its slot, and 16 bits about its secret: an
/// eavesdropper narrows the 2⁴⁶ secrets to about 2³⁰, each still to be tried online against
/// the daemon, which allows five tries per code (docs/SECURITY.md). Nothing in it
/// names the household or a device.
public struct InvitationAnnouncement: Equatable, Sendable {
    public var slot: UInt8
    public var locator: [UInt8]
    public var port: UInt16

    public static let magic: [UInt8] = Array("KLi1".utf8)
    public static let packetBytes = 4 + 1 + 2 + 2

    /// The announcement of the short code with `password` in `slot`, served on `port`.
    public init(slot: UInt8, password: [UInt8], port: UInt16) {
        self.init(slot: slot, locator: Self.locator(password: password), port: port)
    }

    init(slot: UInt8, locator: [UInt8], port: UInt16) {
        self.slot = slot
        self.locator = locator
        self.port = port
    }

    /// The two locator bytes of a code's password.
    public static func locator(password: [UInt8]) -> [UInt8] {
        _ = Sodium.ready
        return Array(Sodium.genericHash(Array("kidledger invitation locator v1".utf8), key: password, outputCount: 32).prefix(2))
    }

    /// The packet.
    public var packet: [UInt8] { Self.magic + [slot] + locator + [UInt8(port >> 8), UInt8(port & 0xFF)] }

    /// The announcement in `packet`, or nil for anything else.
    public static func parse(_ packet: [UInt8]) -> InvitationAnnouncement? {
        guard packet.count == packetBytes, Array(packet[0..<4]) == magic, Int(packet[4]) < ShortCode.slots else { return nil }
        let port = UInt16(packet[7]) << 8 | UInt16(packet[8])
        guard port != 0 else { return nil }
        return InvitationAnnouncement(slot: packet[4], locator: Array(packet[5..<7]), port: port)
    }

    /// Whether this announces the invitation `code` is for.
    public func matches(_ code: ShortCode) -> Bool {
        slot == code.slot && locator == Self.locator(password: code.password)
    }
}

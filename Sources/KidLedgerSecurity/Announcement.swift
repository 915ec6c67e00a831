import CSodium
import KidLedgerDomain

/// The two keys one member's daemon shares with another member's for LAN announcements (issue 22,
/// point 1): `send` seals this device's announcement box for `member`, `receive` opens the box
/// `member`'s daemon sealed for this device.
///
/// They come from X25519 of the two members' identity keys (each Ed25519 key converted to its
/// Curve25519 form, `crypto_sign_ed25519_sk_to_curve25519` / `crypto_sign_ed25519_pk_to_curve25519`,
/// then `crypto_scalarmult`), through keyed BLAKE2b-256 with a domain label, the household id and
/// both keys in the direction of travel:
///
/// ```
/// K(a→b) = BLAKE2b-256(key: X25519(a, b), "kidledger announcement key v2" 0 | household id 16 | key a 32 | key b 32)
/// ```
///
/// No group key is distributed, and none survives a revocation: a member's daemon seals a box only
/// for the members its ledger lists as current, so from the moment it knows of a revocation the
/// revoked key gets nothing to open. Directional, so a box reflected back to its sealer does not
/// open there as the other member's.
public struct AnnouncementKeys: Equatable, Sendable {
    /// The other member's key (32 bytes).
    public let member: [UInt8]
    /// K(this device → member).
    public let send: [UInt8]
    /// K(member → this device).
    public let receive: [UInt8]

    /// The keys `identity` shares with `member` in `household`; nil when `member` is not a valid
    /// Ed25519 key (no Curve25519 form, or a degenerate shared secret) or is `identity`'s own.
    public init?(identity: Identity, member: [UInt8], household: RecordID) {
        guard member.count == 32, member != identity.publicKey.bytes, let shared = identity.sharedSecret(with: member) else { return nil }
        self.member = member
        send = Self.derive(shared, household: household, from: identity.publicKey.bytes, to: member)
        receive = Self.derive(shared, household: household, from: member, to: identity.publicKey.bytes)
    }

    /// Keys from raw bytes (tests and the fuzzer).
    package init(member: [UInt8], send: [UInt8], receive: [UInt8]) {
        self.member = member
        self.send = send
        self.receive = receive
    }

    static func derive(_ shared: [UInt8], household: RecordID, from a: [UInt8], to b: [UInt8]) -> [UInt8] {
        var message = Array("kidledger announcement key v2".utf8)
        message.append(0)
        message += household.bytes + a + b
        return Sodium.genericHash(message, key: shared, outputCount: 32)
    }
}

/// One LAN announcement: "the daemon of member `member` listens on TCP `port` of the address
/// this packet came from", sealed separately for each other current member of the household.
///
/// Packet (``packetBytes`` = 572 bytes, one UDP datagram, whatever the household's size):
///
/// ```
/// magic "KLd2" 4 | nonce 24 | 16 slots of 34 bytes, in random order:
///   a box for one recipient: hint 8 | XChaCha20-Poly1305 of (TCP port u16 | sent at, Unix millis i64,
///                                     big-endian) 10 | tag 16
///   or 34 random bytes (an unused slot)
/// hint = the first 8 bytes of BLAKE2b-128(key: K(sender→recipient), nonce)
/// ```
///
/// The box is sealed under ``AnnouncementKeys/send`` with the packet's nonce (fresh per packet,
/// injected randomness) and the magic as associated data. A receiver computes, for each current
/// member, the hint that member's box for it would carry and opens the one slot that matches
/// (one hash per member and one decryption per packet; no index in clear). Every packet has
/// ``recipientsMax`` slots: its size says nothing about the household's; a household with more
/// than ``recipientsMax`` other members gets boxes for that many of them (the caller picks which).
/// Anyone but a recipient sees the magic and 568 bytes that change entirely from packet to packet.
public struct Announcement: Equatable, Sendable {
    /// The announcing device's member key (32 bytes): the member whose keys opened it.
    public var member: [UInt8]
    /// The TCP port its daemon accepts peers on.
    public var port: UInt16
    /// When it was sent, by the sender's clock (Unix milliseconds).
    public var sentAtMillis: Int64

    /// The first bytes of every announcement.
    public static let magic: [UInt8] = Array("KLd2".utf8)
    /// The packet's nonce.
    public static let nonceBytes = 24
    /// The most recipients one packet has a box for (the slots of every packet).
    public static let recipientsMax = 16
    static let hintBytes = 8
    static let plaintextBytes = 2 + 8
    static let tagBytes = 16
    /// The size of one slot.
    public static let boxBytes = hintBytes + plaintextBytes + tagBytes
    /// The size of every announcement packet.
    public static let packetBytes = 4 + nonceBytes + recipientsMax * boxBytes
    /// Bytes of injected randomness one packet needs: its nonce, the filling of every slot, and
    /// two bytes per slot to shuffle the boxes.
    public static let randomBytes = nonceBytes + recipientsMax * boxBytes + 2 * recipientsMax

    /// Creates an announcement.
    public init(member: [UInt8], port: UInt16, sentAtMillis: Int64) {
        self.member = member
        self.port = port
        self.sentAtMillis = sentAtMillis
    }

    /// The packet, with a box for each of `recipients` (at most ``recipientsMax``; the caller picks)
    /// in random slots, the other slots random bytes. `random` is ``randomBytes`` of fresh randomness.
    public func sealed(to recipients: [AnnouncementKeys], random: [UInt8]) -> [UInt8] {
        precondition(random.count == Self.randomBytes && recipients.count <= Self.recipientsMax,
                     "an announcement needs \(Self.randomBytes) random bytes and at most \(Self.recipientsMax) recipients")
        let nonce = Array(random[0..<Self.nonceBytes])
        var slots = (0..<Self.recipientsMax).map { i in
            Array(random[(Self.nonceBytes + i * Self.boxBytes)..<(Self.nonceBytes + (i + 1) * Self.boxBytes)])
        }
        // Fisher-Yates over the slot positions: which slot holds which box says nothing.
        var order = Array(0..<Self.recipientsMax)
        let shuffle = Self.nonceBytes + Self.recipientsMax * Self.boxBytes
        for i in stride(from: order.count - 1, to: 0, by: -1) {
            let r = Int(random[shuffle + 2 * i]) << 8 | Int(random[shuffle + 2 * i + 1])
            order.swapAt(i, r % (i + 1))
        }
        for (recipient, slot) in zip(recipients, order) { slots[slot] = box(key: recipient.send, nonce: nonce) }
        return Self.magic + nonce + slots.flatMap { $0 }
    }

    /// One slot: this announcement's box sealed under `key` with `nonce`.
    package func box(key: [UInt8], nonce: [UInt8]) -> [UInt8] {
        precondition(nonce.count == Self.nonceBytes && key.count == 32, "a box needs a 24-byte nonce and a 32-byte key")
        _ = Sodium.ready
        var plain = ByteWriter(capacity: Self.plaintextBytes)
        plain.write(raw: [UInt8(port >> 8), UInt8(port & 0xFF)])
        plain.write(bigEndian: UInt64(bitPattern: sentAtMillis))
        var cipher = [UInt8](repeating: 0, count: Self.plaintextBytes + Self.tagBytes)
        var cipherLength: UInt64 = 0
        let rc = crypto_aead_xchacha20poly1305_ietf_encrypt(&cipher, &cipherLength, plain.bytes, UInt64(Self.plaintextBytes),
                                                             Self.magic, UInt64(Self.magic.count), nil, nonce, key)
        precondition(rc == 0, "XChaCha20-Poly1305 encryption failed with valid sizes")
        return Self.hint(key: key, nonce: nonce) + cipher
    }

    static func hint(key: [UInt8], nonce: [UInt8]) -> [UInt8] {
        Array(Sodium.genericHash(nonce, key: key, outputCount: 16).prefix(hintBytes))
    }

    /// The announcement in `packet` if one of `candidates` (this device's keys with each current
    /// member) sealed a box in it for this device; nil for anything else (another household's, a
    /// revoked or former member's, a stranger's, a damaged or truncated packet).
    public static func open(_ packet: [UInt8], from candidates: [AnnouncementKeys]) -> Announcement? {
        guard packet.count == packetBytes, Array(packet[0..<4]) == magic else { return nil }
        _ = Sodium.ready
        let nonce = Array(packet[4..<(4 + nonceBytes)])
        let base = 4 + nonceBytes
        for candidate in candidates where candidate.receive.count == 32 {
            let hint = Self.hint(key: candidate.receive, nonce: nonce)
            for slot in 0..<recipientsMax {
                let start = base + slot * boxBytes
                guard Array(packet[start..<(start + hintBytes)]) == hint else { continue }
                let cipher = Array(packet[(start + hintBytes)..<(start + boxBytes)])
                var plain = [UInt8](repeating: 0, count: plaintextBytes)
                var plainLength: UInt64 = 0
                let rc = crypto_aead_xchacha20poly1305_ietf_decrypt(&plain, &plainLength, nil, cipher, UInt64(cipher.count),
                                                                     magic, UInt64(magic.count), nonce, candidate.receive)
                // Authenticated and of the exact size: the fields are at fixed offsets.
                guard rc == 0, plainLength == UInt64(plaintextBytes) else { continue }
                let port = UInt16(plain[0]) << 8 | UInt16(plain[1])
                guard port != 0 else { return nil }
                let sent = plain[2..<10].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                return Announcement(member: candidate.member, port: port, sentAtMillis: Int64(bitPattern: sent))
            }
        }
        return nil
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

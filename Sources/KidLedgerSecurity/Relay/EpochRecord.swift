import CSodium
import KidLedgerDomain

/// The epoch record of epoch `n` (docs/RELAY-DESIGN.md, "Formats"): the epoch key `K_n` sealed to
/// each current member, each box carrying the owner's signature of the key, and `K_{n-1}` sealed
/// under `K_n`.
///
/// A member opens its box (``openKey(as:owner:household:)``), which checks the owner's signature
/// before the key is returned, then walks back through the earlier records with
/// ``previousKey(with:)`` (``EpochKey/chain(through:)``): holding `K_n` opens every earlier epoch,
/// while a member without a box in epoch `n` (revoked before it) opens nothing sealed under `K_n`.
///
/// ```
/// version u8 = 1 | epoch varint (≤ 2^32 − 1) | member count varint (1...membersMax)
/// | per member, keys strictly ascending: Ed25519 key 32 | box 144
/// | previous 72, only when epoch > 0
/// box      = crypto_box_seal to the member's X25519 key (crypto_sign_ed25519_pk_to_curve25519)
///            of K_n 32 | signature 64
/// signature = the owner's Ed25519 signature of
///            "kidledger relay epoch key v1" 0 | household id 16 | epoch u32 BE | member key 32 | K_n 32
/// previous = nonce 24 | XChaCha20-Poly1305 under K_n of K_{n-1} 32 | tag 16,
///            additional data "kidledger relay previous key v1" 0 | epoch n u32 BE
/// ```
///
/// The box's ephemeral key and the nonce come from injected randomness (``SealedBox``), so the same
/// generator state gives the same record.
public struct EpochRecord: Equatable, Sendable {
    /// One member's sealed copy of the epoch key.
    public struct MemberBox: Equatable, Sendable {
        /// The member it is sealed to (its Ed25519 identity key).
        public let member: PublicKey
        /// The sealed box (``EpochRecord/boxBytes`` bytes).
        public let sealed: [UInt8]
    }

    /// The encoding's version byte.
    public static let version: UInt8 = 1
    /// Most members one record seals the key to (a family has two to ten; 1,000 boxes are 176 KB).
    public static let membersMax = 1_000
    /// Bytes of a box's message: the key and the owner's signature.
    static let boxMessageBytes = EpochKey.byteCount + Identity.signatureByteCount
    /// Bytes of one sealed box.
    public static let boxBytes = boxMessageBytes + SealedBox.overheadBytes
    /// Bytes of the sealed earlier key.
    public static let previousBytes = RelayAEAD.nonceBytes + EpochKey.byteCount + RelayAEAD.tagBytes

    /// The epoch.
    public let epoch: UInt32
    /// One box per member, by ascending member key.
    public let boxes: [MemberBox]
    /// `K_{n-1}` sealed under `K_n` (``previousBytes``); nil exactly for epoch 0.
    public let previous: [UInt8]?

    private init(epoch: UInt32, boxes: [MemberBox], previous: [UInt8]?) {
        self.epoch = epoch
        self.boxes = boxes
        self.previous = previous
    }

    /// The record of `key`'s epoch made by `owner` of `household` for `members` (the current
    /// members, the owner among them; any order), with `previous` (the key of the epoch before,
    /// nil exactly for epoch 0) sealed under `key`. Randomness comes from `random`.
    /// - Throws: ``RelaySealError/invalidArgument(_:)`` for no members, too many or a duplicate,
    ///   or a previous key of the wrong epoch; ``RelaySealError/badKey(_:)`` for a member key with
    ///   no X25519 form.
    public static func seal<R: RandomNumberGenerator>(
        key: EpochKey, previous: EpochKey?, members: [PublicKey], owner: Identity, household: RecordID,
        using random: inout R
    ) throws(RelaySealError) -> EpochRecord {
        guard !members.isEmpty, members.count <= membersMax else {
            throw .invalidArgument("an epoch record seals to 1 to \(membersMax) members, got \(members.count)")
        }
        let sorted = members.sorted()
        for i in sorted.indices.dropFirst() where sorted[i] == sorted[i - 1] {
            throw .invalidArgument("member \(sorted[i].fingerprint) is listed twice")
        }
        switch (key.epoch, previous) {
        case (0, nil): break
        case (0, .some): throw .invalidArgument("epoch 0 has no earlier key")
        case (_, nil): throw .invalidArgument("epoch \(key.epoch) needs the key of epoch \(key.epoch - 1)")
        case (let n, .some(let earlier)) where earlier.epoch != n - 1:
            throw .invalidArgument("epoch \(n) seals the key of epoch \(n - 1), got epoch \(earlier.epoch)'s")
        default: break
        }
        var boxes: [MemberBox] = []
        boxes.reserveCapacity(sorted.count)
        for member in sorted {
            guard let curve = Curve25519.publicKey(of: member) else {
                throw .badKey("member \(member.fingerprint) has no X25519 form")
            }
            let signature = owner.sign(signedMessage(household: household, epoch: key.epoch, member: member, key: key.bytes))
            let seed = RelayRandom.bytes(SealedBox.seedBytes, using: &random)
            guard let sealed = SealedBox.seal(key.bytes + signature, to: curve, seed: seed) else {
                throw .badKey("member \(member.fingerprint) has no X25519 form")
            }
            boxes.append(MemberBox(member: member, sealed: sealed))
        }
        let sealedPrevious = previous.map { earlier in
            RelayAEAD.seal(earlier.bytes, additional: previousAdditional(epoch: key.epoch), key: key.bytes,
                           nonce: RelayRandom.bytes(RelayAEAD.nonceBytes, using: &random))
        }
        return EpochRecord(epoch: key.epoch, boxes: boxes, previous: sealedPrevious)
    }

    /// The members the record seals the key to, ascending.
    public var members: [PublicKey] { boxes.map(\.member) }

    /// The sealed box for `member`, if the record has one (what the relay keeps in that member's mailbox).
    public func box(for member: PublicKey) -> [UInt8]? {
        boxes.first { $0.member == member }?.sealed
    }

    /// The epoch key in `identity`'s box, once the owner's signature on it is checked against
    /// `owner` for `household`.
    /// - Throws: ``RelaySealError/noBoxForMember`` when the record has no box for `identity`, and
    ///   what ``openBox(_:epoch:as:owner:household:)`` throws.
    public func openKey(as identity: Identity, owner: PublicKey, household: RecordID) throws(RelaySealError) -> EpochKey {
        guard let sealed = box(for: identity.publicKey) else { throw .noBoxForMember }
        return try Self.openBox(sealed, epoch: epoch, as: identity, owner: owner, household: household)
    }

    /// The epoch key in one box (from the record, or from the relay's mailbox) sealed to `identity`
    /// for `epoch`, returned only once its signature verifies with `owner`'s key for `household`,
    /// `epoch` and `identity`.
    /// - Throws: ``RelaySealError/malformed(_:)`` for a box of the wrong size,
    ///   ``RelaySealError/boxDidNotOpen`` when it does not open with `identity`'s key,
    ///   ``RelaySealError/notSignedByOwner`` when the signature does not verify.
    public static func openBox(_ sealed: [UInt8], epoch: UInt32, as identity: Identity, owner: PublicKey,
                               household: RecordID) throws(RelaySealError) -> EpochKey {
        guard sealed.count == boxBytes else { throw .malformed("an epoch key box is \(boxBytes) bytes, got \(sealed.count)") }
        guard let curvePublic = Curve25519.publicKey(of: identity.publicKey) else { throw .badKey("own key has no X25519 form") }
        var curveSecret = Curve25519.secretKey(of: identity)
        defer { sodium_memzero(&curveSecret, curveSecret.count) }
        guard let message = SealedBox.open(sealed, publicKey: curvePublic, secretKey: curveSecret),
              message.count == boxMessageBytes else { throw .boxDidNotOpen }
        let key = Array(message[0..<EpochKey.byteCount])
        let signature = Array(message[EpochKey.byteCount...])
        let signed = signedMessage(household: household, epoch: epoch, member: identity.publicKey, key: key)
        guard Identity.verify(signature: signature, message: signed, key: owner) else { throw .notSignedByOwner }
        // 32 bytes by construction.
        return try EpochKey(epoch: epoch, bytes: key)
    }

    /// The key of the epoch before, opened with `key` (this record's epoch key).
    /// - Throws: ``RelaySealError/wrongEpoch(expected:got:)`` for a key of another epoch,
    ///   ``RelaySealError/noPreviousKey`` for epoch 0, ``RelaySealError/previousKeyDidNotOpen``
    ///   when it fails authentication.
    public func previousKey(with key: EpochKey) throws(RelaySealError) -> EpochKey {
        guard key.epoch == epoch else { throw .wrongEpoch(expected: epoch, got: key.epoch) }
        guard let previous else { throw .noPreviousKey }
        guard let bytes = RelayAEAD.open(previous, additional: Self.previousAdditional(epoch: epoch), key: key.bytes),
              bytes.count == EpochKey.byteCount else { throw .previousKeyDidNotOpen }
        return try EpochKey(epoch: epoch - 1, bytes: bytes)
    }

    /// What the owner signs in each box.
    static func signedMessage(household: RecordID, epoch: UInt32, member: PublicKey, key: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: 120)
        w.write(raw: "kidledger relay epoch key v1".utf8)
        w.write(0)
        w.write(id: household)
        w.write(bigEndian: epoch)
        w.write(raw: member.bytes)
        w.write(raw: key)
        return w.bytes
    }

    /// The additional data of the sealed earlier key.
    static func previousAdditional(epoch: UInt32) -> [UInt8] {
        var w = ByteWriter(capacity: 40)
        w.write(raw: "kidledger relay previous key v1".utf8)
        w.write(0)
        w.write(bigEndian: epoch)
        return w.bytes
    }

    // MARK: Encoding

    /// The canonical bytes (see the type's documentation).
    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 8 + boxes.count * (PublicKey.byteCount + Self.boxBytes) + Self.previousBytes)
        w.write(Self.version)
        w.write(varint: UInt64(epoch))
        w.write(varint: UInt64(boxes.count))
        for box in boxes {
            w.write(raw: box.member.bytes)
            w.write(raw: box.sealed)
        }
        if let previous { w.write(raw: previous) }
        return w.bytes
    }

    /// Decodes exactly one record from `bytes`, refusing anything not canonical: another version,
    /// an epoch above 2^32 − 1, 0 or more than ``membersMax`` members, keys not strictly ascending,
    /// a previous key present for epoch 0 or missing for a later one, short or trailing bytes.
    /// Nothing is opened: a decoded record may still hold boxes that do not open.
    public static func decode(_ bytes: [UInt8]) throws(RelaySealError) -> EpochRecord {
        do throws(DecodeError) {
            var r = ByteReader(bytes)
            guard try r.readByte("epoch record version") == version else { throw DecodeError.invalid("epoch record version") }
            let epoch = try r.readVarint("epoch")
            guard epoch <= UInt64(EpochKey.epochMax) else { throw DecodeError.invalid("epoch (above \(EpochKey.epochMax))") }
            let count = try r.readVarint("member count")
            guard count >= 1, count <= UInt64(membersMax) else { throw DecodeError.invalid("member count \(count) (1 to \(membersMax))") }
            var boxes: [MemberBox] = []
            for _ in 0..<Int(count) {
                // 32 bytes by construction.
                let member = PublicKey(bytes: try r.readRaw(count: PublicKey.byteCount, "member key"))!
                if let last = boxes.last, !(last.member < member) { throw DecodeError.invalid("member keys (not strictly ascending)") }
                boxes.append(MemberBox(member: member, sealed: try r.readRaw(count: boxBytes, "epoch key box")))
            }
            let previous = try epoch > 0 ? r.readRaw(count: previousBytes, "previous epoch key") : nil
            try r.expectEnd()
            return EpochRecord(epoch: UInt32(epoch), boxes: boxes, previous: previous)
        } catch {
            throw RelaySealError(error)
        }
    }
}

/// Ed25519 keys in their X25519 forms, for sealed boxes.
enum Curve25519 {
    /// The X25519 public key of an Ed25519 public key; nil when it has none (not on the curve, or
    /// of small order).
    static func publicKey(of key: PublicKey) -> [UInt8]? {
        _ = Sodium.ready
        var curve = [UInt8](repeating: 0, count: 32)
        guard crypto_sign_ed25519_pk_to_curve25519(&curve, key.bytes) == 0 else { return nil }
        return curve
    }

    /// The X25519 secret key of an identity (from its Ed25519 secret key, seed ‖ public key).
    static func secretKey(of identity: Identity) -> [UInt8] {
        _ = Sodium.ready
        var secret = identity.seed + identity.publicKey.bytes
        defer { sodium_memzero(&secret, secret.count) }
        var curve = [UInt8](repeating: 0, count: 32)
        let rc = crypto_sign_ed25519_sk_to_curve25519(&curve, secret)
        precondition(rc == 0, "crypto_sign_ed25519_sk_to_curve25519 failed with a valid key")
        return curve
    }
}

/// `crypto_aead_xchacha20poly1305_ietf` with the nonce in front of the ciphertext.
enum RelayAEAD {
    /// Bytes of a nonce.
    static let nonceBytes = 24
    /// Bytes of the authentication tag.
    static let tagBytes = 16

    /// `nonce ‖ ciphertext ‖ tag` of `message` under `key` (32 bytes) with `additional` authenticated too.
    static func seal(_ message: [UInt8], additional: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8] {
        _ = Sodium.ready
        precondition(key.count == 32 && nonce.count == nonceBytes, "XChaCha20-Poly1305 key or nonce size")
        var cipher = [UInt8](repeating: 0, count: message.count + tagBytes)
        var length: UInt64 = 0
        let rc = crypto_aead_xchacha20poly1305_ietf_encrypt(&cipher, &length, message, UInt64(message.count),
                                                             additional, UInt64(additional.count), nil, nonce, key)
        precondition(rc == 0 && length == UInt64(cipher.count), "XChaCha20-Poly1305 encryption failed with valid sizes")
        return nonce + cipher
    }

    /// The message of `sealed` (`nonce ‖ ciphertext ‖ tag`) if it authenticates under `key` with
    /// `additional`; nil otherwise (nothing of it is returned).
    static func open(_ sealed: [UInt8], additional: [UInt8], key: [UInt8]) -> [UInt8]? {
        _ = Sodium.ready
        guard key.count == 32, sealed.count >= nonceBytes + tagBytes else { return nil }
        let nonce = Array(sealed[0..<nonceBytes])
        let cipher = Array(sealed[nonceBytes...])
        var message = [UInt8](repeating: 0, count: cipher.count - tagBytes)
        var length: UInt64 = 0
        let rc = crypto_aead_xchacha20poly1305_ietf_decrypt(&message, &length, nil, cipher, UInt64(cipher.count),
                                                             additional, UInt64(additional.count), nonce, key)
        guard rc == 0, length == UInt64(message.count) else { return nil }
        return message
    }
}

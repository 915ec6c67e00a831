import CSodium
import KidLedgerDomain

/// The key pair a joiner uses with a relay before it is a member (docs/RELAY-DESIGN.md, "Joining
/// through the relay"): both the joiner and the inviting owner derive it from the invitation key
/// (`SecureChannel.invitationKey(secret:)`, which only the code and the owner's invites table
/// hold) and the relay key, so the owner can list it before anyone used the code.
///
/// The Ed25519 seed is BLAKE2b-256 (`crypto_generichash`) keyed with the 32-byte invitation key,
/// of `"kidledger relay guest v1" 0 | relay key 32` (as ``RelayMemberIdentity`` derives a member's).
public enum RelayGuestIdentity {
    /// The guest key pair of the invitation whose key is `invitationKey`, for the relay `relay`.
    /// - Throws: ``RelaySealError/badKey(_:)`` for a key that is not 32 bytes.
    public static func derive(invitationKey: [UInt8], relay: [UInt8]) throws(RelaySealError) -> Identity {
        guard invitationKey.count == 32 else { throw .badKey("an invitation key is 32 bytes, got \(invitationKey.count)") }
        return try RelayMemberIdentity.keyed(invitationKey, label: "kidledger relay guest v1", relay: relay)
    }
}

/// A joiner's request to be let in, left in the owner's mailbox on the relay
/// (docs/RELAY-DESIGN.md, "Joining through the relay").
///
/// ```
/// slot (the mailbox epoch) = 2^31 | (the guest key's first 4 bytes, big-endian) & 0x7fffffff
/// box (EpochRecord.boxBytes = 144) = crypto_box_seal to the owner's X25519 key of
///     joiner identity key 32 | signature 64
/// signature = the joiner's Ed25519 signature of
///     "kidledger relay join v1" 0 | household id 16 | guest key 32
/// ```
///
/// The household and the guest key are signed, not carried: the owner knows its household, and
/// the slot names the invitation whose guest key it tries.
public struct RelayJoinRequest: Equatable, Sendable {
    /// The lowest mailbox epoch of a join request; members' epochs stay below it.
    public static let slotMin: UInt32 = 1 << 31

    /// The key the joiner asks to be admitted with (its identity key).
    public let joiner: PublicKey

    /// The mailbox epoch of the request of `guest` (32 bytes; any other length gives ``slotMin``).
    public static func slot(of guest: [UInt8]) -> UInt32 {
        guard guest.count >= 4 else { return slotMin }
        let prefix = guest.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return slotMin | (prefix & 0x7fff_ffff)
    }

    /// The request box `joiner` leaves for `owner` of `household`, through the invitation whose guest key is `guest`.
    /// - Throws: ``RelaySealError/badKey(_:)`` when the owner key has no X25519 form.
    public static func seal<R: RandomNumberGenerator>(joiner: Identity, owner: PublicKey, household: RecordID, guest: PublicKey,
                                                      using random: inout R) throws(RelaySealError) -> [UInt8] {
        guard let curve = Curve25519.publicKey(of: owner) else { throw .badKey("the owner key has no X25519 form") }
        let signature = joiner.sign(signed(household: household, guest: guest))
        guard let box = SealedBox.seal(joiner.publicKey.bytes + signature, to: curve, seed: RelayRandom.bytes(SealedBox.seedBytes, using: &random)) else {
            throw .badKey("the owner key has no X25519 form")
        }
        return box
    }

    /// Opens `box` as `owner` and checks the joiner's signature for `household` and the invitation's `guest` key.
    /// - Throws: ``RelaySealError/malformed(_:)`` for a box of the wrong size, ``RelaySealError/boxDidNotOpen``,
    ///   ``RelaySealError/badKey(_:)`` for a joiner key that is no key, ``RelaySealError/notSignedByJoiner``.
    public static func open(_ box: [UInt8], as owner: Identity, household: RecordID, guest: PublicKey) throws(RelaySealError) -> RelayJoinRequest {
        guard box.count == EpochRecord.boxBytes else { throw .malformed("a join request is \(EpochRecord.boxBytes) bytes, got \(box.count)") }
        guard let curvePublic = Curve25519.publicKey(of: owner.publicKey) else { throw .badKey("own key has no X25519 form") }
        var curveSecret = Curve25519.secretKey(of: owner)
        defer { sodium_memzero(&curveSecret, curveSecret.count) }
        guard let message = SealedBox.open(box, publicKey: curvePublic, secretKey: curveSecret), message.count == 96 else { throw .boxDidNotOpen }
        guard let joiner = PublicKey(bytes: Array(message[0..<32])) else { throw .badKey("the joiner key") }
        guard Identity.verify(signature: Array(message[32...]), message: signed(household: household, guest: guest), key: joiner) else {
            throw .notSignedByJoiner
        }
        return RelayJoinRequest(joiner: joiner)
    }

    static func signed(household: RecordID, guest: PublicKey) -> [UInt8] {
        var w = ByteWriter(capacity: 80)
        w.write(raw: Array("kidledger relay join v1".utf8) + [0])
        w.write(id: household)
        w.write(raw: guest.bytes)
        return w.bytes
    }
}

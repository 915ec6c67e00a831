import CSodium
import KidLedgerDomain

/// A member's key pair for one relay (docs/RELAY-DESIGN.md, "Member relay keys"): what the member
/// dials that relay with and what the owner puts on its access list, so the relay can't link a
/// member across households or relays, or to its identity key.
///
/// The Ed25519 seed is BLAKE2b-256 (`crypto_generichash`) keyed with the identity's 32-byte secret
/// seed, of `"kidledger relay member key v1" 0 | relay key 32`; the key pair is
/// `crypto_sign_seed_keypair` of it (``Identity/init(seed:)``). Deterministic: every laptop of the
/// member (one identity) derives the same pair, and it needs no storage.
public enum RelayMemberIdentity {
    /// The key pair `identity` uses with the relay whose device key is `relay` (32 bytes).
    /// - Throws: ``RelaySealError/badKey(_:)`` for a relay key that is not 32 bytes.
    public static func derive(from identity: Identity, relay: [UInt8]) throws(RelaySealError) -> Identity {
        try keyed(identity.seed, label: "kidledger relay member key v1", relay: relay)
    }

    /// The key pair whose Ed25519 seed is BLAKE2b-256 keyed with `key` (32 bytes) of
    /// `label 0 | relay key 32`: a member's (above) or a joiner's guest key (``RelayGuestIdentity``).
    static func keyed(_ key: [UInt8], label: String, relay: [UInt8]) throws(RelaySealError) -> Identity {
        guard relay.count == PublicKey.byteCount else { throw .badKey("a relay key is \(PublicKey.byteCount) bytes, got \(relay.count)") }
        _ = Sodium.ready
        let message = Array(label.utf8) + [0] + relay
        var seed = [UInt8](repeating: 0, count: Identity.seedByteCount)
        defer { sodium_memzero(&seed, seed.count) }
        let rc = crypto_generichash(&seed, seed.count, message, UInt64(message.count), key, key.count)
        precondition(rc == 0, "crypto_generichash failed with valid sizes")
        // 32 bytes by construction.
        return try! Identity(seed: seed)
    }
}

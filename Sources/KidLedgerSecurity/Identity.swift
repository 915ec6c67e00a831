import CSodium
import KidLedgerDomain

/// An Ed25519 public key (32 bytes): a device's long-term identity as others see it.
public struct PublicKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Length of a public key in bytes.
    public static let byteCount = 32

    /// The 32 key bytes.
    public let bytes: [UInt8]

    /// Wraps exactly 32 bytes; nil for any other length.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = Array(bytes)
    }

    /// Parses 64 hex digits (any case); nil otherwise.
    public init?(hex: String) {
        guard let raw = Hex.decode(hex), let key = PublicKey(bytes: raw) else { return nil }
        self = key
    }

    /// Lowercase hex of all 32 bytes (64 characters).
    public var hex: String { Hex.encode(bytes) }

    /// A short fingerprint for people to compare: the first 8 bytes as four dash-separated groups of
    /// four hex digits, e.g. "3fa2-91c0-7d44-e1b8".
    public var fingerprint: String {
        let digits = Array(Hex.encode(bytes.prefix(8)))
        return stride(from: 0, to: 16, by: 4).map { String(digits[$0..<$0 + 4]) }.joined(separator: "-")
    }

    /// The short fingerprint (see ``fingerprint``).
    public var description: String { fingerprint }

    /// Lexicographic byte order.
    public static func < (lhs: PublicKey, rhs: PublicKey) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }
}

/// A device's long-term Ed25519 key pair, derived deterministically from a 32-byte seed.
///
/// The seed is the only secret that needs storing (see ``KeyStore``); the secret key is re-derived from it.
public struct Identity: Sendable {
    /// Length of a seed in bytes.
    public static let seedByteCount = 32
    /// Length of a detached signature in bytes.
    public static let signatureByteCount = 64

    /// The 32-byte seed (secret): store it, never show or send it.
    public let seed: [UInt8]
    /// The public half.
    public let publicKey: PublicKey
    private let secretKey: [UInt8]

    /// Derives the key pair from a 32-byte seed (`crypto_sign_seed_keypair`); the same seed gives the same keys.
    /// Throws ``SecurityError/badKey(_:)`` for any other seed length.
    public init(seed: [UInt8]) throws(SecurityError) {
        _ = Sodium.ready
        guard seed.count == Self.seedByteCount else {
            throw .badKey("an identity seed is \(Self.seedByteCount) bytes, got \(seed.count)")
        }
        var pk = [UInt8](repeating: 0, count: 32)
        var sk = [UInt8](repeating: 0, count: 64)
        let rc = crypto_sign_seed_keypair(&pk, &sk, seed)
        try Sodium.check(rc, .badKey("crypto_sign_seed_keypair failed"))
        self.seed = seed
        self.secretKey = sk
        // 32 bytes by construction.
        self.publicKey = PublicKey(bytes: pk)!
    }

    /// A new identity from the operating system's secure random source. For the CLI only: the
    /// simulator and tests derive identities from injected seeds with ``init(seed:)``.
    public static func generate() -> Identity {
        // A 32-byte seed is always valid.
        try! Identity(seed: Sodium.randomBytes(seedByteCount))
    }

    /// A 64-byte detached Ed25519 signature of `message`.
    public func sign(_ message: [UInt8]) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: Self.signatureByteCount)
        let rc = crypto_sign_detached(&signature, nil, message, UInt64(message.count), secretKey)
        precondition(rc == 0, "crypto_sign_detached failed with a valid key")
        return signature
    }

    /// The X25519 shared secret of this identity and the Ed25519 key `other`, both converted to
    /// their Curve25519 forms (LAN announcements: ``AnnouncementKeys``); nil when `other` has no
    /// Curve25519 form or the result is degenerate (all zero: a small-order point).
    public func sharedSecret(with other: [UInt8]) -> [UInt8]? {
        _ = Sodium.ready
        guard other.count == 32 else { return nil }
        var curvePublic = [UInt8](repeating: 0, count: 32)
        var curveSecret = [UInt8](repeating: 0, count: 32)
        defer { sodium_memzero(&curveSecret, 32) }
        guard crypto_sign_ed25519_pk_to_curve25519(&curvePublic, other) == 0,
              crypto_sign_ed25519_sk_to_curve25519(&curveSecret, secretKey) == 0 else { return nil }
        var shared = [UInt8](repeating: 0, count: 32)
        guard crypto_scalarmult(&shared, curveSecret, curvePublic) == 0 else { return nil }
        return shared
    }

    /// Whether `signature` is `key`'s valid detached signature of `message`. False for a signature of
    /// the wrong length, a malformed key, or any mismatch.
    public static func verify(signature: [UInt8], message: [UInt8], key: PublicKey) -> Bool {
        _ = Sodium.ready
        guard signature.count == signatureByteCount else { return false }
        return crypto_sign_verify_detached(signature, message, UInt64(message.count), key.bytes) == 0
    }
}

import CSodium
import KidLedgerDomain

/// A household epoch key `K_n` (docs/RELAY-DESIGN.md): 32 random bytes under which members seal
/// what they hand the relay from epoch `n` on, and the key `K_{n-1}` of the epoch before.
///
/// - Warning: ``bytes`` is a secret of the household's current members: store it with the
///   device's other secrets, never show or send it in clear.
public struct EpochKey: Equatable, Sendable {
    /// Length of an epoch key in bytes.
    public static let byteCount = 32
    /// The highest epoch number (one new epoch per revocation and owner transfer).
    public static let epochMax = UInt32.max

    /// The epoch this key belongs to.
    public let epoch: UInt32
    /// The 32 key bytes (secret).
    public let bytes: [UInt8]

    /// Wraps exactly 32 bytes as the key of `epoch`; throws ``RelaySealError/badKey(_:)`` otherwise.
    public init(epoch: UInt32, bytes: [UInt8]) throws(RelaySealError) {
        guard bytes.count == Self.byteCount else {
            throw .badKey("an epoch key is \(Self.byteCount) bytes, got \(bytes.count)")
        }
        self.epoch = epoch
        self.bytes = bytes
    }

    /// A fresh key for `epoch`, its 32 bytes drawn from `random` (injected: the simulator and
    /// the tests pass a seeded generator, the CLI the system's).
    public static func generate<R: RandomNumberGenerator>(epoch: UInt32, using random: inout R) -> EpochKey {
        // 32 bytes by construction.
        try! EpochKey(epoch: epoch, bytes: RelayRandom.bytes(byteCount, using: &random))
    }

    /// The keys from this one back to epoch 0, newest first: each earlier key is opened from the
    /// epoch record of the later one (``EpochRecord/previousKey(with:)``). `records` holds the
    /// household's epoch records (any order, others ignored); a missing or unopenable link
    /// throws, and nothing is returned.
    public func chain(through records: [EpochRecord]) throws(RelaySealError) -> [EpochKey] {
        var byEpoch: [UInt32: EpochRecord] = [:]
        for record in records where record.epoch <= epoch { byEpoch[record.epoch] = record }
        var keys = [self]
        var current = self
        // At most `epoch` steps back (bounded by the records held, each used once).
        while current.epoch > 0 {
            guard let record = byEpoch.removeValue(forKey: current.epoch) else { throw .unknownEpoch(current.epoch - 1) }
            current = try record.previousKey(with: current)
            keys.append(current)
        }
        return keys
    }
}

/// The epoch keys a member holds, by epoch: what it opens envelopes with.
public struct EpochKeyring: Sendable {
    private var keys: [UInt32: EpochKey] = [:]

    /// A keyring holding `keys` (a later key of the same epoch replaces an earlier one).
    public init(_ keys: [EpochKey] = []) {
        for key in keys { self.keys[key.epoch] = key }
    }

    /// Adds `key`, replacing one of the same epoch.
    public mutating func insert(_ key: EpochKey) { keys[key.epoch] = key }

    /// The key of `epoch`, if held.
    public subscript(epoch: UInt32) -> EpochKey? { keys[epoch] }

    /// The newest epoch held, or nil when empty.
    public var newestEpoch: UInt32? { keys.keys.max() }
}

/// Byte strings from an injected generator, and libsodium's sealed box with the ephemeral key from
/// it (so sealing draws no system randomness and the simulator stays deterministic).
enum RelayRandom {
    /// `count` bytes from `random`, eight per draw, little-endian.
    static func bytes<R: RandomNumberGenerator>(_ count: Int, using random: inout R) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count + 8)
        while out.count < count {
            let word = random.next()
            for shift in stride(from: 0, to: 64, by: 8) { out.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return Array(out.prefix(count))
    }
}

/// `crypto_box_seal` with a caller-given ephemeral seed.
///
/// libsodium's `crypto_box_seal` draws an ephemeral X25519 key pair from `randombytes_buf`, takes
/// the nonce `BLAKE2b-192(epk ‖ recipient pk)` and returns `epk ‖ crypto_box_easy(message)`. This
/// does exactly that with the key pair from `crypto_box_seed_keypair(seed)`, so the result opens
/// with `crypto_box_seal_open` (``selfCheck()`` verifies both directions against the linked library).
enum SealedBox {
    /// Bytes a sealed box adds to its message (ephemeral public key and MAC): `crypto_box_SEALBYTES`.
    static let overheadBytes = 48
    /// Bytes of an ephemeral seed.
    static let seedBytes = 32

    /// `message` sealed to the X25519 public key `recipient` (32 bytes) with the ephemeral key pair
    /// of `seed` (32 bytes of fresh randomness); nil when `recipient` is a small-order point (no
    /// shared secret).
    static func seal(_ message: [UInt8], to recipient: [UInt8], seed: [UInt8]) -> [UInt8]? {
        _ = Sodium.ready
        precondition(recipient.count == 32 && seed.count == seedBytes, "sealed box key or seed size")
        var ephemeralPublic = [UInt8](repeating: 0, count: 32)
        var ephemeralSecret = [UInt8](repeating: 0, count: 32)
        defer { sodium_memzero(&ephemeralSecret, 32) }
        precondition(crypto_box_seed_keypair(&ephemeralPublic, &ephemeralSecret, seed) == 0, "crypto_box_seed_keypair failed")
        var nonce = [UInt8](repeating: 0, count: 24)
        let noncePreimage = ephemeralPublic + recipient
        precondition(crypto_generichash(&nonce, 24, noncePreimage, UInt64(noncePreimage.count), nil, 0) == 0, "crypto_generichash failed")
        var cipher = [UInt8](repeating: 0, count: message.count + 16)
        guard crypto_box_easy(&cipher, message, UInt64(message.count), nonce, recipient, ephemeralSecret) == 0 else { return nil }
        return ephemeralPublic + cipher
    }

    /// The message in `box` if it opens with the X25519 key pair (`publicKey`, `secretKey`); nil otherwise.
    static func open(_ box: [UInt8], publicKey: [UInt8], secretKey: [UInt8]) -> [UInt8]? {
        _ = Sodium.ready
        guard box.count >= overheadBytes, publicKey.count == 32, secretKey.count == 32 else { return nil }
        var message = [UInt8](repeating: 0, count: box.count - overheadBytes)
        guard crypto_box_seal_open(&message, box, UInt64(box.count), publicKey, secretKey) == 0 else { return nil }
        return message
    }

    /// Whether this construction and the linked libsodium's `crypto_box_seal` open each other's boxes.
    static func selfCheck() -> Bool {
        _ = Sodium.ready
        guard crypto_box_sealbytes() == overheadBytes, crypto_box_seedbytes() == seedBytes else { return false }
        var publicKey = [UInt8](repeating: 0, count: 32)
        var secretKey = [UInt8](repeating: 0, count: 32)
        guard crypto_box_keypair(&publicKey, &secretKey) == 0 else { return false }
        let message = Array("kidledger sealed box self-check".utf8)
        guard let ours = seal(message, to: publicKey, seed: Sodium.randomBytes(seedBytes)) else { return false }
        var theirs = [UInt8](repeating: 0, count: message.count + overheadBytes)
        guard crypto_box_seal(&theirs, message, UInt64(message.count), publicKey) == 0 else { return false }
        return open(ours, publicKey: publicKey, secretKey: secretKey) == message
            && open(theirs, publicKey: publicKey, secretKey: secretKey) == message
    }
}

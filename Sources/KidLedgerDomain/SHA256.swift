import CSodium

/// SHA-256 (FIPS 180-4) from libsodium (`crypto_hash_sha256`).
public enum SHA256 {
    /// Returns the 32-byte SHA-256 digest of `bytes`.
    public static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(sequence: bytes)
        return hasher.finalize()
    }
}

/// A SHA-256 digest held inline: its 32 bytes as four big-endian 64-bit words (`w0` holds bytes 0–7).
public struct SHA256Words: Equatable, Sendable {
    /// Bytes 0–7, 8–15, 16–23 and 24–31 of the digest, each read big-endian.
    public var w0, w1, w2, w3: UInt64

    /// The first `count` bytes (at most 32).
    public func prefix(_ count: Int) -> [UInt8] {
        var words = (w0.bigEndian, w1.bigEndian, w2.bigEndian, w3.bigEndian)
        return withUnsafeBytes(of: &words) { Array($0.prefix(count)) }
    }
}

/// Incremental SHA-256 on libsodium's state: feed bytes with `update`, then call `finalize` for
/// the 32-byte digest.
public struct SHA256Hasher: Sendable {
    private var state = Self.initial

    /// Creates a hasher in the initial SHA-256 state.
    public init() {}

    private static var initial: crypto_hash_sha256_state {
        var state = crypto_hash_sha256_state()
        crypto_hash_sha256_init(&state)
        return state
    }

    /// Feeds raw bytes into the hash.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        crypto_hash_sha256_update(&state, base.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
    }

    /// Feeds an array of bytes into the hash.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Returns the 32-byte digest of everything fed so far and resets the hasher to its initial state.
    public mutating func finalize() -> [UInt8] {
        finalizeWords().prefix(32)
    }

    /// The digest of everything fed so far as four words, without allocating (the hot paths hash
    /// several times per change); resets the hasher to its initial state.
    public mutating func finalizeWords() -> SHA256Words {
        var out: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        _ = withUnsafeMutableBytes(of: &out) { crypto_hash_sha256_final(&state, $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        state = Self.initial
        return SHA256Words(w0: UInt64(bigEndian: out.0), w1: UInt64(bigEndian: out.1),
                           w2: UInt64(bigEndian: out.2), w3: UInt64(bigEndian: out.3))
    }

    mutating func update(sequence bytes: some Sequence<UInt8>) {
        let done: Void? = bytes.withContiguousStorageIfAvailable { update(UnsafeRawBufferPointer($0)) }
        if done == nil { Array(bytes).withUnsafeBytes { update($0) } }
    }
}

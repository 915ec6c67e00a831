import CSodium

/// One direction of `crypto_secretstream_xchacha20poly1305` with a caller-chosen header, so that no
/// system randomness is drawn (the simulator stays deterministic).
///
/// libsodium's `init_push` draws the 24-byte header from `randombytes_buf` and then sets the state up
/// exactly as `init_pull` does from that header (same struct, same HChaCha20 subkey, same counter and
/// nonce). So a push state is made with `init_pull` from a header derived from injected randomness;
/// ``selfCheck()`` verifies that equivalence against the linked libsodium (run by the tests).
struct SecretStream {
    /// Bytes of a stream header.
    static let headerBytes = 24
    /// Bytes added to every message (tag byte and Poly1305 MAC).
    static let overheadBytes = 17
    /// The tag of an ordinary message.
    static let tagMessage: UInt8 = 0
    /// The tag of the last message of a stream.
    static let tagFinal: UInt8 = 3

    private var state = crypto_secretstream_xchacha20poly1305_state()

    /// A stream state (for pushing or pulling) from a 24-byte header and a 32-byte key.
    init(header: [UInt8], key: [UInt8]) {
        _ = Sodium.ready
        precondition(header.count == Self.headerBytes && key.count == 32, "secretstream header or key size")
        let rc = crypto_secretstream_xchacha20poly1305_init_pull(&state, header, key)
        precondition(rc == 0, "crypto_secretstream_xchacha20poly1305_init_pull failed with valid sizes")
    }

    /// Encrypts `message` with `tag`, authenticating `associated` too.
    mutating func push(_ message: [UInt8], tag: UInt8, associated: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: message.count + Self.overheadBytes)
        let rc = crypto_secretstream_xchacha20poly1305_push(
            &state, &out, nil, message, UInt64(message.count), associated, UInt64(associated.count), tag)
        precondition(rc == 0, "crypto_secretstream_xchacha20poly1305_push failed")
        return out
    }

    /// Decrypts and authenticates one message; nil if it fails (the state is then unusable).
    mutating func pull(_ ciphertext: [UInt8], associated: [UInt8]) -> (message: [UInt8], tag: UInt8)? {
        guard ciphertext.count >= Self.overheadBytes else { return nil }
        var out = [UInt8](repeating: 0, count: ciphertext.count - Self.overheadBytes)
        var tag: UInt8 = 0
        var length: UInt64 = 0
        let rc = crypto_secretstream_xchacha20poly1305_pull(
            &state, &out, &length, &tag, ciphertext, UInt64(ciphertext.count), associated, UInt64(associated.count))
        guard rc == 0, length == UInt64(out.count) else { return nil }
        return (out, tag)
    }

    /// Whether libsodium's own `init_push` gives the same state as `init_pull` on the header it drew,
    /// and whether the sizes and tags this type assumes match the linked library.
    static func selfCheck() -> Bool {
        _ = Sodium.ready
        guard crypto_secretstream_xchacha20poly1305_headerbytes() == headerBytes,
              crypto_secretstream_xchacha20poly1305_abytes() == overheadBytes,
              crypto_secretstream_xchacha20poly1305_keybytes() == 32,
              crypto_secretstream_xchacha20poly1305_tag_message() == tagMessage,
              crypto_secretstream_xchacha20poly1305_tag_final() == tagFinal else { return false }
        let key = Sodium.randomBytes(32)
        var pushed = crypto_secretstream_xchacha20poly1305_state()
        var header = [UInt8](repeating: 0, count: headerBytes)
        guard crypto_secretstream_xchacha20poly1305_init_push(&pushed, &header, key) == 0 else { return false }
        let pulled = SecretStream(header: header, key: key)
        return withUnsafeBytes(of: &pushed) { a in
            withUnsafeBytes(of: pulled.state) { b in Array(a) == Array(b) }
        }
    }
}

import CSodium

/// One-time libsodium initialisation and small helpers shared by the security module.
///
/// Every entry point that calls libsodium first reads ``Sodium/ready``; the `static let` makes
/// `sodium_init()` run exactly once, thread-safely (Swift initialises globals and static
/// properties lazily under a lock). `sodium_init()` is itself idempotent.
public enum Sodium {
    /// True once libsodium is initialised. Traps if libsodium cannot initialise (a broken
    /// installation, not an input error): nothing in this module can work without it.
    public static let ready: Bool = {
        let rc = sodium_init()
        precondition(rc >= 0, "libsodium failed to initialise (sodium_init returned \(rc))")
        return true
    }()

    /// The version string of the linked libsodium, e.g. "1.0.18".
    public static var version: String {
        _ = ready
        return String(cString: sodium_version_string())
    }

    /// `count` bytes from the operating system's secure random source (`randombytes_buf`).
    /// Only for convenience entry points outside the deterministic core (e.g. ``Identity/generate()``).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        _ = ready
        var out = [UInt8](repeating: 0, count: count)
        randombytes_buf(&out, count)
        return out
    }

    /// Throws `error` unless a libsodium return code `rc` is 0 (success).
    static func check(_ rc: Int32, _ error: @autoclosure () -> SecurityError) throws(SecurityError) {
        if rc != 0 { throw error() }
    }

    /// A keyed BLAKE2b hash (`crypto_generichash`) of `message` with `outputCount` bytes (16...64).
    static func genericHash(_ message: [UInt8], key: [UInt8], outputCount: Int) -> [UInt8] {
        _ = ready
        var out = [UInt8](repeating: 0, count: outputCount)
        let rc = crypto_generichash(&out, outputCount, message, UInt64(message.count), key, key.count)
        precondition(rc == 0, "crypto_generichash failed with valid sizes")
        return out
    }
}

/// Why a security operation failed. Messages are readable and never contain key material or ledger data.
public enum SecurityError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Key or seed bytes had the wrong length or were rejected by libsodium.
    case badKey(String)
    /// A signature did not verify.
    case badSignature
    /// An encrypted frame failed authentication (tampered, truncated, reordered, replayed or from another session).
    case decryptFailed
    /// The handshake could not complete (malformed or out-of-turn message, wrong household, bad key exchange).
    case handshakeFailed(String)
    /// A channel frame was malformed (length 0, over the limit, unknown type).
    case badFrame(String)
    /// This side refused the peer (the authorisation hook's reason).
    case unauthorized(String)
    /// The peer refused this side and gave this reason.
    case refused(String)
    /// The peer refused this side because its member is revoked, and sent the owner-signed
    /// revocation (an encoded operation, not yet verified: the receiver checks it).
    case revokedByPeer(String, revocation: [UInt8])
    /// This side refused the peer's revoked member with the revocation, and the peer answered
    /// with owner transfers that void it where it is (encoded operations, not yet verified: the
    /// receiver checks and records them, so the next handshake judges the peer again).
    case answeredRefusal(String, transfers: [UInt8])
    /// ``SecureChannel/seal(_:)`` or ``SecureChannel/close()`` was called before the channel was established or after it ended.
    case notEstablished
    /// The connection ended before the peer closed the channel cleanly, or a frame arrived after its clean close.
    case closed(String)
    /// A key file or the key directory could not be used.
    case keyFile(String)
    /// An account name was not 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'.
    case badAccountName(String)

    /// A readable sentence.
    public var description: String {
        switch self {
        case .badKey(let why): "bad key: \(why)"
        case .badSignature: "signature does not verify"
        case .decryptFailed: "encrypted frame failed authentication (tampered, truncated, reordered or replayed)"
        case .handshakeFailed(let why): "secure handshake failed: \(why)"
        case .badFrame(let why): "malformed channel frame: \(why)"
        case .unauthorized(let why): "peer not authorised: \(why)"
        case .refused(let why): "refused by peer: \(why)"
        case .revokedByPeer(let why, _): "refused by peer: \(why)"
        case .answeredRefusal(let why, _): "peer not authorised: \(why); it answered with the owner transfers that void the revocation where it is"
        case .notEstablished: "secure channel is not established"
        case .closed(let why): "secure channel closed: \(why)"
        case .keyFile(let why): why
        case .badAccountName(let name):
            "invalid account name \"\(name)\": use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
        }
    }
}

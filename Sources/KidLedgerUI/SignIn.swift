import KidLedgerDomain
import KidLedgerSecurity

/// The page's sign-in secrets, all derived from the home's long-lived page key (HOME/ui-token,
/// ``TokenFile``), which itself never leaves the laptop's files:
///
/// - a **one-time code** for the page's address: `ISSUED-NONCE-MAC`, the issuing time in Unix
///   milliseconds, 16 random bytes and an HMAC-SHA-256 of both under the key. `kidledger ui` and
///   `kidledger open` make one; the page server takes it once, within ``codeLifetimeMillis``, and
///   answers with the cookie. A code in a process list or in the browser's history is spent.
/// - the **cookie**: HMAC(key, "cookie"), kept by the browser for ``cookieLifetimeSeconds``.
/// - the **change token** the page's HTML carries for its POSTs: HMAC(key, "change").
///
/// Replacing the key ("Sign out every browser") makes every cookie, change token and unspent
/// code worthless at once.
public enum SignIn {
    /// How long a one-time code may wait for its first use.
    public static let codeLifetimeMillis: Int64 = 60_000
    /// How long a browser keeps the cookie (180 days).
    public static let cookieLifetimeSeconds = 180 * 24 * 3600

    /// A fresh one-time code under `key`, issued at `nowMillis`.
    public static func code(key: String, nowMillis: Int64, nonce: [UInt8] = Sodium.randomBytes(16)) -> String {
        let nonceHex = Hex.encode(nonce)
        return "\(nowMillis)-\(nonceHex)-\(mac(key: key, "sign-in|\(nowMillis)|\(nonceHex)", bytes: 16))"
    }

    /// A code's parts when its MAC is right under `key`; nil for anything else.
    static func verify(_ code: String, key: String) -> (issuedMillis: Int64, nonce: String)? {
        let parts = code.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, parts[0].count <= 16, let issued = Int64(parts[0]), issued >= 0,
              parts[1].count == 32, parts[1].utf8.allSatisfy({ FormDecoding.hex($0) != nil }) else { return nil }
        guard UIGate.equal(parts[2], mac(key: key, "sign-in|\(issued)|\(parts[1])", bytes: 16)) else { return nil }
        return (issued, parts[1])
    }

    /// The cookie's value under `key`.
    static func cookie(key: String) -> String { mac(key: key, "cookie", bytes: 32) }

    /// The change token under `key` (the page's HTML carries it; POSTs send it back).
    static func changeToken(key: String) -> String { mac(key: key, "change", bytes: 32) }

    /// HMAC-SHA-256 (RFC 2104) of `message` under the key's text, its first `bytes` bytes as hex.
    static func mac(key: String, _ message: String, bytes: Int) -> String {
        var block = Array(key.utf8)
        if block.count > 64 { block = SHA256.hash(block) }
        block += [UInt8](repeating: 0, count: 64 - block.count)
        let inner = SHA256.hash(block.map { $0 ^ 0x36 } + Array(message.utf8))
        let outer = SHA256.hash(block.map { $0 ^ 0x5c } + inner)
        return Hex.encode(Array(outer.prefix(bytes)))
    }
}

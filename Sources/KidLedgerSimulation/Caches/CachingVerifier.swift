import KidLedgerDomain
import KidLedgerSecurity
import Synchronization

/// A ``SignatureVerifier`` that remembers its answers: the same signed membership records (the
/// genesis grants, every claim) and signed heads are verified by every replica, again at every
/// restart, in `verify` and in the equivalence check's fresh replica. Verification is a pure
/// function of (key, message, signature), so the cache changes only the cost, never an answer.
///
/// A seed's runs share one (``SeedShare/verifier``): a fuzz runs every seed twice, and the second
/// run verifies exactly what the first did. The simulator's signer tells it every signature it
/// makes (``noteSigned(signature:message:key:)``), so a head or claim an honest replica signs is
/// not verified again by the replicas it reaches; whatever else a replica is sent (a hostile
/// member's forgeries, a tampered or replayed record) is verified by libsodium.
final class CachingVerifier: SignatureVerifier {
    /// One remembered answer: the rest of the query (the signature is the table's key).
    private struct Entry {
        var message: [UInt8]
        var key: [UInt8]
        var answer: Bool
    }

    /// At most this many signatures are remembered; past it the table starts over (a seed makes
    /// a few thousand).
    private static let signaturesMax = 1 << 16

    private let base: any SignatureVerifier
    /// Answers by signature (64 bytes: cheaper to hash than the message, and almost always unique).
    /// A seed's runs follow each other on one thread, but a lock costs nothing next to a lookup.
    private let answers = Mutex<[ByteKey: [Entry]]>([:])

    /// A cache of `base`'s answers.
    init(_ base: any SignatureVerifier) { self.base = base }

    func isValid(signature: [UInt8], message: [UInt8], key: [UInt8]) -> Bool {
        let known = answers.withLock { table in
            table[ByteKey(signature)]?.first { $0.message == message && $0.key == key }?.answer
        }
        if let known { return known }
        let answer = base.isValid(signature: signature, message: message, key: key)
        remember(signature: signature, message: message, key: key, answer: answer)
        return answer
    }

    /// Remembers as valid a signature just made over `message` with the secret key of `key` (by
    /// libsodium, which the base verifier checks with): Ed25519 verifies every signature it makes.
    func noteSigned(signature: [UInt8], message: [UInt8], key: [UInt8]) {
        remember(signature: signature, message: message, key: key, answer: true)
    }

    private func remember(signature: [UInt8], message: [UInt8], key: [UInt8], answer: Bool) {
        answers.withLock { table in
            if table[ByteKey(signature)]?.contains(where: { $0.message == message && $0.key == key }) == true { return }
            if table.count >= Self.signaturesMax && table[ByteKey(signature)] == nil { table.removeAll() }
            table[ByteKey(signature), default: []].append(Entry(message: message, key: key, answer: answer))
        }
    }
}

/// Bytes as a dictionary key, hashed as one buffer: `[UInt8]`'s own `hash(into:)` feeds the
/// hasher a byte per call (the simulator's signature tables hash many keys, messages and
/// signatures).
struct ByteKey: Hashable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

import KidLedgerDomain
import KidLedgerSecurity
import Synchronization

/// A ``SignatureVerifier`` that remembers its answers: the same signed membership records (the
/// genesis grants, every claim) are verified by every replica, again at every restart and in the
/// equivalence check's fresh replica. Verification is a pure function of (key, message,
/// signature), so the cache changes only the cost, never an answer.
///
/// ``sodium()`` verifiers share one table of answers across runs in the process (thread-safe): a
/// fuzz runs every seed twice, and the second run verifies exactly what the first did. Any other
/// base verifier gets a table of its own.
final class CachingVerifier: SignatureVerifier {
    /// One remembered answer: the rest of the query (the signature is the table's key).
    private struct Entry {
        var message: [UInt8]
        var key: [UInt8]
        var answer: Bool
    }

    /// Answers by signature (64 bytes: cheaper to hash than the message, and almost always unique).
    private final class Answers: Sendable {
        let table = Mutex<[[UInt8]: [Entry]]>([:])
    }

    /// At most this many signatures are remembered in one table; past it the table starts over.
    private static let signaturesMax = 4096
    /// The table of every ``sodium()`` verifier.
    private static let sodiumAnswers = Answers()

    private let base: any SignatureVerifier
    private let answers: Answers

    /// A cache of `base`'s answers, of its own.
    init(_ base: any SignatureVerifier) {
        self.base = base
        answers = Answers()
    }

    private init(_ base: any SignatureVerifier, answers: Answers) {
        self.base = base
        self.answers = answers
    }

    /// A cache of ``SodiumVerifier``'s answers, sharing its table with every other one.
    static func sodium() -> CachingVerifier { CachingVerifier(SodiumVerifier(), answers: sodiumAnswers) }

    func isValid(signature: [UInt8], message: [UInt8], key: [UInt8]) -> Bool {
        let known = answers.table.withLock { table in
            table[signature]?.first { $0.message == message && $0.key == key }?.answer
        }
        if let known { return known }
        let answer = base.isValid(signature: signature, message: message, key: key)
        answers.table.withLock { table in
            if table.count >= Self.signaturesMax && table[signature] == nil { table.removeAll() }
            table[signature, default: []].append(Entry(message: message, key: key, answer: answer))
        }
        return answer
    }
}

import KidLedgerDomain
import Synchronization

/// A ``SignatureVerifier`` that remembers its answers: the same signed membership records (the
/// genesis grants, every claim) are verified by every replica, again at every restart and in the
/// equivalence check's fresh replica. Verification is a pure function of (key, message,
/// signature), so the cache changes only the cost, never an answer. One per simulation run.
final class CachingVerifier: SignatureVerifier {
    private struct Query: Hashable {
        var signature: [UInt8]
        var message: [UInt8]
        var key: [UInt8]
    }

    private let base: any SignatureVerifier
    private let answers = Mutex<[Query: Bool]>([:])

    init(_ base: any SignatureVerifier) { self.base = base }

    func isValid(signature: [UInt8], message: [UInt8], key: [UInt8]) -> Bool {
        let query = Query(signature: signature, message: message, key: key)
        if let known = answers.withLock({ $0[query] }) { return known }
        let answer = base.isValid(signature: signature, message: message, key: key)
        answers.withLock { $0[query] = answer }
        return answer
    }
}

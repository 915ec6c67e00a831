import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity

/// What the runs of one seed share (a fuzzed seed's first run and its determinism rerun, one after
/// the other on one thread): answers of pure functions, so that the rerun takes the first run's
/// answer instead of computing it again. The replicas' prepared changes (``PreparationCache``),
/// and the identities and signed membership records the simulator makes: key pairs derive from
/// their seed bytes, and Ed25519 signatures are deterministic (RFC 8032), so an answer kept is the
/// one computing again would give. Like ``CachingVerifier``, it changes only the cost.
///
/// Unchecked Sendable: a fuzz hands each seed's share to the worker thread that runs the seed,
/// and only that thread uses it (checked in debug builds by ``ThreadCheck``).
public final class SeedShare: @unchecked Sendable {
    private let thread = ThreadCheck()
    /// The prepared changes of every replica of the runs (the equivalence check's fresh replica
    /// does without).
    let preparations = PreparationCache()
    /// Every replica's signature verifier in the runs: it remembers answers, and every
    /// signature ``sign(_:by:)`` makes (``CachingVerifier``).
    let verifier = CachingVerifier(SodiumVerifier())
    /// What each function was asked (the signer's seed first) and answered.
    private var identities: [[UInt8]: Identity] = [:]
    private struct SignatureQuestion: Hashable {
        let signer: [UInt8], message: [UInt8]
        /// The message as one buffer (``ByteKey``); the signer is one of a few per seed.
        func hash(into hasher: inout Hasher) { hasher.combine(ByteKey(message)) }
    }
    private var signatures: [SignatureQuestion: [UInt8]] = [:]
    private struct GrantQuestion: Hashable { let signer: [UInt8], member: PublicKey, name: String, household: RecordID, atMillis: Int64 }
    private var grants: [GrantQuestion: MemberGrant] = [:]
    private struct RevocationQuestion: Hashable {
        let signer: [UInt8], member: [UInt8], seen: VersionVector, household: RecordID, atMillis: Int64
    }
    private var revocations: [RevocationQuestion: MemberRevocation] = [:]

    /// Creates an empty one.
    public init() {}

    /// How many answers are kept.
    var answerCount: Int { identities.count + signatures.count + grants.count + revocations.count }

    /// `answers[question]`, or `compute()`, kept there.
    private static func remembered<Q, A>(_ answers: inout [Q: A], _ question: Q, _ compute: () throws -> A) rethrows -> A {
        if let known = answers[question] { return known }
        let answer = try compute()
        answers[question] = answer
        return answer
    }

    /// `Identity(seed:)`.
    func identity(seed: [UInt8]) throws -> Identity {
        thread.check()
        return try Self.remembered(&identities, seed) { try Identity(seed: seed) }
    }

    /// `identity.signer`, whose signatures (of origin claims) are remembered here.
    func signer(for identity: Identity) -> MemberSigner {
        MemberSigner(key: identity.publicKey.bytes) { [self] message in sign(message, by: identity) }
    }

    /// `identity.sign(message)`.
    func sign(_ message: [UInt8], by identity: Identity) -> [UInt8] {
        thread.check()
        return Self.remembered(&signatures, SignatureQuestion(signer: identity.seed, message: message)) {
            let signature = identity.sign(message)
            verifier.noteSigned(signature: signature, message: message, key: identity.publicKey.bytes)
            return signature
        }
    }

    /// `identity.grant(_:name:household:atMillis:)`; the verifier learns its signature (like
    /// ``sign(_:by:)``'s).
    func grant(by identity: Identity, _ member: PublicKey, name: String, household: RecordID, atMillis: Int64) -> MemberGrant {
        thread.check()
        return Self.remembered(&grants, GrantQuestion(signer: identity.seed, member: member, name: name, household: household,
                                               atMillis: atMillis)) {
            let grant = identity.grant(member, name: name, household: household, atMillis: atMillis)
            verifier.noteSigned(signature: grant.signature, message: Membership.grantMessage(household: household, grant),
                                key: identity.publicKey.bytes)
            return grant
        }
    }

    /// `identity.revocation(of:seen:household:atMillis:)`; the verifier learns its signature.
    func revocation(by identity: Identity, of member: [UInt8], seen: VersionVector, household: RecordID,
                    atMillis: Int64) -> MemberRevocation {
        thread.check()
        return Self.remembered(&revocations, RevocationQuestion(signer: identity.seed, member: member, seen: seen,
                                                         household: household, atMillis: atMillis)) {
            let revocation = identity.revocation(of: member, seen: seen, household: household, atMillis: atMillis)
            verifier.noteSigned(signature: revocation.signature, message: Membership.revocationMessage(household: household, revocation),
                                key: identity.publicKey.bytes)
            return revocation
        }
    }
}

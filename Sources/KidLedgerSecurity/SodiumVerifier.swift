import KidLedgerDomain

/// The replica's signature verifier, on libsodium's Ed25519.
public struct SodiumVerifier: SignatureVerifier {
    /// Creates it.
    public init() { _ = Sodium.ready }

    /// Whether `signature` is `key`'s Ed25519 signature of `message` (false for malformed input).
    public func isValid(signature: [UInt8], message: [UInt8], key: [UInt8]) -> Bool {
        guard let publicKey = PublicKey(bytes: key) else { return false }
        return Identity.verify(signature: signature, message: message, key: publicKey)
    }
}

extension Identity {
    /// This identity as the replica's signer of its origin claims.
    public var signer: MemberSigner {
        let me = self
        return MemberSigner(key: publicKey.bytes) { me.sign($0) }
    }

    /// A grant of membership to `member`, signed by this (owner) identity.
    public func grant(_ member: PublicKey, name: String, household: RecordID, atMillis: Int64) -> MemberGrant {
        var g = MemberGrant(member: member.bytes, name: name, grantedAtMillis: atMillis, signature: [])
        g.signature = sign(Membership.grantMessage(household: household, g))
        return g
    }

    /// A revocation of `member` that has seen `seen`, signed by this (owner) identity.
    public func revocation(of member: [UInt8], seen: [ReplicaID: UInt64], household: RecordID, atMillis: Int64) -> MemberRevocation {
        var r = MemberRevocation(member: member, revokedAtMillis: atMillis, seen: seen, signature: [])
        r.signature = sign(Membership.revocationMessage(household: household, r))
        return r
    }
}

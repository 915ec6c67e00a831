import KidLedgerDomain

/// What ``Replica/learnRevocation(_:of:)`` did with a revocation that came with a refusal.
public enum LearnedRevocation: Equatable, Sendable {
    /// It verified under the household's owner key and is now recorded here (through the apply path).
    case recorded
    /// It verified, and this replica already knew the member was revoked: nothing changed.
    case alreadyKnown
    /// It did not verify (or names another member, or is not a revocation): ignored, counted.
    case forged(String)
}

extension Replica {
    /// The device setting that counts refusals whose revocation did not verify.
    public static let forgedRefusalsSetting = "forgedRefusals"

    /// The owner-signed revocation of `member` this replica holds, as an encoded operation (what a
    /// refusal of that member carries), or nil when the member is not revoked here.
    public func revocation(of member: [UInt8]) throws -> [UInt8]? {
        try store.read { r in
            var found: [UInt8]?
            try r.scan(Tables.revocations, prefix: member) { _, value in
                found = value
                return false
            }
            return found
        }
    }

    /// A peer refused this device's member `member` and sent `encoded` as the owner's revocation of
    /// it. When it is a revocation of `member` whose signature verifies under this replica's
    /// household owner key (through the injected ``SignatureVerifier``), it is recorded as a
    /// membership change of this replica (``commitMembership(_:)``: the one apply path, so
    /// `members()` lists the member revoked and a rebuild keeps it); nothing else changes and no
    /// data is lost. Anything else is ignored and counted in ``forgedRefusalsSetting``.
    public func learnRevocation(_ encoded: [UInt8], of member: [UInt8]) throws -> LearnedRevocation {
        var reader = ByteReader(encoded)
        let operation: Operation
        do { operation = try RecordCodec.decodeOperation(&reader) } catch {
            return try countForged("the refusal's revocation does not decode: \(error)")
        }
        guard reader.isAtEnd, case .revoke(let revocation) = operation else {
            return try countForged("the refusal's revocation is not one revocation")
        }
        guard revocation.member == member else { return try countForged("the refusal's revocation names another member") }
        let owner = try store.read { r in try Self.owner(r, queryCache) }
        guard let (household, ownerKey) = owner, revocation.member != ownerKey,
              verifier.isValid(signature: revocation.signature,
                               message: Membership.revocationMessage(household: household, revocation), key: ownerKey) else {
            return try countForged("the refusal's revocation is not signed by this household's owner")
        }
        if try self.revocation(of: member) != nil { return .alreadyKnown }
        try commitMembership([.revoke(revocation)])
        return .recorded
    }

    private func countForged(_ reason: String) throws -> LearnedRevocation {
        let count = Int(try device.setting(Self.forgedRefusalsSetting) ?? "0") ?? 0
        try device.setSetting(Self.forgedRefusalsSetting, String(count + 1))
        return .forged(reason)
    }
}

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
    /// refusal of that member carries), or nil when the member is not revoked here. After an owner
    /// recovery it is preceded by the winning owner transfers (the newest ``evidenceTransfersMax``),
    /// so a refused laptop that has not seen them can still check who signed the revocation.
    public func revocation(of member: [UInt8]) throws -> [UInt8]? {
        try store.read { r in
            var found: [UInt8]?
            try r.scan(Tables.revocations, prefix: member) { _, value in
                found = value
                return false
            }
            guard let revocation = found else { return nil }
            let transfers = try Self.ownership(r, queryCache)?.terms.compactMap(\.endedBy) ?? []
            return transfers.suffix(Self.evidenceTransfersMax).flatMap { RecordCodec.encodeOperation(.transferOwner($0)) } + revocation
        }
    }

    /// The most owner transfers a refusal's evidence carries (each about 150 bytes; the frame
    /// holds 16 KiB).
    static let evidenceTransfersMax = 32

    /// A peer refused this device's member `member` and sent `encoded` as the owner's revocation of
    /// it, possibly preceded by owner transfers. When it is a revocation of `member` whose
    /// signature verifies under this replica's household owner key, or under the new owner of one
    /// of those transfers that the household's recovery key signed (through the injected
    /// ``SignatureVerifier``), it is recorded, with the transfers this replica lacks, as a
    /// membership change of this replica (``commitMembership(_:)``: the one apply path judges
    /// them again, so `members()` lists the member revoked only if the revocation holds there and a
    /// rebuild keeps it); nothing else changes and no data is lost. Anything else is ignored and
    /// counted in ``forgedRefusalsSetting``.
    public func learnRevocation(_ encoded: [UInt8], of member: [UInt8]) throws -> LearnedRevocation {
        var reader = ByteReader(encoded)
        var operations: [Operation] = []
        while !reader.isAtEnd && operations.count <= Self.evidenceTransfersMax {
            do { operations.append(try RecordCodec.decodeOperation(&reader)) } catch {
                return try countForged("the refusal's revocation does not decode: \(error)")
            }
        }
        guard reader.isAtEnd, case .revoke(let revocation)? = operations.last else {
            return try countForged("the refusal's revocation is not one revocation")
        }
        var transfers: [OwnerTransfer] = []
        for op in operations.dropLast() {
            guard case .transferOwner(let t) = op else { return try countForged("the refusal's revocation is not one revocation") }
            transfers.append(t)
        }
        guard revocation.member == member else { return try countForged("the refusal's revocation names another member") }
        let ownership = try store.read { r in try Self.ownership(r, queryCache) }
        guard let ownership else { return try countForged("the refusal's revocation is not signed by this household's owner") }
        // Transfers the recovery key signed name the candidates besides the owner known here.
        let recovered = transfers.filter {
            !ownership.recovery.isEmpty && verifier.isValid(signature: $0.signature,
                message: Membership.transferMessage(household: ownership.household, $0), key: ownership.recovery)
        }
        let signers = [ownership.current] + recovered.map(\.newOwner)
        guard let signer = signers.first(where: {
            verifier.isValid(signature: revocation.signature, message: Membership.revocationMessage(household: ownership.household, revocation), key: $0)
        }), revocation.member != signer else {
            return try countForged("the refusal's revocation is not signed by this household's owner")
        }
        if try self.revocation(of: member) != nil { return .alreadyKnown }
        let known = try store.read { r in
            var keys = Set<[UInt8]>()
            try r.scan(Tables.transfers) { _, value in keys.insert(value); return true }
            return keys
        }
        // The transfers up to the one that made the signer the owner, no later: the change this
        // replica records them in comes after every one of them, so a later transfer would end
        // the signer's term before it and the revocation would not hold in it (a revocation the
        // owner signed before a recovery this replica had not seen).
        let signerEpoch = recovered.filter { $0.newOwner == signer }.map(\.epoch).max() ?? 0
        let missing = recovered.filter { $0.epoch <= signerEpoch }.map { Operation.transferOwner($0) }
            .filter { !known.contains(RecordCodec.encodeOperation($0)) }
        try commitMembership(missing + [.revoke(revocation)])
        return try self.revocation(of: member) != nil ? .recorded : .forged("the refusal's revocation does not hold here")
    }

    private func countForged(_ reason: String) throws -> LearnedRevocation {
        let count = Int(try device.setting(Self.forgedRefusalsSetting) ?? "0") ?? 0
        try device.setSetting(Self.forgedRefusalsSetting, String(count + 1))
        return .forged(reason)
    }
}

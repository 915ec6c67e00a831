import KidLedgerDomain

/// What ``Replica/learnRevocation(_:of:)`` did with a revocation that came with a refusal.
public enum LearnedRevocation: Equatable, Sendable {
    /// It verified under the household's owner key and is now recorded here (through the apply path).
    case recorded
    /// This replica already holds a revocation of the member that holds in its log (then the copy
    /// the refusal carries is not checked: whoever signed it, the refusal agrees), or the copy
    /// verified and was known here. Nothing changed.
    case alreadyKnown
    /// It verified under a former owner's key, but an owner transfer this replica holds ended that
    /// owner's term before the revocation (nothing changed); or under the new owner of a recovery
    /// that lost its epoch here to another (the records are kept, valid and void, as a sync would
    /// bring them): it does not hold here. This side answers the refusal with the transfers that
    /// void it (``Replica/transfersVoiding(_:of:)``).
    case void
    /// It verified under a former owner's key, and here the transfer that ended that owner's term
    /// voids this replica's own copy of it, but the refusal proved where the owner's log holds
    /// it (``RevocationPlacement``: a change that transfer had seen, in the hash chain the
    /// origin's member signed): this device now knows its member is revoked
    /// (``Replica/isRevokedHere(_:)``). Kept in its device state, and judged again, by the
    /// owner's log's rule, whenever asked.
    case placed
    /// It did not verify (or names another member, or is not a revocation): ignored, counted.
    case forged(String)
}

/// What ``Replica/learnTransfers(_:)`` did with the owner transfers a refused peer answered with.
public enum LearnedTransfers: Equatable, Sendable {
    /// This many transfers verified under the household's recovery key and were new here: they
    /// are recorded (through the apply path), so the next handshake judges the peer again.
    case recorded(Int)
    /// They verified, and this replica held every one of them already.
    case alreadyKnown
    /// They did not decode or verify: ignored, counted in ``Replica/forgedRefusalsSetting``.
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
            guard let revocation = try Self.storedRevocation(of: member, r) else { return nil }
            let ownership = try Self.ownership(r)
            let transfers = ownership?.terms.compactMap(\.endedBy) ?? []
            let evidence = transfers.suffix(Self.evidenceTransfersMax).flatMap { RecordCodec.encodeOperation(.transferOwner($0)) } + revocation
            var reader = ByteReader(revocation)
            guard let ownership, case .revoke(let rv)? = try? RecordCodec.decodeOperation(&reader),
                  let placement = try Self.placement(of: rv, ownership, r)?.encoded(),
                  evidence.count + placement.count <= Self.evidenceBytesMax else { return evidence }
            return evidence + placement
        }
    }

    /// Whether this replica holds a revocation of `member` that holds in its log (what
    /// ``revocation(of:)`` is nil for, without building the evidence).
    public func holdsRevocation(of member: [UInt8]) throws -> Bool {
        try store.read { r in try Self.storedRevocation(of: member, r) != nil }
    }

    /// The first stored revocation of `member` (an encoded operation), or nil.
    private static func storedRevocation(of member: [UInt8], _ r: any KeyValueReader) throws -> [UInt8]? {
        var found: [UInt8]?
        try r.scan(Tables.revocations, prefix: member) { _, value in
            found = value
            return false
        }
        return found
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
    /// counted in ``forgedRefusalsSetting``. When this replica already lists `member` revoked, the
    /// answer is ``LearnedRevocation/alreadyKnown`` before any signature is checked.
    public func learnRevocation(_ encoded: [UInt8], of member: [UInt8]) throws -> LearnedRevocation {
        let evidence: Evidence
        switch Self.decodeEvidence(encoded, of: member) {
        case .failure(let why): return try countForged(why.reason)
        case .success(let decoded): evidence = decoded
        }
        let (transfers, revocation) = (evidence.transfers, evidence.revocation)
        // Revoked here already (by a revocation that holds in this log, or where a refusal
        // placed it): the refusal agrees, whoever signed the copy it carries (a former owner, in
        // its term, for a replica that has since heard of the transfer that ended it).
        if try holdsRevocation(of: member) || holdsPlacedRevocation(of: member) { return .alreadyKnown }
        let ownership = try store.read { r in try Self.ownership(r) }
        guard let ownership else { return try countForged("the refusal's revocation is not signed by this household's owner") }
        let recovered = recoveryTransfers(transfers, ownership)
        let signers = [ownership.current] + recovered.map(\.newOwner)
        guard let signer = signers.first(where: { signed(revocation, by: $0, ownership) }), revocation.member != signer else {
            if formerOwnerSigning(revocation, ownership) != nil { return try place(evidence, of: member) ? .placed : .void }
            return try countForged("the refusal's revocation is not signed by this household's owner")
        }
        let known = try knownTransfers()
        // The transfers up to the one that made the signer the owner, no later: the change this
        // replica records them in comes after every one of them, so a later transfer would end
        // the signer's term before it and the revocation would not hold in it (a revocation the
        // owner signed before a recovery this replica had not seen).
        let signerEpoch = recovered.filter { $0.newOwner == signer }.map(\.epoch).max() ?? 0
        let missing = recovered.filter { $0.epoch <= signerEpoch }.map { Operation.transferOwner($0) }
            .filter { !known.contains(RecordCodec.encodeOperation($0)) }
        try commitMembership(missing + [.revoke(revocation)])
        if try holdsRevocation(of: member) {
            // Kept for the day a recovery this replica has not heard of voids its own copy.
            _ = try place(evidence, of: member)
            return .recorded
        }
        // Judged with the transfers it carried recorded: signed by the new owner of a recovery
        // that lost its epoch here to another one (two recoveries at once: that key never owned),
        // or by a former owner after a transfer held here ended its term (a recovery the refusing
        // side has not heard of). Either way it does not hold, and this side answers with the
        // transfers that void it.
        if let now = try store.read({ r in try Self.ownership(r) }), voidedFrom(revocation, recovered, now) != nil {
            return try place(evidence, of: member) ? .placed : .void
        }
        return .forged("the refusal's revocation does not hold here")
    }

    /// The owner transfers to answer a refusal of `member` with when the refusal's revocation
    /// (`encoded`, as ``learnRevocation(_:of:)`` takes it) verifies under a former owner's key and
    /// does not hold here: the winning transfers from the one that ended that owner's term on (at
    /// most ``evidenceTransfersMax``), encoded. Their `seen` vectors show the refusing side that the
    /// former owner signed the revocation after its term ended, so recording them voids it there
    /// too. Nil otherwise. Reads only.
    public func transfersVoiding(_ encoded: [UInt8], of member: [UInt8]) throws -> [UInt8]? {
        guard case .success(let evidence) = Self.decodeEvidence(encoded, of: member),
              try !holdsRevocation(of: member), try !holdsPlacedRevocation(of: member), try !placementHolds(evidence),
              let ownership = try store.read({ r in try Self.ownership(r) }) else { return nil }
        guard let epoch = voidedFrom(evidence.revocation, recoveryTransfers(evidence.transfers, ownership), ownership) else { return nil }
        let transfers = ownership.terms.compactMap(\.endedBy).filter { $0.epoch >= epoch }.prefix(Self.evidenceTransfersMax)
        return transfers.flatMap { RecordCodec.encodeOperation(.transferOwner($0)) }
    }

    /// The epoch of the first winning transfer here that voids `revocation`, or nil when none
    /// does: the one that ended the term of the former owner who signed it
    /// (``formerOwnerSigning(_:_:)``), or the one that won the epoch of a transfer among `recovered`
    /// (valid ones a refusal carried) whose new owner signed it and never owned the household
    /// here (two recoveries at once).
    private func voidedFrom(_ revocation: MemberRevocation, _ recovered: [OwnerTransfer], _ ownership: Ownership) -> UInt64? {
        let winners = ownership.terms.compactMap(\.endedBy)
        let lost = recovered.first { t in
            !ownership.terms.contains { $0.owner == t.newOwner } && revocation.member != t.newOwner
                && signed(revocation, by: t.newOwner, ownership) && winners.contains { $0.epoch == t.epoch && $0.newOwner != t.newOwner }
        }
        return lost?.epoch ?? formerOwnerSigning(revocation, ownership).flatMap { ownership.terms[$0].endedBy?.epoch }
    }

    /// A refused peer answered this replica's refusal with owner transfers (`encoded`: encoded
    /// operations, at most ``evidenceTransfersMax``). Those the household's recovery key signed
    /// and this replica lacks are recorded as a membership change of this replica
    /// (``commitMembership(_:)``: the one apply path judges them again), so the next handshake
    /// judges the peer by the ownership they make. Anything that does not decode or verify is
    /// ignored and counted in ``forgedRefusalsSetting``; nothing else changes.
    public func learnTransfers(_ encoded: [UInt8]) throws -> LearnedTransfers {
        var reader = ByteReader(encoded)
        var transfers: [OwnerTransfer] = []
        while !reader.isAtEnd {
            guard transfers.count < Self.evidenceTransfersMax else {
                return .forged(try noteForged("the refused device answered with more than \(Self.evidenceTransfersMax) owner transfers"))
            }
            let operation: Operation
            do { operation = try RecordCodec.decodeOperation(&reader) } catch {
                return .forged(try noteForged("the refused device's answer does not decode: \(error)"))
            }
            guard case .transferOwner(let t) = operation else {
                return .forged(try noteForged("the refused device's answer holds something other than owner transfers"))
            }
            transfers.append(t)
        }
        guard let ownership = try store.read({ r in try Self.ownership(r) }) else {
            return .forged(try noteForged("owner transfers answered in a household without an owner"))
        }
        let valid = recoveryTransfers(transfers, ownership)
        guard !valid.isEmpty, valid.count == transfers.count else {
            return .forged(try noteForged("the refused device's owner transfers are not signed by this household's recovery key"))
        }
        let known = try knownTransfers()
        let missing = valid.map { Operation.transferOwner($0) }.filter { !known.contains(RecordCodec.encodeOperation($0)) }
        guard !missing.isEmpty else { return .alreadyKnown }
        try commitMembership(missing)
        return .recorded(missing.count)
    }

    /// A refusal's evidence: owner transfers, then one revocation, then where it sits in the
    /// owner's log when the refusing side could say (``RevocationPlacement``).
    struct Evidence {
        var transfers: [OwnerTransfer]
        var revocation: MemberRevocation
        var placement: RevocationPlacement?
    }

    /// A refusal's evidence of `member`'s revocation; or why it is not one.
    static func decodeEvidence(_ encoded: [UInt8], of member: [UInt8]) -> Result<Evidence, EvidenceError> {
        var reader = ByteReader(encoded)
        var operations: [Operation] = []
        var placement: RevocationPlacement?
        while !reader.isAtEnd && operations.count <= Self.evidenceTransfersMax {
            do {
                if reader.bytes[reader.offset] == RevocationPlacement.marker {
                    placement = try RevocationPlacement.decode(&reader)
                } else {
                    operations.append(try RecordCodec.decodeOperation(&reader))
                }
            } catch {
                return .failure(EvidenceError("the refusal's revocation does not decode: \(error)"))
            }
        }
        guard reader.isAtEnd, case .revoke(let revocation)? = operations.last else {
            return .failure(EvidenceError("the refusal's revocation is not one revocation"))
        }
        var transfers: [OwnerTransfer] = []
        for op in operations.dropLast() {
            guard case .transferOwner(let t) = op else { return .failure(EvidenceError("the refusal's revocation is not one revocation")) }
            transfers.append(t)
        }
        guard revocation.member == member else { return .failure(EvidenceError("the refusal's revocation names another member")) }
        return .success(Evidence(transfers: transfers, revocation: revocation, placement: placement))
    }

    /// Why a refusal's evidence does not decode.
    struct EvidenceError: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// The transfers among `transfers` the household's recovery key signed.
    private func recoveryTransfers(_ transfers: [OwnerTransfer], _ ownership: Ownership) -> [OwnerTransfer] {
        transfers.filter {
            !ownership.recovery.isEmpty && verifier.isValid(signature: $0.signature,
                message: Membership.transferMessage(household: ownership.household, $0), key: ownership.recovery)
        }
    }

    private func signed(_ revocation: MemberRevocation, by key: [UInt8], _ ownership: Ownership) -> Bool {
        verifier.isValid(signature: revocation.signature, message: Membership.revocationMessage(household: ownership.household, revocation), key: key)
    }

    /// The index of the first former owner's term (one a transfer ended) whose owner signed
    /// `revocation` (not of itself), or nil.
    private func formerOwnerSigning(_ revocation: MemberRevocation, _ ownership: Ownership) -> Int? {
        ownership.terms.indices.first { i in
            ownership.terms[i].endedBy != nil && ownership.terms[i].owner != revocation.member
                && signed(revocation, by: ownership.terms[i].owner, ownership)
        }
    }

    /// Every owner transfer stored here, encoded.
    private func knownTransfers() throws -> Set<[UInt8]> {
        try store.read { r in
            var keys = Set<[UInt8]>()
            try r.scan(Tables.transfers) { _, value in keys.insert(value); return true }
            return keys
        }
    }

    /// Whether this device's member `member` is revoked as this replica knows it: `members()`
    /// lists it revoked, or a refusal placed its revocation in the owner's log and it holds there
    /// by this log's ownership (``LearnedRevocation/placed``). What attentionRequired asks.
    public func isRevokedHere(_ member: [UInt8]) throws -> Bool {
        try members().contains { $0.key == member && $0.isRevoked } || holdsPlacedRevocation(of: member)
    }

    /// Whether the revocation of `member` that a refusal placed (kept in the device state)
    /// holds by this log's ownership now (``placedRevocationHolds(_:version:key:_:_:_:_:)``). Its
    /// head was checked when it was kept.
    public func holdsPlacedRevocation(of member: [UInt8]) throws -> Bool {
        guard let stored = try device.setting(Self.placementSetting(member)), let bytes = Hex.decode(stored),
              case .success(let evidence) = Self.decodeEvidence(bytes, of: member) else { return false }
        return try placementHolds(evidence, checkingHead: false)
    }

    /// Whether `evidence` places its revocation where it holds in this log, with a head that
    /// verifies (unless `checkingHead` is false: a placement this replica checked and kept).
    private func placementHolds(_ evidence: Evidence, checkingHead: Bool = true) throws -> Bool {
        guard let placement = evidence.placement, let household = try store.read({ try Self.pinnedHousehold($0)?.id }),
              let carrier = checkingHead ? provenCarrier(placement, of: evidence.revocation, household: household)
                                         : Self.placedCarrier(placement, of: evidence.revocation, household: household)
        else { return false }
        return try store.read { r in
            try Self.placedRevocationHolds(carrier.change, version: carrier.version, key: placement.key, evidence.revocation, r, verifier)
        }
    }

    /// Keeps `evidence` in the device state when its placement holds here
    /// (``placementHolds(_:)``); returns whether it does.
    private func place(_ evidence: Evidence, of member: [UInt8]) throws -> Bool {
        guard let placement = evidence.placement, try placementHolds(evidence) else { return false }
        let encoded = RecordCodec.encodeOperation(.revoke(evidence.revocation)) + placement.encoded()
        try device.setSetting(Self.placementSetting(member), Hex.encode(encoded))
        return true
    }

    /// The device setting that keeps the placed revocation of `member`, hex-encoded.
    public static func placementSetting(_ member: [UInt8]) -> String {
        "placedRevocation." + Hex.encode(member)
    }

    private func countForged(_ reason: String) throws -> LearnedRevocation {
        .forged(try noteForged(reason))
    }

    /// Counts a refusal's evidence or answer that did not verify; returns `reason`.
    private func noteForged(_ reason: String) throws -> String {
        let count = Int(try device.setting(Self.forgedRefusalsSetting) ?? "0") ?? 0
        try device.setSetting(Self.forgedRefusalsSetting, String(count + 1))
        return reason
    }
}

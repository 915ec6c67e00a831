import KidLedgerDomain
import KidLedgerReplica

/// The membership a change log says, restated from the log alone (no replica code) as
/// docs/SECURITY.md states the rule: the owner terms (the genesis owner, then each epoch's winning
/// owner transfer, the smaller hash of its encoded operation winning), the grants and revocations
/// an owner whose term covers their change signed, who wrote each origin (its claim at sequence
/// 1), and where each origin's changes stop counting. The ``RevocationChecker`` compares every
/// replica against it; the ``ReferenceModel`` rejects changes by it.
struct LogMembership {
    /// The household the genesis names (zero for a household without an owner).
    var household = RecordID(high: 0, low: 0)
    /// Each term's owner, oldest first (empty for a household without an owner).
    var owners: [[UInt8]] = []
    /// The transfer that ended each term but the last.
    var termEnds: [OwnerTransfer] = []
    /// Every valid-looking owner transfer in the log (each counted once).
    var transferCount = 0
    /// Who wrote each origin: the smallest key a claim at the origin's sequence 1 names.
    var claimant: [ReplicaID: [UInt8]] = [:]
    /// The members a grant that counts names.
    var granted = Set<[UInt8]>()
    /// The grants and revocations no owner's term covers (and revocations of the current owner),
    /// the owner transfers the genesis's recovery key did not sign, and (given the genesis) every
    /// other creation record.
    var forged = 0
    /// For each revoked member, the pointwise minimum of its counting revocations' `seen` vectors.
    var revokedSeen: [[UInt8]: VersionVector] = [:]
    /// Where each origin's changes stop counting: the revoked claimant's cut; 0 in an owned
    /// household for an origin no claim names, whose claimant never owned it and is not
    /// granted, or whose claimant floods (``flooding``); none for the others.
    var cuts: [ReplicaID: UInt64] = [:]
    /// The member keys over a per-member limit: claimants of more than
    /// `Limits.originsPerMemberMax` origins, or whose changes create more than
    /// `Limits.childrenPerMemberMax` distinct children (whether the rule lets them count or not).
    var flooding = Set<[UInt8]>()

    var isOwned: Bool { !owners.isEmpty }

    // long-function: one replay of the log's membership records in log order, as the rules state them.
    /// `genesis`: the household's one genesis (the one its replicas pin: issue 39); any other
    /// creation record in the log is forged. Without it, the log's owned genesis (a log with one).
    init(_ log: [Change], verifier: any SignatureVerifier, genesis: Household? = nil) {
        // Owner transfers, keyed as the product orders them (epoch, then the smaller hash of the
        // encoded operation): each epoch's first is the next owner's term. Only those the
        // genesis's recovery key signed.
        var transfers: [(key: [UInt8], transfer: OwnerTransfer)] = []
        var signed: [OwnerTransfer] = []
        var recovery: [UInt8] = []
        var origins = Set<ReplicaID>()
        for change in log {
            origins.insert(change.origin)
            for op in change.operations {
                switch op {
                case .createHousehold(let h) where !h.owner.isEmpty && (genesis == nil || genesis == h):
                    owners = [h.owner]
                    household = h.id
                    recovery = h.recovery
                case .createHousehold:
                    if genesis != nil { forged += 1 }  // not the pinned genesis (a thief's second one)
                case .transferOwner(let t):
                    signed.append(t)
                case .claim(let c) where c.origin == change.origin && change.sequence == 1:
                    if let existing = claimant[c.origin], !c.member.lexicographicallyPrecedes(existing) { continue }
                    claimant[c.origin] = c.member
                default: break
                }
            }
        }
        for t in signed {
            guard !recovery.isEmpty,
                  verifier.isValid(signature: t.signature, message: Membership.transferMessage(household: household, t), key: recovery) else {
                forged += 1
                continue
            }
            var key = withUnsafeBytes(of: t.epoch.bigEndian, Array.init)
            key += SHA256.hash(RecordCodec.encodeOperation(.transferOwner(t))).prefix(16)
            if !transfers.contains(where: { $0.key == key }) { transfers.append((key, t)) }
        }
        transferCount = transfers.count
        if isOwned {
            var lastEpoch: [UInt8]?
            for t in transfers.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) where Array(t.key.prefix(8)) != lastEpoch {
                owners.append(t.transfer.newOwner)
                termEnds.append(t.transfer)
                lastEpoch = Array(t.key.prefix(8))
            }
        }
        // Versions of each change, and each origin's lowest sequence holding several: a version
        // vector entry (a transfer's `seen`, a revocation's cut) covers the origin only below it.
        var versions: [ReplicaID: [UInt64: Int]] = [:]
        for change in log { versions[change.origin, default: [:]][change.sequence, default: 0] += 1 }
        let lowestFork = versions.compactMapValues { counts in counts.filter { $0.value > 1 }.keys.min() }
        func covers(_ seen: VersionVector, _ origin: ReplicaID) -> UInt64 {
            min(seen[origin] ?? 0, lowestFork[origin].map { $0 - 1 } ?? .max)
        }
        // A grant or revocation counts when the owner of a term that covers its change signed it:
        // the current term, or one whose ending transfer saw the change: named it exactly (a
        // transfer with seen changes), or (an older one) its `seen` covers the change below the
        // origin's lowest fork. A revocation of the current owner never counts. The rest are
        // forged on every replica (Ownership.signedByOwner).
        let owners = owners, termEnds = termEnds, household = household
        func saw(_ end: OwnerTransfer, _ change: Change) -> Bool {
            guard let named = end.seenChanges else { return change.sequence <= covers(end.seen, change.origin) }
            return change.sequence <= end.seen[change.origin] ?? 0
                && named.contains(Membership.seenChangeKey(origin: change.origin, encodedChange: RecordCodec.encode(change)))
        }
        func signedInTerm(_ change: Change, _ message: [UInt8], _ signature: [UInt8]) -> Bool {
            owners.indices.contains { i in
                (i >= termEnds.count || saw(termEnds[i], change))
                    && verifier.isValid(signature: signature, message: message, key: owners[i])
            }
        }
        for change in log {
            for op in change.operations {
                switch op {
                case .grant(let g):
                    if signedInTerm(change, Membership.grantMessage(household: household, g), g.signature) {
                        granted.insert(g.member)
                    } else {
                        forged += 1
                    }
                case .revoke(let rv):
                    guard rv.member != owners.last,
                          signedInTerm(change, Membership.revocationMessage(household: household, rv), rv.signature) else {
                        forged += 1
                        continue
                    }
                    revokedSeen[rv.member] = revokedSeen[rv.member].map { Self.pointwiseMinimum($0, rv.seen) } ?? rv.seen
                // The relay's membership records count by the same rule (a losing recovery's epoch
                // record, a former owner's grant after its term: forged).
                case .relayGrant(let g):
                    if !signedInTerm(change, Membership.relayGrantMessage(household: household, g), g.signature) { forged += 1 }
                case .relayRevoke(let rv):
                    if !signedInTerm(change, Membership.relayRevocationMessage(household: household, rv), rv.signature) { forged += 1 }
                case .relayEpoch(let e):
                    if !signedInTerm(change, Membership.relayEpochMessage(household: household, e), e.signature) { forged += 1 }
                default: break
                }
            }
        }
        var originCounts: [[UInt8]: Int] = [:]
        for key in claimant.values { originCounts[key, default: 0] += 1 }
        var created: [[UInt8]: Set<RecordID>] = [:]
        for change in log {
            guard let key = claimant[change.origin] else { continue }
            for case .createChild(let child) in change.operations { created[key, default: []].insert(child.id) }
        }
        // Versions of one change past `Limits.forkVersionsPerSequenceMax` (every replica keeps
        // one more than the limit, the same ones): the origin's claimant floods.
        let forkFlooders = versions.filter { $0.value.values.contains { $0 > Limits.forkVersionsPerSequenceMax } }.keys.compactMap { claimant[$0] }
        flooding = Set(originCounts.filter { $0.value > Limits.originsPerMemberMax }.keys)
            .union(created.filter { $0.value.count > Limits.childrenPerMemberMax }.keys)
            .union(forkFlooders)
        for origin in origins {
            guard let key = claimant[origin] else {
                if isOwned { cuts[origin] = 0 }
                continue
            }
            if isOwned, !owners.contains(key), !granted.contains(key) { cuts[origin] = 0; continue }
            if isOwned, flooding.contains(key) { cuts[origin] = 0; continue }
            if let cut = revokedSeen[key] { cuts[origin] = covers(cut, origin) }
        }
    }

    /// The cut of two revocations of one member: the smaller entry of each origin (an origin one
    /// of them lacks is cut at 0, and left out).
    static func pointwiseMinimum(_ a: VersionVector, _ b: VersionVector) -> VersionVector {
        var merged: VersionVector = [:]
        for (origin, v) in a { if let w = b[origin], min(v, w) > 0 { merged[origin] = min(v, w) } }
        return merged
    }

    /// Whether `change` comes after its origin's cut (it counts nowhere).
    func rejects(_ change: Change) -> Bool {
        cuts[change.origin].map { change.sequence > $0 } ?? false
    }
}

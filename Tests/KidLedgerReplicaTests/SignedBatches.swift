import KidLedgerDomain
@testable import KidLedgerReplica

/// Signed chain heads for changes built by hand (docs/SECURITY.md, "Signed chain heads"): per
/// origin, the key its first change's claim names (or `keys` gives) signs a head at every change,
/// over the hash chain of that origin's changes in `changes` (from sequence 1, one version per
/// sequence; a second version at a sequence gets no head), as ``TestVerifier`` checks.
func handSignedHeads(for changes: [Change], household: RecordID, keys: [ReplicaID: [UInt8]] = [:]) -> [SignedHead] {
    var byOrigin: [ReplicaID: [Change]] = [:]
    for change in changes { byOrigin[change.origin, default: []].append(change) }
    var heads: [SignedHead] = []
    for (origin, ofOrigin) in byOrigin {
        let sorted = ofOrigin.sorted { $0.sequence < $1.sequence }
        let claimed = sorted.first { $0.sequence == 1 }?.operations.lazy.compactMap { op -> [UInt8]? in
            if case .claim(let c) = op { return c.member }
            return nil
        }.first
        guard let key = keys[origin] ?? claimed else { continue }
        var link = Replica.zeroLink
        var sequence: UInt64 = 0
        for change in sorted where change.sequence == sequence + 1 {
            link = PlainPreparer().link(after: link, onlyVersion: Keys.version(RecordCodec.encode(change)))
            sequence = change.sequence
            let message = Membership.headMessage(household: household, origin: origin, sequence: sequence, chain: link)
            heads.append(SignedHead(origin: origin, sequence: sequence, signature: TestVerifier.sign(message, key: key)))
        }
    }
    return heads
}

extension Replica {
    /// `changes` applied with the heads their authors sign (``handSignedHeads(for:household:keys:)``
    /// over `all`, which holds every change of their origins from sequence 1; by default
    /// `changes` themselves), in the household this replica is pinned to (else the one a genesis
    /// among them creates).
    @discardableResult
    func applySigned(_ changes: [Change], among all: [Change]? = nil, keys: [ReplicaID: [UInt8]] = [:]) throws -> ApplyReport {
        let chains = all ?? changes
        let genesis = chains.lazy.flatMap(\.operations).compactMap { op -> RecordID? in
            if case .createHousehold(let h) = op { return h.id }
            return nil
        }.first
        let pinned = try store.read { try Replica.pinnedHousehold($0)?.id }
        let household = pinned ?? genesis ?? OwnedHousehold().id
        return try applyRemote(changes, heads: handSignedHeads(for: chains, household: household, keys: keys))
    }
}

import KidLedgerDomain
@testable import KidLedgerReplica

extension Replica {
    /// `changes` (built by hand) applied with the signed chain heads their authors would send
    /// (docs/SECURITY.md, "Signed chain heads"), as ``TestVerifier`` checks: per origin, the key its
    /// claim names (in its first change among `changes`, else the one this replica stores; `keys`
    /// overrides) signs a head at every change that continues this replica's chain of that origin
    /// (the chain it holds before the first of them, then each change in turn, one version per
    /// sequence), in the household this replica is pinned to (else the one a genesis among them
    /// creates).
    @discardableResult
    public func applySigned(_ changes: [Change], keys: [ReplicaID: [UInt8]] = [:]) throws -> ApplyReport {
        let genesis = changes.lazy.flatMap(\.operations).compactMap { op -> RecordID? in
            if case .createHousehold(let h) = op { return h.id }
            return nil
        }.first
        let household = try store.read { try Replica.pinnedHousehold($0)?.id } ?? genesis ?? OwnedHousehold().id
        var byOrigin: [ReplicaID: [Change]] = [:]
        for change in changes { byOrigin[change.origin, default: []].append(change) }
        var heads: [SignedHead] = []
        for (origin, ofOrigin) in byOrigin {
            let sorted = ofOrigin.sorted { $0.sequence < $1.sequence }
            let claimed = sorted.first { $0.sequence == 1 }?.operations.lazy.compactMap { op -> [UInt8]? in
                if case .claim(let c) = op { return c.member }
                return nil
            }.first
            guard let key = try keys[origin] ?? claimed ?? store.read({ try $0.get(Tables.claims, Keys.origin(origin)) }) else { continue }
            var sequence = sorted[0].sequence - 1
            guard var link = sequence == 0 ? Replica.zeroLink : try chain(origin, at: sequence) else { continue }
            for change in sorted where change.sequence == sequence + 1 {
                link = Replica.chainLink(after: link, onlyVersion: Keys.version(RecordCodec.encode(change)))
                sequence = change.sequence
                let message = Membership.headMessage(household: household, origin: origin, sequence: sequence, chain: link)
                heads.append(SignedHead(origin: origin, sequence: sequence, signature: TestVerifier.sign(message, key: key)))
            }
        }
        return try applyRemote(changes, heads: heads)
    }
}

import KidLedgerDomain
import KidLedgerReplica

/// The membership rule, judged by author: a revoked member's changes beyond its revocations' cut
/// (the pointwise minimum of their `seen` vectors) count nowhere, nor, in an owned household, do
/// the changes of an origin no claim names or whose claim names a key that is neither the owner
/// nor granted; so a transaction only such changes carried is absent from every replica. With
/// it, the owner the log's owner transfers name (by epoch, the smaller hash winning) on every
/// replica, equal membership everywhere, forged exactly the grants and revocations no owner's term
/// covers (and revocations of the current owner), and the rejected changes every replica
/// counts (those with ledger operations: a change of membership operations only rejects nothing).
final class RevocationChecker: Checker {
    /// For each acknowledged transaction, the local changes that carried it (an undo entry's id
    /// is derived from its original, so two replicas can both carry one), and the transactions in
    /// the order first acknowledged.
    private var carriers: [RecordID: [Carrier]] = [:]
    private var order: [RecordID] = []
    /// Where each origin's changes stop counting (``FinalStage/membership`` finds them).
    private var cuts: [ReplicaID: UInt64] = [:]
    /// How many changes of the converged log the rule rejects (every replica must count as many).
    private(set) var rejectedChanges = 0

    func committed(_ carrier: Carrier, acknowledging transactions: [RecordID]) {
        for id in transactions {
            if carriers[id] == nil { order.append(id) }
            carriers[id, default: []].append(carrier)
        }
    }

    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        switch stage {
        case .membership: return try membership(run)
        case .revocationRule: return try rule(run)
        default: return []
        }
    }

    /// Equal membership on every replica, no forged changes, as many rejected ones as the log
    /// says, and each member revoked exactly when the log says so.
    func membership(_ run: FinalRun) throws -> [String] {
        var failures: [String] = []
        let changeLog = run.logs.first
        let members = try run.members()
        // Who wrote each origin, who owns and who may write: read from the log, not from what
        // the replicas list.
        let said = LogMembership(changeLog, verifier: run.nodes[0].verifier, genesis: run.genesis)
        for (node, replica) in zip(run.nodes, run.replicas) {
            let ownership = try replica.ownership()
            if ownership?.owner != said.owners.last || (ownership?.transfers ?? 0) != said.transferCount {
                failures.append("\(node.name) names another owner than the log's owner terms say (\(said.transferCount) transfers)")
            }
        }
        cuts = said.cuts
        let expectedForged = said.forged
        let seen = said.revokedSeen
        // Equal membership everywhere (sorted by key: `members()` orders equal names arbitrarily),
        // but for the devices of a member over a limit: each replica stores the first of its
        // origins it receives (257, or 64 MiB), so they may hold different ones.
        let flooding = try run.replicas.reduce(into: Set<[UInt8]>()) { $0.formUnion(try $1.floodingMembers()) }
        func canonical(_ ms: [MemberSummary]) -> [MemberSummary] {
            ms.map { m in
                var m = m
                if flooding.contains(m.key) { m.devices = [] }
                return m
            }.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        }
        func rejected(_ log: [Change], cuts: VersionVector) -> Int {
            log.filter { change in
                change.operations.contains { !$0.isMembership } && (cuts[change.origin].map { change.sequence > $0 } ?? false)
            }.count
        }
        rejectedChanges = rejected(changeLog, cuts: cuts)
        for (index, (node, replica)) in zip(run.nodes, run.replicas).enumerated() {
            // A replica holding other origins of such a member than the first: what its own log says.
            var expectedForged = expectedForged, expectedRejected = rejectedChanges
            if !run.logs.holdsFirst(index) {
                let own = try run.logs.decoded(index)
                let its = LogMembership(own, verifier: run.nodes[0].verifier, genesis: run.genesis)
                expectedForged = its.forged
                expectedRejected = rejected(own, cuts: its.cuts)
                cuts.merge(its.cuts) { first, _ in first }
            }
            if canonical(try replica.members()) != canonical(members) { failures.append("\(node.name) lists other members than r0") }
            let counts = try replica.membershipCounts()
            if counts.forged != expectedForged {
                var reasons: [String] = []
                try replica.store.read { r in
                    try r.scan(Tables.forged) { key, value in
                        reasons.append("\(key.prefix(16).map { String($0, radix: 16) }.joined()): \(String(decoding: value, as: UTF8.self))")
                        return true
                    }
                }
                failures.append("\(node.name) forged: " + reasons.prefix(3).joined(separator: "; "))
            }
            if counts.forged != expectedForged || counts.rejected != expectedRejected {
                failures.append("\(node.name) counts \(counts.forged) forged and \(counts.rejected) rejected changes, expected \(expectedForged) and \(expectedRejected)")
            }
        }
        for node in run.nodes {
            let key = node.member.publicKey.bytes
            let revoked = members.first { $0.key == key }?.isRevoked ?? false
            if revoked != (seen[key] != nil) { failures.append("\(node.name) revoked=\(revoked) but the log says otherwise") }
        }
        return failures
    }

    /// The rule on transactions: those only revoked members' changes beyond the cut carried are
    /// absent everywhere; they, and those a change straddling the cut carried, are the run's
    /// ``FinalRun/rejected``. A carrier change that no replica holds any more was lost with a
    /// stale restore's files, unless another version at its position carries the transaction.
    func rule(_ run: FinalRun) throws -> [String] {
        var failures: [String] = []
        let held = run.logs.held
        var rejected = Set<RecordID>()
        let cuts = cuts
        /// Whether another version at one of `c`'s positions that the cut lets count carries
        /// `id`: the hostile member's same-id conflict sends its change with the operations in
        /// another order in place of the one it made (which a stale restore may then lose).
        var byPosition: [ReplicaID: [UInt64: [Change]]]?  // the union of the logs, built when first needed
        func anotherVersionCarries(_ id: RecordID, _ c: Carrier) -> Bool {
            if byPosition == nil {
                var index: [ReplicaID: [UInt64: [Change]]] = [:]
                for change in run.logs.union { index[change.origin, default: [:]][change.sequence, default: []].append(change) }
                byPosition = index
            }
            guard let versions = byPosition?[c.origin] else { return false }
            return c.sequences.contains { sequence in
                (cuts[c.origin].map { sequence <= $0 } ?? true) && (versions[sequence] ?? []).contains { change in
                    change.operations.contains { if case .addTransaction(let t) = $0 { t.id == id } else { false } }
                }
            }
        }
        for id in order {
            let statuses = carriers[id, default: []].map { c -> Bool? in
                if c.changes.allSatisfy({ !held.contains($0) }) { return !anotherVersionCarries(id, c) }
                guard let v = cuts[c.origin] else { return false }
                if c.sequences.lowerBound > v { return true }
                if c.sequences.upperBound <= v { return false }
                return nil
            }
            if statuses.contains(where: { $0 == nil }) { rejected.insert(id); continue }  // straddles the cut: unchecked
            guard statuses.allSatisfy({ $0 == true }) else { continue }
            rejected.insert(id)
            for (node, replica) in zip(run.nodes, run.replicas) where try replica.containsTransaction(id) {
                failures.append("\(node.name) holds transaction \(id.tail), made by revoked r\(carriers[id]![0].node) after the revocation")
                break
            }
        }
        run.rejected = rejected
        let members = try run.members()
        run.log("membership: \(members.count) members, \(members.filter(\.isRevoked).count) revoked, \(rejectedChanges) changes rejected, \(rejected.count) transactions rejected")
        return failures
    }
}

import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity

/// A local change that carried an acknowledged transaction: who made it, under which origin, and
/// its sequences (one change almost always; a batch too large for one change spans several).
struct Carrier {
    let node: Int
    let origin: ReplicaID
    let sequences: ClosedRange<UInt64>
    /// The changes themselves: after a restore from a stale copy that nobody noticed, the same
    /// origin and sequences can be reused by other changes, so only these say whether it is held.
    let changes: [LoggedChange]
}

extension Simulator {
    /// Records the local changes `node` made since it held `old` of its own origin (its version
    /// vector entry then: ``ownSequence(_:)``); returns them as the carrier of whatever
    /// transactions they hold (nil when it made none). Only its own origin's entry and log are read.
    @discardableResult
    func recordLocalChanges(_ node: SimNode, after old: UInt64) throws -> Carrier? {
        guard let replica = node.replica else { return nil }
        let origin = replica.replicaID
        let new = try replica.heldSequence(of: origin)
        guard new > old else { return nil }
        let made = try replica.encodedChanges(of: origin, after: old).map(LoggedChange.init)
        for change in made { madeChanges.append((node.index, change)) }
        return Carrier(node: node.index, origin: origin, sequences: (old + 1)...new, changes: made)
    }

    /// How much of its own origin `node`'s running replica holds (0 while down): what
    /// ``recordLocalChanges(_:after:)`` takes before a local change.
    func ownSequence(_ node: SimNode) throws -> UInt64 {
        guard let replica = node.replica else { return 0 }
        return try replica.heldSequence(of: replica.replicaID)
    }

    // MARK: Account changes

    /// During the fault phase: a replica may switch to another account (and later back).
    func accountChangeTick(_ node: SimNode) throws {
        guard node.isUp else { return }
        if node.isFrozen {
            if chance(50) { switchBack(node); record(node.index, .accountBack) }
        } else if chance(parameters.accountChangePerMille) {
            try switchAway(node)
        }
    }

    /// The device signs in as another (fresh) account: frozen, its connections drop.
    func switchAway(_ node: SimNode) throws {
        node.identity = try share.identity(seed: drawBytes(Identity.seedByteCount))
        node.updateClaimSigner()
        count("accountChange")
        log("\(node.name) switches to account \(node.identity.publicKey.fingerprint): frozen (no changes, no sync)")
        record(node.index, .accountSwitch)
        diagram?.mark(.accountSwitch, node.index, at: time.millis - startMillis)
        dropConnections(of: node, reason: "\(node.name) switched account")
    }

    /// The replica switches back to its member account and resumes syncing.
    func switchBack(_ node: SimNode) {
        node.identity = node.member
        node.updateClaimSigner()
        count("accountBack")
        log("\(node.name) switches back to account \(node.member.publicKey.fingerprint): syncing again")
        diagram?.mark(.accountBack, node.index, at: time.millis - startMillis)
    }

    // MARK: Revocation

    /// The owner (replica 0, when up and not switched away) revokes a random other member, having
    /// seen what its own version vector says. Races with the member's offline edits.
    func revoke() throws {
        guard nodes[0].replica != nil, !nodes[0].isFrozen else {
            log("r0 cannot revoke now (down or switched away)")
            return
        }
        try revoke(Int.random(in: 1..<nodes.count, using: &g))
    }

    /// The owner revokes `target`'s account with `seen` = its own version vector now; returns that
    /// vector, or nil when the owner is down or switched away.
    @discardableResult
    func revoke(_ target: Int) throws -> VersionVector? {
        let owner = nodes[0]
        guard let replica = owner.replica, !owner.isFrozen else { return nil }
        let seen = try replica.versionVector()
        let revocation = share.revocation(by: owner.member, of: nodes[target].member.publicKey.bytes, seen: seen,
                                          household: household, atMillis: time.millis + owner.skew)
        try replica.commitMembership([.revoke(revocation)])
        try recordLocalChanges(owner, after: seen[replica.replicaID] ?? 0)
        count("revocation")
        log("r0 revokes r\(target) having seen \(Self.describe(seen))")
        record(0, .revoke(target))
        diagram?.mark(.revocation, target, at: time.millis - startMillis)
        return seen
    }

    static func describe(_ vector: VersionVector) -> String {
        "[" + vector.keys.sorted().map { "\(String($0.rawValue, radix: 16).prefix(6)):\(vector[$0]!)" }.joined(separator: " ") + "]"
    }

    // MARK: Checks


    /// What the revocations in the (converged) change log say: for each revoked member key, the
    /// pointwise minimum of its revocations' `seen` vectors.
    static func revokedSeen(in log: [Change]) -> [[UInt8]: VersionVector] {
        var seen: [[UInt8]: VersionVector] = [:]
        for change in log {
            for case .revoke(let rv) in change.operations {
                guard let current = seen[rv.member] else { seen[rv.member] = rv.seen; continue }
                var merged: VersionVector = [:]
                for origin in Set(current.keys).union(rv.seen.keys) {
                    let v = min(current[origin] ?? 0, rv.seen[origin] ?? 0)
                    if v > 0 { merged[origin] = v }
                }
                seen[rv.member] = merged
            }
        }
        return seen
    }

    /// After convergence: the revocation rule, no change of any replica lost (a frozen one's
    /// included), and equal membership on every replica. Returns the transactions the revocation
    /// rule rejects (left out of the "no acknowledged transaction lost" check). `logs` are the
    /// replicas' whole change logs, in the same order.
    func membershipChecks(_ replicas: [Replica], logs: ChangeLogs) throws -> Set<RecordID> {
        let changeLog = logs.first
        let seen = Self.revokedSeen(in: changeLog)
        let members = try replicas[0].members()
        var claimant: [ReplicaID: [UInt8]] = [:]
        for m in members { for origin in m.devices { claimant[origin] = m.key } }
        // Where each origin's changes stop counting: the revoked claimant's cut (the min `seen` of
        // its revocations) at that origin; none for an origin whose claimant is not revoked.
        // Computed once per origin, not per change asked about (a lookup by the 32-byte key).
        var cuts: [ReplicaID: UInt64] = [:]
        for (origin, key) in claimant { if let cut = seen[key] { cuts[origin] = cut[origin] ?? 0 } }
        func cut(_ origin: ReplicaID) -> UInt64? { cuts[origin] }

        // Equal membership everywhere (sorted by key: `members()` orders equal names arbitrarily).
        func canonical(_ ms: [MemberSummary]) -> [MemberSummary] {
            ms.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        }
        let expectedRejected = changeLog.filter { change in cut(change.origin).map { change.sequence > $0 } ?? false }.count
        rejectedChanges = expectedRejected
        for (node, replica) in zip(nodes, replicas) {
            if canonical(try replica.members()) != canonical(members) { failures.append("\(node.name) lists other members than r0") }
            let counts = try replica.membershipCounts()
            if counts.forged != 0 {
                var reasons: [String] = []
                try replica.store.read { r in
                    try r.scan(Tables.forged) { key, value in
                        reasons.append("\(key.prefix(16).map { String($0, radix: 16) }.joined()): \(String(decoding: value, as: UTF8.self))")
                        return true
                    }
                }
                failures.append("\(node.name) forged: " + reasons.prefix(3).joined(separator: "; "))
            }
            if counts.forged != 0 || counts.rejected != expectedRejected {
                failures.append("\(node.name) counts \(counts.forged) forged and \(counts.rejected) rejected changes, expected 0 and \(expectedRejected)")
            }
        }
        for node in nodes {
            let key = node.member.publicKey.bytes
            let revoked = members.first { $0.key == key }?.isRevoked ?? false
            if revoked != (seen[key] != nil) { failures.append("\(node.name) revoked=\(revoked) but the log says otherwise") }
        }

        // No change a replica made is lost: every one is in its own log (a restore from a stale
        // copy excepted, for changes only the lost files held).
        // Converged replicas usually hold equal logs: each distinct log is made a set once.
        for node in nodes {
            let own = logs.set(node.index)
            var origins = Set<ReplicaID>()
            for (i, made) in madeChanges.enumerated() where made.node == node.index && !lostChanges.contains(i) {
                let change = made.logged
                origins.insert(change.origin)
                if !own.contains(change) {
                    failures.append("\(node.name) lost its own change \(String(change.origin.rawValue, radix: 16)):\(change.sequence)")
                    break
                }
            }
            let devices = Set(members.first { $0.key == node.member.publicKey.bytes }?.devices ?? [])
            if !origins.isSubset(of: devices) { failures.append("\(node.name) wrote under an origin not claimed for its account") }
        }

        // The revocation rule on transactions: those only revoked members' changes beyond the cut
        // carried are absent everywhere; the others are checked as acknowledged transactions.
        // A carrier change that no replica holds any more was lost with a stale restore's files.
        let held = logs.held
        var rejected = Set<RecordID>()
        for id in acknowledgedOrder {
            let statuses = carriers[id, default: []].map { c -> Bool? in
                if c.changes.allSatisfy({ !held.contains($0) }) { return true }
                guard let v = cut(c.origin) else { return false }
                if c.sequences.lowerBound > v { return true }
                if c.sequences.upperBound <= v { return false }
                return nil
            }
            if statuses.contains(where: { $0 == nil }) { rejected.insert(id); continue }  // straddles the cut: unchecked
            guard statuses.allSatisfy({ $0 == true }) else { continue }
            rejected.insert(id)
            for (node, replica) in zip(nodes, replicas) where try replica.containsTransaction(id) {
                failures.append("\(node.name) holds \(id), made by revoked r\(acknowledged[id]!) after the revocation")
                break
            }
        }
        log("membership: \(members.count) members, \(members.filter(\.isRevoked).count) revoked, \(expectedRejected) changes rejected, \(rejected.count) transactions rejected")
        return rejected
    }
}

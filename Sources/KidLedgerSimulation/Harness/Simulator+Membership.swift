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
    /// vector entry then: ``ownSequence(_:)``), which acknowledged `transactions` to the user, and
    /// tells the checkers; returns them as the carrier of those transactions (nil when it made no
    /// change). Only its own origin's entry and log are read.
    @discardableResult
    func recordLocalChanges(_ node: SimNode, after old: UInt64, acknowledging transactions: [RecordID] = []) throws -> Carrier? {
        guard let replica = node.replica else { return nil }
        let origin = replica.replicaID
        let new = try replica.heldSequence(of: origin)
        guard new > old else { return nil }
        let made = try replica.encodedChanges(of: origin, after: old).map(LoggedChange.init)
        let carrier = Carrier(node: node.index, origin: origin, sequences: (old + 1)...new, changes: made)
        for checker in checkers.all { checker.committed(carrier, acknowledging: transactions) }
        return carrier
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
}

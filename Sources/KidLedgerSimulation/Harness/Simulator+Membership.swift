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

    // MARK: Revocation and owner transfer

    /// The current owner (replica 0, or the member that last recovered ownership), when up and
    /// not switched away, revokes a random other member, having seen what its own version vector
    /// says. Races with the member's offline edits.
    func revoke() throws {
        let owner = nodes[currentOwner]
        guard owner.replica != nil, !owner.isFrozen else {
            log("\(owner.name) cannot revoke now (down or switched away)")
            return
        }
        let others = nodes.indices.filter { $0 != currentOwner }
        try revoke(others.randomElement(using: &g)!, by: currentOwner)
    }

    /// `signer` (the owner as its own replica sees it) revokes `target`'s account with `seen` =
    /// its own version vector now; returns that vector, or nil when `signer` is down, switched
    /// away, or not the owner on its own replica (the CLI's `revoke` refuses then).
    @discardableResult
    func revoke(_ target: Int, by signer: Int = 0) throws -> VersionVector? {
        let owner = nodes[signer]
        guard let replica = owner.replica, !owner.isFrozen, try replica.ownership()?.owner == owner.member.publicKey.bytes else { return nil }
        let seen = try replica.versionVector()
        let cut = try replica.cut(of: nodes[target].member.publicKey.bytes)
        let revocation = share.revocation(by: owner.member, of: nodes[target].member.publicKey.bytes, seen: cut,
                                          household: household, atMillis: time.millis + owner.skew)
        if let relay, try relayGranted(replica, relay) {
            // While a relay is granted the revocation carries a new epoch (the CLI's `revoke`).
            try replica.commitMembership([.revoke(revocation)], rotatingRelayEpochAs: owner.member, using: &relayG)
        } else {
            try replica.commitMembership([.revoke(revocation)])
        }
        if let carrier = try recordLocalChanges(owner, after: seen[replica.replicaID] ?? 0) {
            revocationChanges.append((target, carrier.origin, carrier.sequences.upperBound))
        }
        revokedNodes.insert(target)
        if target == hostile?.node { hostile!.cut = hostile!.cut.map { LogMembership.pointwiseMinimum($0, cut) } ?? cut }
        count("revocation")
        log("\(owner.name) revokes r\(target) having seen \(Self.describe(seen))")
        record(signer, .revoke(target))
        diagram?.mark(.revocation, target, at: time.millis - startMillis)
        return seen
    }

    /// The household's recovery secret, held by the simulator as the family holds it on paper:
    /// derived from the seed alone (no draw from the run's generator).
    static func recoveryIdentity(seed: UInt64, share: SeedShare) throws -> Identity {
        var generator = SplitMix64(seed: seed ^ 0x5EC0_7E5E_C0DE_0001)
        var bytes: [UInt8] = []
        while bytes.count < Identity.seedByteCount { withUnsafeBytes(of: generator.next().littleEndian) { bytes += $0 } }
        return try share.identity(seed: Array(bytes.prefix(Identity.seedByteCount)))
    }

    /// During the fault phase: a random member that is not revoked and holds every revocation
    /// the run made recovers ownership (the family decides the owner laptop is lost). Holding
    /// them keeps the run's revocations valid: one the transfer does not cover was signed by a
    /// former owner after its term, and is forged everywhere (the product's rule; docs/SECURITY.md).
    func recover() throws {
        var candidates: [SimNode] = []
        let stopped = stoppedNodes
        // The hostile member never gets the recovery secret (it would be the owner, and its grants valid).
        for node in nodes where node.index != currentOwner && !revokedNodes.contains(node.index) && node.isUp && !node.isFrozen
            && node.index != hostile?.node {
            let vector = try node.versionVector()
            let held = revocationChanges.filter { stopped.contains($0.target) }
            guard held.allSatisfy({ (vector[$0.origin] ?? 0) >= $0.sequence }) else { continue }
            // Nor without the relay's grant: one the transfer does not cover is forged everywhere.
            if let relay, relay.owner != nil, let replica = node.replica, try !relayGranted(replica, relay) { continue }
            candidates.append(node)
        }
        guard let node = candidates.randomElement(using: &g) else {
            log("no member can recover ownership now (down, switched away, revoked, or lacking a revocation)")
            return
        }
        if try recover(node) == nil { log("\(node.name) cannot recover ownership now") }
    }

    /// `node`'s member recovers ownership with the recovery secret
    /// (``Replica/transferOwnership(to:recoveryKey:atMillis:sign:)``, covering its version vector
    /// now); the previous owner's key is powerless for what it did not see. Returns the transfer's
    /// epoch, or nil when the node is down, switched away, revoked as it knows, or already owner.
    @discardableResult
    func recover(_ node: SimNode) throws -> UInt64? {
        guard let replica = node.replica, !node.isFrozen, try !node.listsItselfRevoked(),
              try replica.ownership()?.owner != node.member.publicKey.bytes else { return nil }
        let before = try ownSequence(node)
        let transfer: OwnerTransfer
        if let relay, try relayGranted(replica, relay) {
            transfer = try replica.transferOwnership(to: node.member, recoveryKey: recovery.publicKey.bytes, atMillis: time.millis + node.skew,
                                                     sign: { share.sign($0, by: recovery) }, using: &relayG)
        } else {
            transfer = try replica.transferOwnership(to: node.member.publicKey.bytes, recoveryKey: recovery.publicKey.bytes,
                                                     atMillis: time.millis + node.skew) { share.sign($0, by: recovery) }
        }
        try recordLocalChanges(node, after: before)
        currentOwner = node.index
        count("ownerTransfer")
        log("\(node.name) recovers ownership with the recovery secret (epoch \(transfer.epoch)) having seen \(Self.describe(transfer.seen))")
        record(node.index, .recover)
        return transfer.epoch
    }

    static func describe(_ vector: VersionVector) -> String {
        "[" + vector.keys.sorted().map { "\(String($0.rawValue, radix: 16).prefix(6)):\(vector[$0]!)" }.joined(separator: " ") + "]"
    }
}

import KidLedgerDomain
import KidLedgerReplica
import KidLedgerProtocol

/// One simulated connection between two replicas, each end running a real ``SyncSession``.
final class SimConnection {
    let id: Int
    let ends: [Int]
    // Used by the simulator's one thread only (run-time exclusivity checks left out, like the
    // simulator's own state).
    @exclusivity(unchecked) var sessions: [SyncSession?]
    @exclusivity(unchecked) var lastDelivery: [Int64] = [0, 0]
    @exclusivity(unchecked) var finished: [Bool] = [false, false]
    @exclusivity(unchecked) var deliveries = 0

    init(id: Int, ends: [Int], sessions: [SyncSession?]) {
        self.id = id
        self.ends = ends
        self.sessions = sessions
    }

    func side(of node: Int) -> Int { ends[0] == node ? 0 : 1 }

    /// Whether this connection joins exactly `a` and `b`: `Set(ends) == Set([a, b])`, without
    /// building two sets per open connection on every gossip tick.
    func joins(_ a: Int, _ b: Int) -> Bool {
        ends.contains(a) && ends.contains(b) && ends.allSatisfy { $0 == a || $0 == b }
    }
}

extension Simulator {
    /// Whether `a` and `b` are neighbours: always, but in a line, where they must be next to each
    /// other or have only revoked replicas between them (the family stops carrying a revoked
    /// laptop around, and the line closes up around it).
    func adjacent(_ a: Int, _ b: Int) -> Bool {
        guard parameters.lineTopology else { return true }
        let d = abs(a - b)
        if d == 1 { return true }
        guard d > 1, !revokedNodes.isEmpty else { return false }
        return (min(a, b) + 1..<max(a, b)).allSatisfy { revokedNodes.contains($0) }
    }

    func canTalk(_ a: Int, _ b: Int) -> Bool {
        if !adjacent(a, b) { return false }
        if !isolatedPairs.isEmpty && isolatedPairs.contains(min(a, b) * 64 + max(a, b)) { return false }
        return partitioned.contains(a) == partitioned.contains(b)
    }

    func changePartition() {
        // A member lagging with the hostile one stays partitioned a while (``revokeHostile()``).
        if let until = hostile?.lagUntil, time.millis < until { return }
        if partitioned.isEmpty {
            let size = Int.random(in: 1...max(1, nodes.count - 1), using: &g)
            var members = Array(0..<nodes.count)
            members.shuffle(using: &g)
            partition(Set(members.prefix(size)))
        } else {
            partitioned.removeAll()
            count("heal")
            record(nil, .heal)
            log("partition healed")
        }
    }

    /// Cuts `members` off from the rest (dropping the connections across).
    func partition(_ members: Set<Int>) {
        partitioned = members
        count("partition")
        record(nil, .partition(partitioned.sorted()))
        log("partition \(partitioned.sorted().map { "r\($0)" }.joined(separator: ",")) | rest")
        for id in connections.keys.sorted() {
            let c = connections[id]!
            if !canTalk(c.ends[0], c.ends[1]) { drop(connection: id, reason: "partition") }
        }
    }

    func gossip(from node: SimNode) throws {
        guard node.isUp, !node.isFrozen else { return }
        // The daemon pays the allowance periods due before it gossips (``payAllowances(_:)``).
        try payAllowancesRecorded(node)
        if relay != nil { try relayTick(node) }
        let candidates = nodes.indices.filter { $0 != node.index && adjacent($0, node.index) }
        guard let peer = candidates.randomElement(using: &g) else { return }
        if connections.values.contains(where: { $0.joins(node.index, peer) }) { return }
        guard canTalk(node.index, peer), nodes[peer].isUp else {
            log("\(node.name) → r\(peer) unreachable")
            return
        }
        guard !nodes[peer].isFrozen else {
            log("\(node.name) → r\(peer) refused: its account is switched")
            return
        }
        if let refusal = try handshake(node, nodes[peer]) {
            log("\(node.name) → r\(peer) \(refusal)")
            return
        }
        let id = nextConnection
        nextConnection += 1
        let initiator = SyncSession(role: .initiator, replica: node.replica!, household: household)
        let responder = SyncSession(role: .responder, replica: nodes[peer].replica!, household: household)
        let connection = SimConnection(id: id, ends: [node.index, peer], sessions: [initiator, responder])
        connections[id] = connection
        log("c\(id) \(node.name) → r\(peer) open")
        try perform(responder.start(), connection: connection, side: 1)
        try perform(initiator.start(), connection: connection, side: 0)
        queue.schedule(at: time.millis + Self.idleMillisMax, .idleCheck(connection: id, lastSeen: 0))
    }

    /// The secure channel's handshake of `initiator` with `responder`: nil when it is established,
    /// else why not. In attentionRequired a laptop serves nobody, but one revoked as it knows
    /// still asks its peers in (the CLI's daemon and sync: a peer that holds the revocation void,
    /// after a recovery its owner had not seen, lets it in and the sync clears it). The initiator
    /// authorises the responder's key first, then the responder the initiator's, and a revoked
    /// member is refused with the revocation (``refuses(_:_:)``).
    func handshake(_ initiator: SimNode, _ responder: SimNode) throws -> String? {
        if try responder.listsItselfRevoked(), !ignoresRevocation(responder.index) {
            return "refused: \(responder.name) is in attentionRequired (it knows it is revoked)"
        }
        for (judge, peer) in [(initiator, responder), (responder, initiator)] where try refuses(judge, peer) {
            return "refused by \(judge.name): \(peer.name)'s membership was revoked"
        }
        return nil
    }

    /// The secure channel's authorisation by `judge` of `peer`'s key: when `judge` lists it as
    /// revoked, the handshake ends with a `revoked` frame carrying `judge`'s evidence (the
    /// CLI's `SyncDriver.revocationEvidence`: ``Replica/revocation(of:)``), and `peer` checks
    /// and records it as the CLI's `SyncDriver.learn` does (``Replica/learnRevocation(_:of:)``),
    /// keeping all its data. When `peer` holds the revocation void (a former owner signed it after
    /// the transfer that ended its term), it answers with those transfers and `judge` records them
    /// (``Replica/learnTransfers(_:)``), so the next handshake judges `peer` again. Returns whether
    /// `judge` refused.
    func refuses(_ judge: SimNode, _ peer: SimNode) throws -> Bool {
        let key = peer.identity.publicKey.bytes
        guard let replica = judge.replica, let refused = peer.replica, try judge.revokedKeys().contains(key) else { return false }
        count("refusal")
        if ignoresRevocation(peer.index) {
            log("\(judge.name) refuses \(peer.name): its membership was revoked; the hostile \(peer.name) ignores it")
            return true
        }
        guard let evidence = try replica.revocation(of: key) else {
            log("\(judge.name) refuses \(peer.name): its membership was revoked (no evidence to send)")
            return true
        }
        let before = try refused.versionVector()
        let learned = try refused.learnRevocation(evidence, of: key)
        let after = try refused.versionVector()
        if before.contains(where: { (after[$0.key] ?? 0) < $0.value }) {
            failures.append("\(peer.name) lost changes learning its revocation from \(judge.name)'s refusal")
        }
        log("\(judge.name) refuses \(peer.name): its membership was revoked; \(peer.name) learns it from the refusal: \(learned)")
        if learned == .recorded || learned == .placed { learnedFromRefusal.insert(peer.index) }
        if case .forged(let why) = learned { failures.append("\(peer.name) rejects \(judge.name)'s refusal evidence: \(why)") }
        try recordLocalChanges(peer, after: before[refused.replicaID] ?? 0)
        if learned == .void, let answer = try refused.transfersVoiding(evidence, of: key) {
            // The channel's `transfers` answer (the CLI's `SyncDriver.answer` and `learnAnswer`).
            count("refusalAnswered")
            let judged = try replica.heldSequence(of: replica.replicaID)
            let heard = try replica.learnTransfers(answer)
            log("\(peer.name) answers with the owner transfers that void it; \(judge.name) records them: \(heard)")
            if case .forged(let why) = heard { failures.append("\(judge.name) rejects \(peer.name)'s owner transfers: \(why)") }
            try recordLocalChanges(judge, after: judged)
        }
        return true
    }

    /// A connection that moves no bytes for this long is closed by both ends (a read timeout).
    static let idleMillisMax: Int64 = 5_000

    func idleCheck(connection id: Int, lastSeen: Int) {
        guard let c = connections[id] else { return }
        if c.deliveries == lastSeen {
            count("timeout")
            drop(connection: id, reason: "idle for \(Self.idleMillisMax) ms")
        } else {
            queue.schedule(at: time.millis + Self.idleMillisMax, .idleCheck(connection: id, lastSeen: c.deliveries))
        }
    }

    func deliver(_ bytes: [UInt8], connection id: Int, to side: Int, sentAt: Int64) throws {
        guard let c = connections[id], let session = c.sessions[side] else { return }
        c.deliveries += 1
        diagram?.message(from: c.ends[1 - side], to: c.ends[side], sent: sentAt - startMillis, delivered: time.millis - startMillis,
                          session: id)
        try perform(session.receive(bytes), connection: c, side: side)
    }

    func closed(connection id: Int, to side: Int) throws {
        guard let c = connections[id], let session = c.sessions[side] else { return }
        c.sessions[side] = nil
        _ = session.connectionClosed()
        log("c\(id) r\(c.ends[side]) sees the connection close")
        if c.sessions.allSatisfy({ $0 == nil }) { connections[id] = nil }
    }

    /// Ends a connection abruptly: both ends see it close (a crashed end just vanishes).
    func drop(connection id: Int, reason: String) {
        guard let c = connections[id] else { return }
        log("c\(id) dropped: \(reason)")
        for side in 0..<2 where c.sessions[side] != nil {
            if nodes[c.ends[side]].isUp {
                queue.schedule(at: time.millis + 1, .closed(connection: id, to: side))
            } else {
                c.sessions[side] = nil
            }
        }
        if c.sessions.allSatisfy({ $0 == nil }) { connections[id] = nil }
    }

    func perform(_ actions: [SessionAction], connection c: SimConnection, side: Int) throws {
        let from = nodes[c.ends[side]]
        let other = 1 - side
        for action in actions {
            switch action {
            case .send(let bytes) where hostile?.node == from.index:
                for frame in hostileFrames(bytes, connection: c) { send(frame, connection: c, to: other) }
            case .send(let bytes):
                send(bytes, connection: c, to: other)
            case .finished(let summary):
                log("c\(c.id) \(from.name) finished: sent \(summary.changesSent) applied \(summary.changesApplied)" + (summary.unauthenticatedReceived > 0 ? " unauthenticated \(summary.unauthenticatedReceived)" : "")
                    + (summary.heldBackReceived > 0 ? " heldBack \(summary.heldBackReceived)" : "") + " upToDate=\(summary.bothUpToDate)")
                c.finished[side] = true
                c.sessions[side] = nil
                if c.sessions.allSatisfy({ $0 == nil }) { connections[c.id] = nil }
            case .failed(let error):
                log("c\(c.id) \(from.name) failed: \(error)")
                c.sessions[side] = nil
                if c.sessions[other] != nil { queue.schedule(at: time.millis + jitter(parameters.delayMillisMax), .closed(connection: c.id, to: other)) }
                if c.sessions.allSatisfy({ $0 == nil }) { connections[c.id] = nil }
            }
        }
    }

    /// Hands bytes to the network: delay, and during the fault phase loss, duplication and reordering.
    func send(_ bytes: [UInt8], connection c: SimConnection, to side: Int) {
        guard canTalk(c.ends[0], c.ends[1]) else { drop(connection: c.id, reason: "partition"); return }
        if faultsOn && chance(parameters.lossPerMille) {
            count("loss")
            log("c\(c.id) lost \(bytes.count) bytes to r\(c.ends[side])")
            diagram?.lost(from: c.ends[1 - side], to: c.ends[side], at: time.millis - startMillis)
            return
        }
        var at = time.millis + Int64.random(in: delayMillisMin...parameters.delayMillisMax, using: &g)
        if faultsOn && chance(parameters.reorderPerMille) {
            count("reorder")
            log("c\(c.id) \(bytes.count) bytes to r\(c.ends[side]) may overtake")
        } else {
            at = max(at, c.lastDelivery[side])
            c.lastDelivery[side] = at
        }
        queue.schedule(at: at, .deliver(connection: c.id, to: side, bytes: bytes, sentAt: time.millis))
        if faultsOn && chance(parameters.duplicationPerMille) {
            count("duplication")
            log("c\(c.id) \(bytes.count) bytes to r\(c.ends[side]) duplicated")
            queue.schedule(at: at + Int64.random(in: 0...parameters.delayMillisMax, using: &g),
                           .deliver(connection: c.id, to: side, bytes: bytes, sentAt: time.millis))
        }
    }
}

import KidLedgerReplica

/// Skipping idle time (issue 21, point 8): a scenario's week apart with nothing to send is not
/// played as millions of gossip ticks that move nothing.
extension Simulator {
    /// The idle stretch worth skipping: longer than this many mean gossip intervals, and than
    /// ``idleSkipMillisMin``.
    static let idleSkipGossipIntervals: Int64 = 10
    /// A minute: shorter pauses are played tick by tick, so a scenario's seconds-apart steps keep
    /// the trace they had before skipping existed (a skip draws none of the random numbers the
    /// ticks would have drawn, so the message delays after it differ; the outcome does not).
    static let idleSkipMillisMin: Int64 = 60_000

    /// Whether the events that only tick (gossip, checks, and the deliveries, closes and read
    /// timeouts of connections that are gone) can be moved past an idle stretch: asked when a gossip
    /// tick is due at `now`. When every pair of replicas that can reach each other would open a
    /// session in which neither sends anything, and nothing else is queued for more than
    /// ``idleSkipGossipIntervals`` gossip intervals, every ticking event is moved forward by whole
    /// periods (its gossip interval, the checkpoint's 500 ms) to just before the next other event,
    /// and the connection events dropped. No random numbers are drawn for it. Scenario runs only:
    /// a seeded run's gossip ticks draw partitions during the fault phase, and it ends when quiet.
    /// Returns whether it skipped (the tick due at `now` is then queued again at its new time).
    @inline(never)
    func skipIdle(now: Int64, tick: Event) throws -> Bool {
        guard skipsIdle, scenario != nil, relay == nil, connections.isEmpty, !(faultsOn && parameters.partitionPerMille > 0) else { return false }
        let period = max(1, parameters.gossipIntervalMillis)
        let threshold = max(Self.idleSkipGossipIntervals * period, Self.idleSkipMillisMin)
        guard var next = queue.earliest(where: { !Self.ticks($0) }), next - now > threshold else { return false }
        // A daemon pays an allowance period at its first tick after the period starts: ticks are
        // not moved past that moment (``nextAllowanceDue()``).
        if let due = try nextAllowanceDue(), due < next {
            next = max(now, due)
            guard next - now > threshold else { return false }
        }
        guard try nothingToSend() else { return false }
        // Ticks resume two gossip intervals before the next event, keeping their phases.
        let resume = next - 2 * period
        func moved(_ at: Int64, by step: Int64) -> Int64 {
            at >= resume ? at : at + (resume - at + step - 1) / step * step
        }
        queue.retime { at, event in
            switch event {
            case .gossip: moved(at, by: period)
            case .check: moved(at, by: Self.checkMillis)
            case .deliver, .closed, .idleCheck: nil  // their connection is gone: they would do nothing
            default: at
            }
        }
        let at = moved(now, by: period)
        queue.schedule(at: at, tick)
        idleSkippedMillis += at - now
        log("idle: nothing to send between replicas that can reach each other; ticks skip to t=\(at - startMillis) (next event at t=\(next - startMillis))")
        return true
    }

    /// Events that only tick while idle (the connection events name a connection that is gone).
    static func ticks(_ event: Event) -> Bool {
        switch event {
        case .gossip, .check, .deliver, .closed, .idleCheck: true
        default: false
        }
    }

    /// Whether every gossip tick now would move nothing: for every two running replicas (not
    /// switched away) that can reach each other, the handshake admits both with no refusal (no
    /// revocation to learn), and each would send the other nothing, by the product's comparisons:
    /// `SyncSession` sends the changes `encodedChanges(notCoveredBy:)` lists for the peer's
    /// version vector, and re-chains when the vectors' hash chains differ (``SimNode/heads()``).
    func nothingToSend() throws -> Bool {
        let live = nodes.filter { $0.isUp && !$0.isFrozen }
        for a in live where try !a.listsItselfRevoked() {
            for b in live where b.index > a.index && canTalk(a.index, b.index) {
                if try b.listsItselfRevoked() { return false }
                if try a.revokedKeys().contains(b.member.publicKey.bytes) || b.revokedKeys().contains(a.member.publicKey.bytes) {
                    return false
                }
                guard let ha = a.heads(), ha == b.heads(), let ra = a.replica, let rb = b.replica else { return false }
                if try !sendsNothing(a, ra, to: b) || !sendsNothing(b, rb, to: a) { return false }
            }
        }
        return true
    }

    /// Whether `replica` (of `node`) would send `peer` nothing: `encodedChanges(notCoveredBy:
    /// limit: 1)` of `peer`'s vector is empty, as it is without reading the log when that vector
    /// covers `node`'s (no origin has anything to send; the nodes keep their vectors by stamp).
    func sendsNothing(_ node: SimNode, _ replica: Replica, to peer: SimNode) throws -> Bool {
        let theirs = try peer.versionVector()
        if try node.versionVector().allSatisfy({ (theirs[$0.key] ?? 0) >= $0.value }) { return true }
        return try replica.encodedChanges(notCoveredBy: theirs, limit: 1).isEmpty
    }
}

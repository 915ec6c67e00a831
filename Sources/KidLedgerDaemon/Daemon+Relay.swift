import KidLedgerDomain
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSystem
import KidLedgerTransport

extension Daemon {
    /// When each granted relay is due next and its backoff, by relay key (hex).
    struct RelaySchedule {
        var due: [String: Int64] = [:]
        var backoff: [String: Backoff] = [:]
        /// What this laptop held when each relay's last session ended.
        var vectorAtSession: [String: VersionVector] = [:]
        /// The owner's open invitations when each relay's last session ended (a new one lists its
        /// guest key at once: docs/RELAY-DESIGN.md, "Joining through the relay").
        var invitesAtSession: [String: [[UInt8]]] = [:]
    }

    /// The gossip loop's relay step, after the direct peers: one session with each granted relay
    /// that is due (on the interval, soon after a local change unless it is failing, with the
    /// direct peers' backoff after failures; docs/RELAY-DESIGN.md, "Paths"), or at once when this
    /// laptop holds changes the relay's held vector lacked after the last session and its ledger
    /// changed since (changes a direct peer brought, which the relay's other members need). The owner's laptop
    /// hands the relay a newer access list when the members' published keys changed, and syncs at
    /// once when its open invitations changed (a new invitation's guest key gets listed). Returns
    /// whether any session ran. Nothing in attentionRequired.
    func relayRound(_ replica: Replica, now: Int64, changeDue: Bool, schedule: inout RelaySchedule,
                    random: inout SystemRandomNumberGenerator) -> Bool {
        guard attention?(replica) == nil, let relays = try? replica.relays(), !relays.isEmpty else { return false }
        let me = identity.publicKey.bytes
        let isOwner = ((try? replica.members()) ?? []).contains { $0.isOwner && $0.key == me }
        var ran = false
        let vector = (try? replica.versionVector()) ?? [:]
        // The owner's open invitations (their guest keys go on its access lists).
        let inviteKeys = { isOwner ? ((try? replica.device.openInvites()) ?? []).map(\.key) : [] }
        let invites = inviteKeys()
        for relay in relays where !Daemon.stopRequested {
            let key = Hex.encode(relay.key)
            let failing = (schedule.backoff[key]?.attempt ?? 0) > 0
            let behind = vector != schedule.vectorAtSession[key] && RelayRecord.behind(replica, relay: relay, vector: vector)
            let invited = isOwner && schedule.invitesAtSession[key].map { $0 != invites } ?? false
            guard now >= schedule.due[key] ?? 0 || ((changeDue || behind || invited) && !failing) else { continue }
            let result = RelayDriver.sync(replica, identity: identity, relay: relay, owner: isOwner, now: clock.nowMillis())
            schedule.vectorAtSession[key] = try? replica.versionVector()
            schedule.invitesAtSession[key] = inviteKeys()
            ran = true
            log(RelayDriver.line(result))
            var b = schedule.backoff[key] ?? Backoff()
            if result.succeeded {
                b.reset()
                schedule.due[key] = Monotonic.millis() + Daemon.gossipIntervalMillis
            } else {
                schedule.due[key] = Monotonic.millis() + b.nextDelayMillis(using: &random)
            }
            schedule.backoff[key] = b
        }
        return ran
    }
}

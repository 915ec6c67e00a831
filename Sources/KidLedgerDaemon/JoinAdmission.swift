import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity

/// Letting a joiner in (docs/SYNC.md, "Joining"): the one admission both paths use, the daemon's
/// handshake that opened with an invitation's key and the owner's relay session that found a
/// join request in its mailbox (docs/RELAY-DESIGN.md, "Joining through the relay").
public enum JoinAdmission {
    /// Uses the invitation whose key is `invitation` up (a code works once) and records `joiner`
    /// as a member of `household`, granted by `owner`; while a relay is granted the same change
    /// carries a new relay epoch with a box for the joiner. Nil when admitted, else the reason to
    /// send it.
    public static func admit(_ joiner: PublicKey, invitation: [UInt8], owner: Identity, household: RecordID, in replica: Replica,
                             atMillis now: Int64) -> String? {
        guard (try? replica.device.consumeInvite(key: invitation)) == true else {
            return "this invitation is unknown here, already used or expired; ask for a new code"
        }
        let grant = owner.grant(joiner, name: "member \(joiner.fingerprint)", household: household, atMillis: now)
        var random = SystemRandomNumberGenerator()
        do { try replica.commitMembership([.grant(grant)], rotatingRelayEpochAs: owner, using: &random) } catch {
            return "could not record the new member: \(error)"
        }
        return nil
    }
}

import KidLedgerDomain
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity

/// The owner's side of a join through the relay (docs/RELAY-DESIGN.md, "Joining through the
/// relay"): guest keys on its access list, the join requests of its mailbox admitted as a direct
/// join is, and the new member's box posted to its guest key. Kept in the device state (never
/// synced): `relay.admitted.RELAYHEX` ("memberhex guesthex millis" lines: members admitted through
/// the relay whose own relay key the ledger does not name yet) and `relay.requests.RELAYHEX` (the
/// requests dropped already, so each is logged once); on a joiner's laptop `relay.guest.RELAYHEX`
/// (its guest key's seed, until its own relay key is listed).
extension RelayRecord {
    /// The quota of a guest key: its join request costs nothing; its first upload (the joiner's
    /// name and relay key) is a few hundred bytes.
    public static let guestQuotaBytes: UInt64 = 64 << 10
    /// How long a member admitted through the relay keeps its guest key listed while its own relay key is not published.
    public static let admittedKeepMillis: Int64 = 7 * 24 * 3_600_000

    static func admittedSetting(_ relay: [UInt8]) -> String { "relay.admitted." + Hex.encode(relay) }
    static func requestsSetting(_ relay: [UInt8]) -> String { "relay.requests." + Hex.encode(relay) }
    static func guestSetting(_ relay: [UInt8]) -> String { "relay.guest." + Hex.encode(relay) }

    /// Members admitted through `relay` that are current members and whose own relay key is not
    /// yet published, admitted less than ``admittedKeepMillis`` before `now`: member key, guest
    /// key, when. (A member revoked later no longer counts as publishing: its entry must be gone
    /// by then, which ``pruneAdmitted(_:relay:now:)`` sees to at every owner session.)
    static func admitted(_ replica: Replica, relay: [UInt8], now: Int64) throws -> [(member: [UInt8], guest: [UInt8], millis: Int64)] {
        let published = Set(try replica.relayMemberKeys(relay: relay).map(\.member))
        let current = Set(try replica.members().filter { !$0.isRevoked }.map(\.key))
        return (try replica.device.setting(admittedSetting(relay)) ?? "").split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 3, let member = Hex.decode(String(parts[0])), let guest = Hex.decode(String(parts[1])),
                  let millis = Int64(parts[2]), current.contains(member), !published.contains(member), now - millis < admittedKeepMillis else { return nil }
            return (member, guest, millis)
        }
    }

    /// Forgets the entries ``admitted(_:relay:now:)`` no longer returns, for good: a member that
    /// published its key, was revoked or waited too long never gets its guest key listed again.
    static func pruneAdmitted(_ replica: Replica, relay: [UInt8], now: Int64) throws {
        let raw = try replica.device.setting(admittedSetting(relay)) ?? ""
        let kept = try admitted(replica, relay: relay, now: now).map { "\(Hex.encode($0.member)) \(Hex.encode($0.guest)) \($0.millis)" }
        if kept.joined(separator: "\n") != raw { try replica.device.setSetting(admittedSetting(relay), kept.isEmpty ? nil : kept.joined(separator: "\n")) }
    }

    /// Adds `member`, admitted with `guest` at `now`, to those kept for `relay`.
    static func keepAdmitted(_ member: [UInt8], guest: [UInt8], in replica: Replica, relay: [UInt8], now: Int64) throws {
        try pruneAdmitted(replica, relay: relay, now: now)
        let kept = (try replica.device.setting(admittedSetting(relay)) ?? "").split(separator: "\n").filter { !$0.hasPrefix(Hex.encode(member)) }
        try replica.device.setSetting(admittedSetting(relay), (kept.map(String.init) + ["\(Hex.encode(member)) \(Hex.encode(guest)) \(now)"]).joined(separator: "\n"))
    }

    /// The guest key this laptop joined with through `relay`, while it keeps one.
    public static func guest(_ replica: Replica, relay: [UInt8]) -> Identity? {
        guard let hex = try? replica.device.setting(guestSetting(relay)), let seed = Hex.decode(hex) else { return nil }
        return try? Identity(seed: seed)
    }

    /// Keeps (or, with nil, forgets) the guest key this laptop joined with through `relay`.
    public static func keepGuest(_ guest: Identity?, in replica: Replica, relay: [UInt8]) throws {
        try replica.device.setSetting(guestSetting(relay), guest.map { Hex.encode($0.seed) })
    }
}

extension RelayDriver {
    /// Most join requests one session handles.
    static let joinRequestsMax = 16

    /// The guest keys the owner lists on `relay`: one per open invitation (derived from its key)
    /// and one per member admitted through the relay whose own key is not published yet.
    static func guestKeys(_ replica: Replica, relay: [UInt8], now: Int64) throws -> Set<RelayMemberKey> {
        var keys = Set<RelayMemberKey>()
        for invite in try replica.device.openInvites() {
            if let key = RelayMemberKey(bytes: try RelayGuestIdentity.derive(invitationKey: invite.key, relay: relay).publicKey.bytes) { keys.insert(key) }
        }
        try RelayRecord.pruneAdmitted(replica, relay: relay, now: now)
        for admitted in try RelayRecord.admitted(replica, relay: relay, now: now) {
            if let key = RelayMemberKey(bytes: admitted.guest) { keys.insert(key) }
        }
        return keys
    }

    /// The owner's posts to the members admitted through the relay: the current epoch's box of
    /// each, to its guest key's mailbox (what the joiner waits for).
    static func admittedPosts(_ replica: Replica, relay: [UInt8], now: Int64) throws -> [RelayMailboxPost] {
        guard let current = try replica.currentRelayEpoch() else { return [] }
        return try RelayRecord.admitted(replica, relay: relay, now: now).compactMap { admitted in
            guard let member = PublicKey(bytes: admitted.member), let box = current.record.box(for: member),
                  let recipient = RelayMemberKey(bytes: admitted.guest) else { return nil }
            return RelayMailboxPost(recipient: recipient, epoch: current.record.epoch, box: box)
        }
    }

    /// Admits the joiners whose requests are in the owner's mailbox (`boxes` of epoch ≥ 2^31): a
    /// request is matched to the open invitation whose guest key names its slot, opened with the
    /// owner's key, its signature checked, then admitted exactly as a direct join
    /// (``JoinAdmission``). One that does not open, verify or match is dropped with a sentence in
    /// `summary` (once per request). At most ``joinRequestsMax``. Returns the members admitted.
    static func admitJoiners(_ boxes: [RelayMailboxBox], replica: Replica, owner: Identity, relay: [UInt8], now: Int64,
                             summary: inout RelayMemberSummary) -> [PublicKey] {
        let requests = boxes.filter { $0.epoch >= RelayJoinRequest.slotMin }.prefix(joinRequestsMax)
        guard !requests.isEmpty, let household = try? replica.household()?.id else { return [] }
        let invites = (try? replica.device.openInvites()) ?? []
        let guests = invites.compactMap { invite in
            (try? RelayGuestIdentity.derive(invitationKey: invite.key, relay: relay)).map { (invitation: invite.key, guest: $0.publicKey) }
        }
        let admittedSlots = Set(((try? RelayRecord.admitted(replica, relay: relay, now: now)) ?? []).map { RelayJoinRequest.slot(of: $0.guest) })
        let dropped = Set(((try? replica.device.setting(RelayRecord.requestsSetting(relay))) ?? "").split(separator: "\n").map(String.init))
        var newlyDropped: [String] = []
        var admitted: [PublicKey] = []
        let fingerprint = PublicKey(bytes: relay)?.fingerprint ?? "?"
        for request in requests {
            let id = Hex.encode(Array(SHA256.hash(withUnsafeBytes(of: request.epoch.bigEndian, Array.init) + request.box).prefix(16)))
            guard !dropped.contains(id), !admittedSlots.contains(request.epoch) else { continue }
            var why = "it matches no open invitation (used or expired)"
            var done = false
            for candidate in guests where RelayJoinRequest.slot(of: candidate.guest.bytes) == request.epoch {
                do {
                    let joiner = try RelayJoinRequest.open(request.box, as: owner, household: household, guest: candidate.guest).joiner
                    if let refusal = JoinAdmission.admit(joiner, invitation: candidate.invitation, owner: owner, household: household,
                                                         in: replica, atMillis: now) {
                        why = refusal
                        continue
                    }
                    try? RelayRecord.keepAdmitted(joiner.bytes, guest: candidate.guest.bytes, in: replica, relay: relay, now: now)
                    admitted.append(joiner)
                    done = true
                    break
                } catch {
                    why = "\(error)"
                }
            }
            if !done {
                if summary.refusals.count < RelayMemberSummary.refusalsKept {
                    summary.refusals.append("relay \(fingerprint): a join request (slot \(request.epoch)) dropped: \(why)")
                }
                newlyDropped.append(id)
            }
        }
        if !newlyDropped.isEmpty {
            let kept = (Array(dropped) + newlyDropped).suffix(RelayStore.mailboxBoxesMax)
            try? replica.device.setSetting(RelayRecord.requestsSetting(relay), kept.joined(separator: "\n"))
        }
        return admitted
    }
}

import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerProtocol

/// Known peers and the sync status.
enum PeerCommands {
    static let all: [CLI.Command] = [peerAdd, peerRemove, peersList, status]

    /// Checks "HOST:PORT" (a port 1...65535 and a non-empty host).
    static func validAddress(_ text: String) throws -> String {
        let trimmed = Text.trimmed(text)
        guard let colon = trimmed.lastIndex(of: ":"), colon != trimmed.startIndex,
              let port = Int(trimmed[trimmed.index(after: colon)...]), (1...65_535).contains(port) else {
            throw CLIError.usage("\"\(text)\" is not HOST:PORT (for example 192.168.1.20:4717)")
        }
        return trimmed
    }

    static let peerAdd = CLI.Command(spec: CommandSpec(
        name: "peer add", synopsis: "HOST:PORT", summary: "remember a peer to sync with",
        details: "The daemon (`kidledger serve`) and `kidledger sync` sync with every known peer.", arguments: 1...1)) { ctx, args in
        let address = try validAddress(args.positionals[0])
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        let added = try replica.device.addPeer(address)
        ctx.say(added ? "Added peer \(address)." : "\(address) is already a peer.")
        ctx.emit(.object([("address", .string(address)), ("added", .bool(added))]))
    }

    static let peerRemove = CLI.Command(spec: CommandSpec(
        name: "peer remove", synopsis: "HOST:PORT", summary: "forget a peer", details: "", arguments: 1...1)) { ctx, args in
        let address = try validAddress(args.positionals[0])
        let replica = try ctx.openReplica()
        guard try replica.device.removePeer(address) else { throw CLIError("\(address) is not a peer (see `kidledger peers`)", code: .dataError) }
        ctx.say("Removed peer \(address).")
        ctx.emit(.object([("address", .string(address)), ("removed", .bool(true))]))
    }

    static let peersList = CLI.Command(spec: CommandSpec(
        name: "peers", synopsis: "", summary: "list known peers and their last sync", details: "")) { ctx, _ in
        let replica = try ctx.openReplica()
        var report = try StatusReport(replica: replica)
        report.time = ctx.time
        ctx.emit(.object([("peers", .array(report.peers.map(report.json))), ("dialsIn", .array(report.dialsIn.map(report.json)))]))
        if report.laptops.isEmpty {
            ctx.say("No peers yet: `kidledger serve` finds the household's other laptops on this network; elsewhere `kidledger peer add HOST:PORT`.")
            return
        }
        for p in report.peers { ctx.say(report.line(p)) }
        for d in report.dialsIn { ctx.say(report.line(d)) }
    }

    static let status = CLI.Command(spec: CommandSpec(
        name: "status", synopsis: "", summary: "sync state, pending changes, peers, digest",
        details: """
        States: synced (every known peer, and every member whose laptop syncs in with this laptop's daemon,
        has acknowledged, after its durable commit, everything this device holds), pending (some changes are
        not acknowledged yet, or there is no peer), offline (changes are pending and the last attempt to reach
        every peer failed; never with a laptop that syncs in: it is not reached, it comes), attentionRequired
        (mutations and sync are stopped until the account or membership is sorted out: switch back to the
        account this home joined with (`kidledger account switch NAME`), or ask the owner if this laptop was
        revoked). A member whose laptop runs no daemon (it only runs `kidledger sync`) is listed as one that
        dials in (`dialsIn` in --json), with its last sync and what it lacks.
        If a `join` was interrupted (the process killed before it finished), status says so: run the same
        `kidledger join CODE` again.
        Active children with one name up to case and accents (added on two laptops apart) get a note line
        (`sameNames` in --json: each group an array of child ids); rename one of them.
        """)) { ctx, _ in
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        var report = try StatusReport(replica: replica)
        report.time = ctx.time
        if let reason = try ctx.attentionReason(replica) {
            report.state = "attentionRequired"
            report.attention = reason
        } else if let update = try VersionGap.pending(replica) {
            // Changes go on; sync with a newer laptop waits for this laptop's update.
            report.state = "attentionRequired"
            report.updateRequired = update
        }
        report.interruptedJoin = ctx.joinInterrupted ? ctx.joinStagingPath : nil
        ctx.emit(report.jsonDocument())
        ctx.say(report.text())
    }
}

/// Everything `status` and `peers` show, computed once.
struct StatusReport {
    /// The most same-id conflicts `status` prints a line for.
    static let sameIDLinesMax = 5
    var state: String
    var pending: Int
    var peers: [PeerRecord]
    var vector: VersionVector
    var counts: ReplicaCounts
    var digest: Digest256
    var children: [ChildSummary]
    var membership: MembershipCounts
    var ownership: OwnershipSummary?
    var sameID: [SameIDConflict]
    /// Members whose laptops synced with this laptop's daemon and that this laptop has no address
    /// of (their laptops run no daemon): they dial in. Current members only, with their names.
    var dialsIn: [DialIn]
    /// The other laptops, one each: the peers' devices (``devices(_:)``), then the members that
    /// dial in.
    var laptops: [Laptop]
    var attention: String?
    /// A newer laptop refused this one's protocol (``VersionGap``): update kidledger here.
    var updateRequired: String?
    /// How times are shown (the local zone, or UTC with --utc).
    var time = LocalTime.utc
    /// The staging ledger a `join` into this home (a `join --replace`) left when it did not finish.
    var interruptedJoin: String?
    /// Sessions other laptops opened to this laptop's daemon that completed, and the last one's time.
    var inboundSessions = 0
    var lastInboundMillis: Int64 = 0

    init(replica: Replica) throws {
        vector = try replica.versionVector()
        peers = try replica.device.peers()
        counts = try replica.counts()
        digest = try replica.digest()
        children = try replica.children(includeArchived: true)
        membership = try replica.membershipCounts()
        ownership = try replica.ownership()
        sameID = try replica.sameIDConflicts()
        (inboundSessions, lastInboundMillis) = try replica.device.inboundTotals()
        (laptops, dialsIn) = try Self.laptops(peers, inbound: replica.device.inbound(), members: replica.members())
        for i in dialsIn.indices { dialsIn[i].versionGap = try VersionGap.refusedInbound(dialsIn[i].record.memberKey, in: replica) }
        let mine = vector
        let lacking = laptops.map { Self.lacks($0.last.receipt, mine) }
        pending = lacking.max() ?? changesMissing(from: [:], in: vector)
        if laptops.isEmpty {
            state = "pending"
        } else if lacking.allSatisfy({ $0 == 0 }) {
            state = "synced"
        } else if laptops.allSatisfy(\.unreachable) {
            state = "offline"
        } else {
            state = "pending"
        }
    }

    /// A member whose laptop dials in (``dialsIn``): its record and the name shown for it.
    struct DialIn {
        var record: InboundRecord
        var name: String
        /// Why its last session was refused: no common protocol version (``VersionGap``).
        var versionGap: String?
    }

    /// One other laptop as `status` counts it: its latest sync either way.
    struct Laptop {
        /// When it last synced with this laptop (0: never).
        var lastSyncMillis: Int64
        /// What that sync established (its receipt counts for `pending` and `synced`).
        var last: SyncOutcome
        /// Whether this laptop reaches it only by dialing and the last attempt at each of its
        /// addresses failed. A laptop that synced in is never unreachable: it gets the changes when
        /// it next syncs.
        var unreachable: Bool
    }

    /// The other laptops. One device under several addresses is one laptop: its receipt is the one
    /// of the address synced last, and it is reachable when any of its addresses was (a dead alias,
    /// such as the address a laptop had before the router changed it, keeps nothing pending). A
    /// member that synced in (`inbound`, current `members` only) is the laptop of a peer of its key,
    /// whose receipt its session's replaces when newer; else it is a laptop of its own that dials in.
    static func laptops(_ peers: [PeerRecord], inbound: [InboundRecord], members: [MemberSummary]) -> ([Laptop], [DialIn]) {
        let devices = Self.devices(peers)
        var laptops = devices.map { device in
            let latest = Self.latest(device)
            return Laptop(lastSyncMillis: latest.lastSuccessMillis, last: latest.outcome, unreachable: device.allSatisfy(Self.failedLast))
        }
        var dialsIn: [DialIn] = []
        let names = Dictionary(members.filter { !$0.isRevoked }.map { ($0.key, $0.name) }, uniquingKeysWith: { first, _ in first })
        for record in inbound {
            guard let name = names[record.memberKey] else { continue }
            guard let i = devices.firstIndex(where: { $0.contains { $0.memberKey == record.memberKey } }) else {
                dialsIn.append(DialIn(record: record, name: name))
                laptops.append(Laptop(lastSyncMillis: record.lastMillis, last: record.last, unreachable: false))
                continue
            }
            laptops[i].unreachable = false
            if record.lastMillis > laptops[i].lastSyncMillis {
                laptops[i].lastSyncMillis = record.lastMillis
                laptops[i].last = record.last
            }
        }
        return (laptops, dialsIn)
    }

    /// The known peers by device: the addresses of one member key (from a session or an
    /// announcement) or that reached one replica id belong together (in the order first listed);
    /// an address of no known device is one on its own.
    static func devices(_ peers: [PeerRecord]) -> [[PeerRecord]] {
        var groups: [[PeerRecord]] = []
        var byReplica: [ReplicaID: Int] = [:]
        var byMember: [[UInt8]: Int] = [:]
        for peer in peers {
            let replica = peer.lastSuccessMillis > 0 ? peer.peerReplica : nil
            let member = peer.memberKey.isEmpty ? nil : peer.memberKey
            if let i = member.flatMap({ byMember[$0] }) ?? replica.flatMap({ byReplica[$0] }) {
                groups[i].append(peer)
                if let member { byMember[member] = byMember[member] ?? i }
                if let replica { byReplica[replica] = byReplica[replica] ?? i }
                continue
            }
            if let member { byMember[member] = groups.count }
            if let replica { byReplica[replica] = groups.count }
            groups.append([peer])
        }
        return groups
    }

    /// The address of a device synced last (its receipt is the device's).
    static func latest(_ device: [PeerRecord]) -> PeerRecord {
        device.max { $0.lastSuccessMillis < $1.lastSuccessMillis } ?? device[0]
    }

    /// Whether the last attempt to reach `p` failed.
    static func failedLast(_ p: PeerRecord) -> Bool {
        !p.lastError.isEmpty && p.lastAttemptMillis > p.lastSuccessMillis
    }

    /// The address synced last of the device `p` reached, when it is another one (nil otherwise).
    func newerAlias(of p: PeerRecord) -> PeerRecord? {
        guard let device = Self.devices(peers).first(where: { $0.contains(p) }), device.count > 1 else { return nil }
        let latest = Self.latest(device)
        return latest == p ? nil : latest
    }

    /// How many changes `holder` has that `receipt` does not cover (clamped: a receipt stored
    /// before sequences were bounded may hold any number).
    static func lacks(_ receipt: VersionVector, _ holder: VersionVector) -> Int {
        changesMissing(from: receipt, in: holder)
    }

    func json(_ p: PeerRecord) -> JSON {
        .object([("address", .string(p.address)), ("replicaId", p.peerReplica.map { .string($0.description) } ?? .null),
                 ("lastSyncMillis", p.lastSuccessMillis > 0 ? .int(p.lastSuccessMillis) : .null),
                 ("lastAttemptMillis", p.lastAttemptMillis > 0 ? .int(p.lastAttemptMillis) : .null),
                 ("lastError", p.lastError.isEmpty ? .null : .string(p.lastError)),
                 ("theyLack", .int(Self.lacks(p.receipt, vector))),
                 ("weLack", .int(Self.lacks(vector, p.receipt))),
                 ("childrenAgreeing", .int(p.childrenAgreeing)),
                 ("childrenDiffering", .array(p.childrenDiffering.map { .string($0.description) })),
                 ("sameDeviceAs", newerAlias(of: p).map { .string($0.address) } ?? .null),
                 ("memberKey", p.memberKey.isEmpty ? .null : .string(Hex.encode(p.memberKey))),
                 ("discovered", .bool(p.discovered)),
                 ("learnedFrom", .string(p.learnedFrom.name)),
                 ("lastAnnouncedMillis", p.announcedAtMillis > 0 ? .int(p.announcedAtMillis) : .null)])
    }

    /// A member that dials in, for `--json` (`dialsIn`).
    func json(_ d: DialIn) -> JSON {
        let r = d.record
        return .object([("memberKey", .string(Hex.encode(r.memberKey))), ("name", .string(d.name)),
                        ("fingerprint", .string(Names.fingerprint(r.memberKey))), ("host", .string(r.host)),
                        ("replicaId", r.last.peerReplica.map { .string($0.description) } ?? .null),
                        ("firstSyncMillis", .int(r.firstMillis)), ("lastSyncMillis", .int(r.lastMillis)), ("sessions", .int(r.sessions)),
                        ("theyLack", .int(Self.lacks(r.last.receipt, vector))), ("weLack", .int(Self.lacks(vector, r.last.receipt))),
                        ("childrenAgreeing", .int(r.last.childrenAgreeing)),
                        ("childrenDiffering", .array(r.last.childrenDiffering.map { .string($0.description) })),
                        ("updateRequired", d.versionGap.map(JSON.string) ?? .null)])
    }

    /// "laptop of Dad (3fa2-…) dials in from 192.168.1.21 (…): has everything (last sync …)".
    func line(_ d: DialIn) -> String {
        "laptop of \(Names.label(d.name, key: d.record.memberKey)) dials in from \(Render.safe(d.record.host)) (runs no daemon, so this laptop cannot start a sync with it; it gets this laptop's changes when it next syncs)"
            + synced(d.record.last.receipt, lastSyncMillis: d.record.lastMillis)
            + (d.versionGap.map { "; its last session was refused: \($0)" } ?? "")
    }

    /// ": never synced", or what a laptop whose last sync was at `lastSyncMillis` lacks by its
    /// `receipt`, and what it had that this laptop lacked.
    func synced(_ receipt: VersionVector, lastSyncMillis: Int64) -> String {
        guard lastSyncMillis > 0 else { return ": never synced" }
        let lack = Self.lacks(receipt, vector)
        let weLack = Self.lacks(vector, receipt)
        var text = lack == 0 ? ": has everything (last sync \(time.stamped(lastSyncMillis)))"
                             : ": lacks \(Render.plural(lack, "change")) (last sync \(time.stamped(lastSyncMillis)))"
        if weLack > 0 { text += "; it had \(Render.plural(weLack, "change")) this laptop lacks" }
        return text
    }

    func line(_ p: PeerRecord) -> String {
        var text = p.address
        switch p.learnedFrom {
        case .announcement: text += " (found on this network \(time.stamped(p.announcedAtMillis)))"
        case .session: text += " (learned from its session \(time.stamped(p.announcedAtMillis)))"
        case .typed: break
        }
        text += synced(p.receipt, lastSyncMillis: p.lastSuccessMillis)
        if Self.failedLast(p) {
            text += "; last attempt \(time.stamped(p.lastAttemptMillis)) failed: \(Render.safe(p.lastError))"
        }
        if let alias = newerAlias(of: p) { text += "; the same laptop as \(alias.address), synced since" }
        return text
    }

    /// "all 2 laptops agree: Ava $12.34, Ben $1.00" or the children they differ on.
    func agreement() -> String? {
        let synced = laptops.filter { $0.lastSyncMillis > 0 }
        guard !synced.isEmpty else { return nil }
        let differing = Set(synced.flatMap(\.last.childrenDiffering))
        let names = Dictionary(uniqueKeysWithValues: children.map { ($0.id, $0.name) })
        if !differing.isEmpty {
            return "at the last sync, laptops differed on: " + differing.sorted().map { names[$0].map(Render.safe) ?? String($0.hex.prefix(8)) }.joined(separator: ", ")
        }
        let active = children.filter { !$0.isArchived }
        let list = active.map { "\(Render.safe($0.name)) \(Money.format(cents: $0.balanceCents))" }.joined(separator: ", ")
        return "all \(synced.count + 1) laptops agreed at the last sync" + (list.isEmpty ? "" : "; now: " + list)
    }

    func text() -> String {
        var lines = ["status: \(state)"]
        if let interruptedJoin {
            lines.append(Context.joinInterruptedMessage + "; this home's ledger is the one it had before (to keep it and forget that join, remove \(interruptedJoin))")
        }
        if let attention {
            lines.append("changes and sync are stopped: \(attention)")
            lines.append("the balances below are this laptop's last known state and may be stale")
        }
        if let updateRequired {
            lines.append("update required: \(updateRequired); changes on this laptop go on and sync once it is updated")
        }
        switch state {
        case "attentionRequired": break
        case "synced": lines.append("every peer has acknowledged everything this device holds")
        case "offline": lines.append("\(Render.plural(pending, "change")) waiting; no peer could be reached (they sync when one is back)")
        default:
            lines.append(laptops.isEmpty ? "no peers yet: `kidledger peer add HOST:PORT` or `kidledger join CODE`"
                                         : "\(Render.plural(pending, "change")) not yet acknowledged by every peer")
        }
        if counts.deferred > 0 { lines.append("\(Render.plural(counts.deferred, "transaction")) waiting for their child to arrive") }
        for group in Replica.sameNameGroups(children) { lines.append(Render.sameNameLine(group)) }
        if counts.conflicts > 0 { lines.append("\(Render.plural(counts.conflicts, "conflicting copy", "conflicting copies")) seen (see `kidledger conflicts`)") }
        // A few lines here (a hostile member can make many); `kidledger conflicts` lists them all.
        for c in sameID.prefix(Self.sameIDLinesMax) {
            lines.append(Render.sameIDLine(kind: c.kind == "child" ? "child" : "entry", id: c.id, kept: c.winner, lost: c.loser, time: time))
        }
        if sameID.count > Self.sameIDLinesMax { lines.append("and \(sameID.count - Self.sameIDLinesMax) more (see `kidledger conflicts`)") }
        if let forged = Render.forged(membership.forged, households: membership.forgedHouseholds) { lines.append(forged) }
        if let o = ownership, o.epoch > 0 {
            lines.append("owner: key \(PublicKey(bytes: o.owner)?.fingerprint ?? "?") since owner transfer \(o.epoch) (recovered with the recovery secret)")
        }
        if let o = ownership, !o.conflictedEpochs.isEmpty {
            lines.append("two owner transfers competed at \(o.conflictedEpochs.map(String.init).joined(separator: ", ")) (two recoveries at once): every laptop picked the same owner; check `kidledger members` and recover again if it is the wrong one")
        }
        for p in peers { lines.append("peer " + line(p)) }
        for d in dialsIn { lines.append(line(d)) }
        if inboundSessions > 0 {
            lines.append("\(Render.plural(inboundSessions, "session")) from other laptops to this laptop's daemon, the last \(time.stamped(lastInboundMillis))")
        }
        if let agreement = agreement() { lines.append(agreement) }
        lines.append("digest \(digest)")
        return lines.joined(separator: "\n")
    }

    func jsonDocument() -> JSON {
        .object([("state", .string(state)), ("attentionReason", (attention ?? updateRequired).map(JSON.string) ?? .null),
                 ("updateRequired", updateRequired.map(JSON.string) ?? .null), ("stale", .bool(attention != nil)), ("pendingChanges", .int(pending)), ("deferred", .int(counts.deferred)),
                 ("conflicts", .int(counts.conflicts)), ("sameIdConflicts", .array(sameID.map(Render.sameIDConflict))),
                 ("sameNames", Render.sameNames(Replica.sameNameGroups(children))),
                 ("forged", .int(membership.forged)), ("forgedHouseholds", .int(membership.forgedHouseholds)),
                 ("ownerEpoch", .int(ownership?.epoch ?? 0)),
                 ("ownerTransferConflicts", .array((ownership?.conflictedEpochs ?? []).map { .int($0) })),
                 ("peers", .array(peers.map(json))), ("dialsIn", .array(dialsIn.map(json))),
                 ("inboundSessions", .int(inboundSessions)), ("lastInboundMillis", lastInboundMillis > 0 ? .int(lastInboundMillis) : .null),
                 ("digest", .string(digest.description)), ("joinInterrupted", .bool(interruptedJoin != nil))])
    }
}

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
        report.time = ctx.time
        ctx.emit(.object([("peers", .array(report.peers.map(report.json)))]))
        if report.peers.isEmpty {
            ctx.say("No peers yet: `kidledger serve` finds the household's other laptops on this network; elsewhere `kidledger peer add HOST:PORT`.")
            return
        }
        for p in report.peers { ctx.say(report.line(p)) }
    }

    static let status = CLI.Command(spec: CommandSpec(
        name: "status", synopsis: "", summary: "sync state, pending changes, peers, digest",
        details: """
        States: synced (every known peer has acknowledged, after its durable commit, everything this device
        holds), pending (some changes are not acknowledged yet, or there is no peer), offline (changes are
        pending and the last attempt to reach every peer failed), attentionRequired (mutations and sync are
        stopped until the account or membership is sorted out: switch back to the account this home joined
        with (`kidledger account switch NAME`), or ask the owner if this laptop was revoked).
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
    var attention: String?
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
        let mine = vector
        let devices = Self.devices(peers)
        // One device under several addresses is one peer: its receipt is the one of the address
        // synced last, and it is reachable when any of its addresses was (a dead alias, such as
        // the address a laptop had before the router changed it, keeps nothing pending).
        let lacking = devices.map { Self.lacks(Self.latest($0).receipt, mine) }
        pending = lacking.max() ?? changesMissing(from: [:], in: vector)
        if peers.isEmpty {
            state = "pending"
        } else if lacking.allSatisfy({ $0 == 0 }) {
            state = "synced"
        } else if devices.allSatisfy({ $0.allSatisfy(Self.failedLast) }) {
            state = "offline"
        } else {
            state = "pending"
        }
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

    func line(_ p: PeerRecord) -> String {
        var text = p.address
        switch p.learnedFrom {
        case .announcement: text += " (found on this network \(time.stamped(p.announcedAtMillis)))"
        case .session: text += " (learned from its session \(time.stamped(p.announcedAtMillis)))"
        case .typed: break
        }
        if p.lastSuccessMillis == 0 {
            text += ": never synced"
        } else {
            let lack = Self.lacks(p.receipt, vector)
            let weLack = Self.lacks(vector, p.receipt)
            text += lack == 0 ? ": has everything (last sync \(time.stamped(p.lastSuccessMillis)))"
                              : ": lacks \(Render.plural(lack, "change")) (last sync \(time.stamped(p.lastSuccessMillis)))"
            if weLack > 0 { text += "; it had \(Render.plural(weLack, "change")) this laptop lacks" }
        }
        if Self.failedLast(p) {
            text += "; last attempt \(time.stamped(p.lastAttemptMillis)) failed: \(Render.safe(p.lastError))"
        }
        if let alias = newerAlias(of: p) { text += "; the same laptop as \(alias.address), synced since" }
        return text
    }

    /// "all 2 laptops agree: Ava $12.34, Ben $1.00" or the children they differ on.
    func agreement() -> String? {
        let synced = Self.devices(peers.filter { $0.lastSuccessMillis > 0 }).map(Self.latest)  // one per laptop
        guard !synced.isEmpty else { return nil }
        let differing = Set(synced.flatMap(\.childrenDiffering))
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
        switch state {
        case "attentionRequired": break
        case "synced": lines.append("every peer has acknowledged everything this device holds")
        case "offline": lines.append("\(Render.plural(pending, "change")) waiting; no peer could be reached (they sync when one is back)")
        default:
            lines.append(peers.isEmpty ? "no peers yet: `kidledger peer add HOST:PORT` or `kidledger join CODE`"
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
        if inboundSessions > 0 {
            lines.append("\(Render.plural(inboundSessions, "session")) from other laptops to this laptop's daemon, the last \(time.stamped(lastInboundMillis))")
        }
        if let agreement = agreement() { lines.append(agreement) }
        lines.append("digest \(digest)")
        return lines.joined(separator: "\n")
    }

    func jsonDocument() -> JSON {
        .object([("state", .string(state)), ("attentionReason", attention.map(JSON.string) ?? .null),
                 ("stale", .bool(attention != nil)), ("pendingChanges", .int(pending)), ("deferred", .int(counts.deferred)),
                 ("conflicts", .int(counts.conflicts)), ("sameIdConflicts", .array(sameID.map(Render.sameIDConflict))),
                 ("sameNames", Render.sameNames(Replica.sameNameGroups(children))),
                 ("forged", .int(membership.forged)), ("forgedHouseholds", .int(membership.forgedHouseholds)),
                 ("ownerEpoch", .int(ownership?.epoch ?? 0)),
                 ("ownerTransferConflicts", .array((ownership?.conflictedEpochs ?? []).map { .int($0) })),
                 ("peers", .array(peers.map(json))),
                 ("inboundSessions", .int(inboundSessions)), ("lastInboundMillis", lastInboundMillis > 0 ? .int(lastInboundMillis) : .null),
                 ("digest", .string(digest.description)), ("joinInterrupted", .bool(interruptedJoin != nil))])
    }
}

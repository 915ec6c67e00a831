import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerProtocol
import KidLedgerDaemon

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
        var report = try StatusReport(replica: replica, now: ctx.clock.nowMillis())
        report.time = ctx.time
        ctx.emit(.object([("peers", .array(report.peers.map(report.json))), ("dialsIn", .array(report.dialsIn.map(report.json)))]))
        if report.peers.isEmpty && report.dialsIn.isEmpty {
            ctx.say("No peers yet: `kidledger serve` finds the household's other laptops on this network; elsewhere `kidledger peer add HOST:PORT`.")
            return
        }
        for p in report.peers { ctx.say(report.line(p)) }
        for d in report.dialsIn { ctx.say(report.line(d)) }
    }

    static let status = CLI.Command(spec: CommandSpec(
        name: "status", synopsis: "", summary: "sync state, pending changes, peers, digest",
        details: """
        States (one function computes them for `status`, `status --json` and the page's pill:
        ``StatusReport/syncState``): synced (every other member's laptop that ever synced with this one
        holds everything this laptop holds, as its receipt after its durable commit says), pending (one
        lacks something and it, or another laptop of the same member, answered recently: the changes are
        on their way), offline (one lacks something and none of that member's laptops answered recently;
        the text says when each was last seen), relayed (one lacks something by its last direct sync and is not
        reached directly, but its member synced through a granted relay within that window, and this laptop's last
        relay session finished: the relay carries the changes; offline wins over it), alone (no other laptop has ever synced with this one:
        everything is only on this laptop; invite one), attentionRequired (mutations and sync are stopped
        until the account or membership is sorted out: switch back to the account this home joined with
        (`kidledger account switch NAME`), or ask the owner if this laptop was
        revoked). A member whose laptop runs no daemon (it only runs `kidledger sync`) is listed as one that
        dials in (`dialsIn` in --json), with its last sync and what it lacks.
        A laptop answered recently when a session with it (either way) completed within the last 5 minutes
        (``StatusReport/answeredWindowMillis``, ten of the daemon's sync intervals) and no attempt to reach
        it failed since. Laptops of revoked members, and addresses that never synced, are not counted.
        `laptops` in --json has one entry per counted laptop: name, state, theyLack, lastSyncMillis, route ("direct").
        With a relay granted, a line per other member says its route through it ("Dad's laptop: via the relay,
        last synced 2 minutes ago"), one says when the relay was unreachable or refused this laptop at the last
        try, and one when it is out of date (after the last sync with it, it still lacked changes this laptop
        holds, or had lost what it held, or that sync is more than a day old); --json adds `relays` (per relay:
        address, fingerprint, reach, lastAttemptMillis, lastSuccessMillis, error, outOfDate (a sentence or null), relayLacks, and
        its laptops with route "relay" and lastSyncMillis). What a relay last reported a member acknowledged counts
        as that member's laptop's receipt too (when the member has one laptop), so a laptop is not said to lack
        what it took from the relay since its last direct sync.
        If a `join` was interrupted (the process killed before it finished), status says so: run the same
        `kidledger join CODE` again.
        Active children with one name up to case and accents (added on two laptops apart) get a note line
        (`sameNames` in --json: each group an array of child ids); rename one of them.
        """)) { ctx, _ in
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        var report = try StatusReport(replica: replica, now: ctx.clock.nowMillis(), attention: try ctx.attentionReason(replica))
        report.time = ctx.time
        report.interruptedJoin = ctx.joinInterrupted ? ctx.joinStagingPath : nil
        // The relays' routes: new lines and a `relays` key; the rest is unchanged.
        let routes = try RelayRoutes(replica: replica, me: try ctx.identity(creating: false)?.publicKey.bytes, now: ctx.clock.nowMillis())
        var document = report.jsonDocument()
        if case .object(let pairs) = document, !routes.json.isEmpty { document = .object(pairs + [("relays", .array(routes.json))]) }
        ctx.emit(document)
        ctx.say(([report.text()] + routes.lines).joined(separator: "\n"))
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
    /// The other laptops, one each: the peers' devices (``SyncDriver/devices(_:)``), then the members that
    /// dial in.
    var laptops: [Laptop]
    var attention: String?
    /// A newer laptop refused this one's protocol (``VersionGap``): update kidledger here.
    var updateRequired: String?
    /// Laptops of an older protocol version that sessions held changes back from
    /// (``VersionGap/withheld(_:in:)``), by member key: what they lack until they are updated.
    var olderLaptops: [[UInt8]: OlderLaptop] = [:]
    /// How times are shown (the local zone, or UTC with --utc).
    var time = LocalTime.utc
    /// The staging ledger a `join` into this home (a `join --replace`) left when it did not finish.
    var interruptedJoin: String?
    /// Sessions other laptops opened to this laptop's daemon that completed, and the last one's time.
    var inboundSessions = 0
    var lastInboundMillis: Int64 = 0

    /// How long after its last completed session a laptop still counts as answering (when no
    /// attempt to reach it failed since): ten of the daemon's sync intervals, so a laptop whose
    /// daemon runs answers about every 30 s and a missed round or two does not read `offline`.
    static let answeredWindowMillis: Int64 = 5 * 60_000
    /// When the report was made (Unix milliseconds; injected: tests pass their own).
    var now: Int64
    /// Each counted laptop's state, in the order of ``laptops``.
    var laptopStates: [LaptopState]
    /// Per member key, when a granted relay last saw that member sync, from this laptop's last
    /// relay session that finished (``relayed(_:)``).
    var relayed: [[UInt8]: Int64] = [:]

    init(replica: Replica, now: Int64, attention: String? = nil) throws {
        self.now = now
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
        Self.credit(&laptops, &dialsIn, relayVectors: try RelayRecord.memberVectors(replica))
        for i in dialsIn.indices { dialsIn[i].versionGap = try VersionGap.refusedInbound(dialsIn[i].record.memberKey, in: replica) }
        self.attention = attention
        // A newer laptop refused this one: changes go on, sync with it waits for this laptop's update.
        updateRequired = attention == nil ? try VersionGap.pending(replica) : nil
        for laptop in laptops where !laptop.memberKey.isEmpty {
            guard let held = try VersionGap.withheld(laptop.memberKey, in: replica) else { continue }
            olderLaptops[laptop.memberKey] = OlderLaptop(name: laptop.name, changesWithheld: held.count, protocolVersion: held.peerVersion,
                                                         message: VersionGap.withheldMessage(laptop: Self.label(laptop), count: held.count, peerVersion: held.peerVersion))
        }
        relayed = try Self.relayed(replica)
        let computed = Self.syncState(laptops, holding: vector, now: now, attention: attention != nil || updateRequired != nil, relayed: relayed)
        (state, laptopStates) = (computed.state.rawValue, computed.laptops)
        pending = laptops.isEmpty ? changesMissing(from: [:], in: vector) : laptopStates.map(\.lacks).max() ?? 0
    }

    /// The sync state `status`, `status --json` and the page's pill show (the page renders
    /// `state` as it is: no second computation anywhere).
    enum SyncState: String, CaseIterable {
        case synced, pending, offline, alone, attentionRequired
        /// A laptop that lacks something does not answer directly, but its member synced through
        /// the relay recently and this laptop's last relay session finished: the changes travel there.
        case relayed
    }

    /// One counted laptop's part in the state.
    struct LaptopState: Equatable {
        /// How many changes this laptop holds that it lacks.
        var lacks: Int
        /// Whether it answered recently (``answers(_:now:)``).
        var answers: Bool
        /// `synced` (lacks nothing), `pending` (lacks something; it or another laptop of its member
        /// answers), `relayed` (it lacks something by its last direct receipt; its member synced
        /// through the relay recently) or `offline`.
        var state: SyncState
    }

    /// Whether `laptop` answered recently: a session with it completed within
    /// ``answeredWindowMillis`` before `now` and no attempt to reach it failed since. (A clock
    /// set back, a session "after" now, counts as recent.)
    static func answers(_ laptop: Laptop, now: Int64) -> Bool {
        laptop.lastSyncMillis > 0 && now - laptop.lastSyncMillis < answeredWindowMillis && !laptop.unreachable
    }

    /// The state from the counted `laptops` (``laptops(_:inbound:members:)``), what this laptop
    /// holds and the time: attentionRequired when attention is required; alone with no laptop;
    /// synced when none lacks anything; pending when one that lacks something answers (or another
    /// of its member's laptops does); else offline when one that lacks something is neither
    /// reached directly nor synced through a relay within ``answeredWindowMillis`` (`relayed`:
    /// member key to when the relay last saw it sync); else relayed.
    static func syncState(_ laptops: [Laptop], holding vector: VersionVector, now: Int64, attention: Bool,
                          relayed: [[UInt8]: Int64] = [:]) -> (state: SyncState, laptops: [LaptopState]) {
        let answering = laptops.map { answers($0, now: now) }
        let membersAnswering = Set(zip(laptops, answering).filter { $0.1 && !$0.0.memberKey.isEmpty }.map(\.0.memberKey))
        let states = zip(laptops, answering).map { laptop, answers in
            let lacks = lacks(laptop.last.receipt, vector)
            let reached = answers || membersAnswering.contains(laptop.memberKey)
            let viaRelay = relayed[laptop.memberKey].map { $0 > 0 && now - $0 < answeredWindowMillis } ?? false
            return LaptopState(lacks: lacks, answers: answers, state: lacks == 0 ? .synced : reached ? .pending : viaRelay ? .relayed : .offline)
        }
        if attention { return (.attentionRequired, states) }
        if laptops.isEmpty { return (.alone, states) }
        if states.allSatisfy({ $0.state == .synced }) { return (.synced, states) }
        for state in [SyncState.pending, .offline] where states.contains(where: { $0.state == state }) { return (state, states) }
        return (.relayed, states)
    }

    /// Per member key, when a granted relay last saw it sync, from relays whose last session from
    /// this laptop finished (a relay that failed since carries nothing new); never later than that session.
    static func relayed(_ replica: Replica) throws -> [[UInt8]: Int64] {
        var seen: [[UInt8]: Int64] = [:]
        for relay in try replica.relays() {
            guard let last = try RelayRecord.last(replica, relay: relay.key), last.error.isEmpty, last.successMillis > 0 else { continue }
            for (hex, millis) in last.members where millis > 0 {
                guard let key = Hex.decode(hex) else { continue }
                seen[key] = max(seen[key] ?? 0, min(millis, last.successMillis))
            }
        }
        return seen
    }

    /// A laptop that runs an older kidledger: what sessions with it held back.
    struct OlderLaptop {
        var name: String
        var changesWithheld: Int
        var protocolVersion: UInt16
        /// "Dad's laptop runs kidledger 0.1.0: update it to get 3 changes it can't read yet (...)".
        var message: String

        var json: JSON {
            .object([("name", name.isEmpty ? .null : .string(name)), ("changesWithheld", .int(changesWithheld)),
                     ("protocolVersion", .int(Int(protocolVersion))),
                     ("kidledger", KnownReleases.name(highest: protocolVersion).map(JSON.string) ?? .null), ("message", .string(message))])
        }
    }

    /// The note on a peer's or a dialing-in laptop's line when it runs an older kidledger.
    func olderNote(_ member: [UInt8]) -> String {
        olderLaptops[member].map { "; " + $0.message } ?? ""
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
        /// Its member's key (empty when unknown: an address that synced before keys were recorded).
        var memberKey: [UInt8] = []
        /// Its member's name (empty when unknown).
        var name = ""
        /// The addresses this laptop dials it at (none for one that dials in).
        var addresses: [String] = []
        /// When it last synced with this laptop (0: never).
        var lastSyncMillis: Int64
        /// What that sync established (its receipt counts for `pending` and `synced`).
        var last: SyncOutcome
        /// Whether this laptop reaches it only by dialing and the last attempt at each of its
        /// addresses failed. A laptop that synced in since is not: it answered then.
        var unreachable: Bool
    }

    /// The other laptops that count: those that ever synced with this one, of current members.
    /// One device under several addresses is one laptop: its receipt is the one of the address
    /// synced last, and it is unreachable only when the last attempt at each of its addresses
    /// failed (a dead alias, such as the address a laptop had before the router changed it, keeps
    /// nothing pending). A member that synced in (`inbound`) is the laptop of a peer of its key,
    /// whose receipt and time its session's replace when newer; else it is a laptop of its own that
    /// dials in. A laptop of a revoked member is not counted (it is sent nothing more).
    static func laptops(_ peers: [PeerRecord], inbound: [InboundRecord], members: [MemberSummary]) -> ([Laptop], [DialIn]) {
        let devices = SyncDriver.devices(peers)
        let names = Dictionary(members.filter { !$0.isRevoked }.map { ($0.key, $0.name) }, uniquingKeysWith: { first, _ in first })
        let revoked = Set(members.filter(\.isRevoked).map(\.key))
        var laptops = devices.map { device in
            let latest = Self.latest(device)
            let key = device.first { !$0.memberKey.isEmpty }?.memberKey ?? []
            return Laptop(memberKey: key, name: names[key] ?? "", addresses: device.map(\.address), lastSyncMillis: latest.lastSuccessMillis, last: latest.outcome,
                          unreachable: device.allSatisfy(Self.failedLast))
        }
        var dialsIn: [DialIn] = []
        for record in inbound {
            guard let name = names[record.memberKey] else { continue }
            guard let i = devices.firstIndex(where: { $0.contains { $0.memberKey == record.memberKey } }) else {
                dialsIn.append(DialIn(record: record, name: name))
                laptops.append(Laptop(memberKey: record.memberKey, name: name, lastSyncMillis: record.lastMillis, last: record.last, unreachable: false))
                continue
            }
            if record.lastMillis > laptops[i].lastSyncMillis {
                laptops[i].lastSyncMillis = record.lastMillis
                laptops[i].last = record.last
            }
            // It answered (synced in) after every failed attempt to reach it.
            if record.lastMillis > devices[i].map(\.lastAttemptMillis).max() ?? 0 { laptops[i].unreachable = false }
        }
        return (laptops.filter { $0.lastSyncMillis > 0 && !revoked.contains($0.memberKey) }, dialsIn)
    }

    /// What the relay last reported a member holds counts as that member's laptop's receipt too
    /// (origin by origin, the greater), so no line says a laptop lacks what it took from the relay
    /// since its last direct sync. Only for a member with one counted laptop: the relay's report is
    /// per member, not per laptop.
    static func credit(_ laptops: inout [Laptop], _ dialsIn: inout [DialIn], relayVectors: [[UInt8]: VersionVector]) {
        guard !relayVectors.isEmpty else { return }
        var counted: [[UInt8]: Int] = [:]
        for laptop in laptops where !laptop.memberKey.isEmpty { counted[laptop.memberKey, default: 0] += 1 }
        for i in laptops.indices {
            let key = laptops[i].memberKey
            guard counted[key] == 1, let vector = relayVectors[key] else { continue }
            laptops[i].last.receipt.merge(vector, uniquingKeysWith: max)
        }
        for i in dialsIn.indices {
            let key = dialsIn[i].record.memberKey
            guard counted[key] == 1, let vector = relayVectors[key] else { continue }
            dialsIn[i].record.last.receipt.merge(vector, uniquingKeysWith: max)
        }
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
        guard let device = SyncDriver.devices(peers).first(where: { $0.contains(p) }), device.count > 1 else { return nil }
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
                 ("theyLack", .int(Self.lacks(current(p).receipt, vector))),
                 ("weLack", .int(Self.lacks(vector, current(p).receipt))),
                 ("childrenAgreeing", .int(p.childrenAgreeing)),
                 ("childrenDiffering", .array(p.childrenDiffering.map { .string($0.description) })),
                 ("sameDeviceAs", newerAlias(of: p).map { .string($0.address) } ?? .null),
                 ("memberKey", p.memberKey.isEmpty ? .null : .string(Hex.encode(p.memberKey))),
                 ("discovered", .bool(p.discovered)),
                 ("learnedFrom", .string(p.learnedFrom.name)),
                 ("lastAnnouncedMillis", p.announcedAtMillis > 0 ? .int(p.announcedAtMillis) : .null),
                 ("updateNeeded", olderLaptops[p.memberKey].map { .string($0.message) } ?? .null)])
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
                        ("updateRequired", d.versionGap.map(JSON.string) ?? .null),
                        ("updateNeeded", olderLaptops[r.memberKey].map { .string($0.message) } ?? .null)])
    }

    /// "laptop of Dad (3fa2-…) dials in from 192.168.1.21 (…): has everything (last sync …)".
    func line(_ d: DialIn) -> String {
        "laptop of \(Names.label(d.name, key: d.record.memberKey)) dials in from \(TextEscaping.terminal(d.record.host)) (runs no daemon, so this laptop cannot start a sync with it; it gets this laptop's changes when it next syncs)"
            + synced(d.record.last.receipt, lastSyncMillis: d.record.lastMillis)
            + (d.versionGap.map { "; its last session was refused: \($0)" } ?? "")
            + olderNote(d.record.memberKey)
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
        var text = TextEscaping.terminal(p.address)
        switch p.learnedFrom {
        case .announcement: text += " (found on this network \(time.stamped(p.announcedAtMillis)))"
        case .session: text += " (learned from its session \(time.stamped(p.announcedAtMillis)))"
        case .typed: break
        }
        let latest = current(p)
        text += synced(latest.receipt, lastSyncMillis: latest.lastSyncMillis)
        if Self.failedLast(p) {
            text += "; last attempt \(time.stamped(p.lastAttemptMillis)) failed: \(TextEscaping.terminal(p.lastError))"
        }
        if let alias = newerAlias(of: p) { text += "; the same laptop as \(TextEscaping.terminal(alias.address)), synced since" }
        if !p.memberKey.isEmpty { text += olderNote(p.memberKey) }
        return text
    }

    /// What the laptop at `p`'s address held at its latest session either way (through any of its
    /// addresses, or synced in), and when: what every line and `theyLack` say of `p`, so an
    /// address's older receipt never shows "lacks N changes" beside a state its laptop's newer
    /// session made `synced` (the moment after a reconnect). An address of no counted laptop: its own.
    func current(_ p: PeerRecord) -> (receipt: VersionVector, lastSyncMillis: Int64) {
        guard let laptop = laptops.first(where: { $0.addresses.contains(p.address) }) else { return (p.receipt, p.lastSuccessMillis) }
        return (laptop.last.receipt, laptop.lastSyncMillis)
    }

    /// "Dad's laptop", or "the laptop at 192.168.1.21:4717" when its member is unknown.
    static func label(_ laptop: Laptop) -> String {
        if !laptop.name.isEmpty { return TextEscaping.terminal(laptop.name) + "'s laptop" }
        return laptop.addresses.first.map { "the laptop at " + TextEscaping.terminal($0) } ?? "a laptop"
    }

    /// One line per laptop that lacks something: "Dad's laptop: offline, last seen 3 days ago
    /// (2026-12-04 09:12 PST); lacks 2 changes".
    func laptopLines() -> [String] {
        zip(laptops, laptopStates).filter { $0.1.state != .synced }.map { laptop, s in
            let seen = "last seen \(Render.ago(laptop.lastSyncMillis, now: now)) (\(time.stamped(laptop.lastSyncMillis)))"
            let via = s.state == .relayed ? "; synced through the relay \(Render.ago(relayed[laptop.memberKey] ?? 0, now: now)), which carries the changes" : ""
            return "\(Self.label(laptop)): " + (s.state == .offline ? "offline, " : s.state == .relayed ? "not reached directly, " : "") + seen
                + "; lacks " + Render.plural(s.lacks, "change") + (s.state == .relayed ? " by its last direct sync" : "") + via
        }
    }

    /// The counted laptops for `--json` (`laptops`): who, the state, what it lacks, when it last
    /// synced (either way) and whether it answers.
    func laptopsJSON() -> JSON {
        .array(zip(laptops, laptopStates).map { laptop, s in
            .object([("name", laptop.name.isEmpty ? .null : .string(laptop.name)),
                     ("memberKey", laptop.memberKey.isEmpty ? .null : .string(Hex.encode(laptop.memberKey))),
                     ("addresses", .array(laptop.addresses.map(JSON.string))),
                     ("state", .string(s.state.rawValue)), ("theyLack", .int(s.lacks)),
                     ("lastSyncMillis", .int(laptop.lastSyncMillis)), ("answersRecently", .bool(s.answers)),
                     ("route", .string("direct"))])
        })
    }

    /// "all 2 laptops agree: Ava $12.34, Ben $1.00" or the children they differ on.
    func agreement() -> String? {
        let synced = laptops.filter { $0.lastSyncMillis > 0 }
        guard !synced.isEmpty else { return nil }
        let differing = Set(synced.flatMap(\.last.childrenDiffering))
        let names = Dictionary(uniqueKeysWithValues: children.map { ($0.id, $0.name) })
        if !differing.isEmpty {
            return "at the last sync, laptops differed on: " + differing.sorted().map { names[$0].map(TextEscaping.terminal) ?? String($0.hex.prefix(8)) }.joined(separator: ", ")
        }
        let active = children.filter { !$0.isArchived }
        let list = active.map { "\(TextEscaping.terminal($0.name)) \(Money.format(cents: $0.balanceCents))" }.joined(separator: ", ")
        return "all \(synced.count + 1) laptops agreed at the last sync" + (list.isEmpty ? "" : "; now: " + list)
    }

    func text() -> String {
        var lines = ["status: \(state)"]
        if let interruptedJoin {
            lines.append(Context.joinInterruptedMessage + "; this home's ledger is the one it had before (to keep it and forget that join, remove \(interruptedJoin))")
        }
        if let attention {
            lines.append("changes and sync are stopped: \(TextEscaping.terminal(attention))")
            lines.append("the balances below are this laptop's last known state and may be stale")
        }
        if let updateRequired {
            lines.append("update required: \(updateRequired); changes on this laptop go on and sync once it is updated")
        }
        switch state {
        case "attentionRequired": break
        case "synced": lines.append("every other laptop has acknowledged everything this laptop holds")
        case "alone": lines.append("only on this laptop: no other laptop has synced with it yet (`kidledger invite` on this laptop, then `kidledger join CODE` on the other)")
        case "offline": lines.append("\(Render.plural(pending, "change")) waiting for a laptop that has not answered recently (it gets them when it is back)")
        case "relayed": lines.append("the other laptops are not reached directly but synced through the relay recently: it carries the changes")
        default: lines.append("\(Render.plural(pending, "change")) on the way to a laptop that answers")
        }
        if state != "attentionRequired" { lines += laptopLines() }
        for older in olderLaptops.values.sorted(by: { $0.message < $1.message }) { lines.append("update needed: " + older.message) }
        if counts.deferred > 0 { lines.append("\(Render.plural(counts.deferred, "transaction")) waiting for their child to arrive") }
        for group in Replica.sameNameGroups(children) { lines.append(Render.sameNameLine(group)) }
        if counts.conflicts > 0 { lines.append("\(Render.plural(counts.conflicts, "conflicting copy", "conflicting copies")) seen (see `kidledger conflicts`)") }
        // A few lines here (a hostile member can make many); `kidledger conflicts` lists them all.
        for c in sameID.prefix(Self.sameIDLinesMax) {
            lines.append(Render.sameIDLine(kind: c.kind == "child" ? "child" : "entry", id: c.id, kept: c.winner, lost: c.loser, time: time))
        }
        if sameID.count > Self.sameIDLinesMax { lines.append("and \(sameID.count - Self.sameIDLinesMax) more (see `kidledger conflicts`)") }
        if let forged = Render.forged(membership.forged, households: membership.forgedHouseholds) { lines.append(forged) }
        if let compromise = membership.ownerKeyCompromised { lines.append("warning: " + compromise.sentence) }
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
                 ("secondGeneses", .int(membership.secondGeneses)),
                 ("ownerKeyWarning", membership.ownerKeyCompromised.map { .string($0.sentence) } ?? .null),
                 ("ownerEpoch", .int(ownership?.epoch ?? 0)),
                 ("ownerTransferConflicts", .array((ownership?.conflictedEpochs ?? []).map { .int($0) })),
                 ("laptops", laptopsJSON()), ("answeredWindowMillis", .int(Self.answeredWindowMillis)),
                 ("olderLaptops", .array(olderLaptops.values.sorted(by: { $0.message < $1.message }).map(\.json))),
                 ("peers", .array(peers.map(json))), ("dialsIn", .array(dialsIn.map(json))),
                 ("inboundSessions", .int(inboundSessions)), ("lastInboundMillis", lastInboundMillis > 0 ? .int(lastInboundMillis) : .null),
                 ("digest", .string(digest.description)), ("joinInterrupted", .bool(interruptedJoin != nil))])
    }
}

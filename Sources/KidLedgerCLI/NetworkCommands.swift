#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerProtocol
import KidLedgerTransport
import KidLedgerUI
import KidLedgerLMDB
import KidLedgerSecurity
import KidLedgerSystem
import KidLedgerDaemon
import KidLedgerRelay

/// The daemon, sync, and joining a household.
enum NetworkCommands {
    static let all: [CLI.Command] = [serve, sync, invite, join]

    static let serve = CLI.Command(spec: CommandSpec(
        name: "serve", synopsis: "--listen HOST:PORT [--ui ADDRESS]", summary: "run the peer daemon",
        details: """
        Accepts peers on HOST:PORT (port 0 picks a free one; `:PORT` alone means every interface, IPv6 and IPv4:
        [::]:PORT, dual-stack, or 0.0.0.0:PORT on a host without IPv6),
        syncs with every known peer every 30 s and within about a second after a local change (also one made by
        another kidledger process on this home), and logs one line per session to standard error. Stops cleanly
        on SIGINT or SIGTERM. One daemon per home: a second `serve` on the same home is refused (exit 75) while
        the first runs (HOME/daemon.lock). In a home with no household yet it serves the page at once, where a
        household is started or joined (`kidledger ui` prints its address), and starts syncing once there is one
        (also one made by `kidledger init` or `join` in a terminal), without a restart; with --ui off it refuses.
          --ui ADDRESS         serve the family page there (default 127.0.0.1:4718; port 0 picks one; `off`
                               for none); `kidledger ui` prints its address with the key
          --ui-any-interface   allow a --ui address off loopback (other machines could reach the page)
        LAN discovery: the daemon announces where it listens by UDP broadcast and IPv6 multicast to ff12::4717
        (when it listens on IPv6, as --listen :4717 does) on port 4717 about every 10 s, and dials the other
        members' daemons where they announce, so nobody types addresses at home. Only current members can read
        an announcement; allow UDP 4717 in from the home network in a firewall (IPv4 and IPv6), as TCP 4717.
        A daemon on loopback announces nowhere.
          --no-discovery             neither announce nor listen for announcements (typed peers only)
          --discovery-port PORT      the UDP port to announce to and listen on (default 4717)
          --announce-to HOST:PORT,…  send announcements there (unicast) instead of broadcasting, e.g. a
                                     laptop on another subnet; up to 8 addresses
        """, valueOptions: ["listen", "ui", "discovery-port", "announce-to"], flagOptions: ["ui-any-interface", "no-discovery"])) { ctx, args in
        guard let listen = args.values["listen"] else { throw CLIError.usage("serve needs --listen HOST:PORT") }
        var address = try listenAddress(listen, option: "--listen")
        let pageAddress = try PageCommands.address(args)
        let peerTimeout = try Daemon.peerTimeout(from: ctx.environment) ?? Daemon.peerTimeoutDefaultMillis
        let console = ctx.console
        let log: @Sendable (String) -> Void = { line in
            console.err("\(Timestamp.iso8601(millis: SystemClock().nowMillis())) \(TextEscaping.terminal(line))\n")
        }
        // A home without a household: the page starts or joins one (issue 41), then the daemon
        // syncs; with `--ui off` there is nothing to wait for.
        let pageStore = PageStore()
        var ctx = ctx
        var lock: DaemonLock.Held?
        defer { lock?.release() }
        var page: UIServer?
        if let environment = pageStore.adopt(ctx) {
            ctx = ctx.sharing(environment)
        } else {
            guard let pageAddress else { throw LedgerError.noHousehold }
            try FileSystem.makeDirectory(ctx.home)
            let held = try DaemonLock.acquire(home: ctx.home)
            lock = held
            Daemon.installSignalHandlers()
            page = try PageCommands.start(ctx, at: pageAddress, store: pageStore, lock: held, log: log)
            guard page != nil else { throw CLIError("no household here yet, and the page that starts or joins one could not be served on \(pageAddress)", code: .unavailable) }
            log("no household here yet: start one or join one on the page (`kidledger ui` prints its address); syncing starts then")
            guard let environment = PageSetup.waitForHousehold(ctx, store: pageStore) else {
                page?.stop()
                log("stopped")
                return
            }
            ctx = ctx.sharing(environment)
            log("a household is here now: syncing")
        }
        let context = ctx
        let replica = try context.openReplicaForChanges()
        let household = try LedgerCommands.requireHousehold(replica)
        guard let identity = try context.identity(creating: false) else { throw CLIError("no identity on this device", code: .notPermitted) }
        guard let environment = replica.store as? LMDBEnvironment else { throw CLIError("internal: store is not LMDB", code: .software) }
        // One daemon per home (docs/SYNC.md): held until this process ends, however it ends.
        if lock == nil { lock = try DaemonLock.acquire(home: ctx.home) }
        guard let lock else { return }
        let listener: TCPListener
        var note: String?
        do { listener = try TCPListener(address: address) } catch {
            // `:PORT` is dual-stack `[::]`; a host without IPv6 serves IPv4 alone.
            guard listen.hasPrefix(":"), let v4 = try? TCPListener(address: PeerAddress(host: "0.0.0.0", port: address.port)) else {
                page?.stop()
                throw CLIError("cannot listen on \(listen): \(error)", code: .unavailable)
            }
            note = "cannot listen on \(address) (\(error)): serving on IPv4 alone (0.0.0.0:\(address.port))"
            address = PeerAddress(host: "0.0.0.0", port: address.port)
            listener = v4
        }
        let discovery = try discoverySettings(args, listen: address)
        let bound = PeerAddress(host: address.host, port: listener.port).description
        try replica.device.setSetting("listen", bound)
        lock.record(address: bound)
        Daemon.installSignalHandlers()
        log("serving \"\(household.name)\" on \(bound) (replica \(replica.replicaID.description.prefix(8))); \(Render.plural(try replica.device.peers().count, "known peer"))")
        if let note { log(note) }
        if let reason = lock.unlocked { log("warning: cannot lock \(lock.path) (\(reason)): a second daemon on this home would not be refused") }
        if page == nil, let pageAddress { page = try PageCommands.start(ctx, at: pageAddress, store: pageStore, lock: lock, log: log) }
        if let pageAddress { try PageCommands.record(page, host: pageAddress.host, in: replica) }
        let daemon = Daemon(environment: environment, household: household.id, identity: identity, listener: listener,
                            peerTimeoutMillis: peerTimeout, log: log, attention: { r in try? context.attentionReason(r) },
                            clock: context.clock,
                            scheduledBackup: { r, now in ScheduledBackup.runIfDue(home: context.home, r, now: now, log: log) })
        try daemon.run(discovery: discovery)
        page?.stop()
        if page != nil { try? replica.device.setSetting("ui", nil) }
        try? replica.device.setSetting("listen", nil)
    }

    /// What serve's discovery options ask for: nil with `--no-discovery`.
    static func discoverySettings(_ args: ParsedArguments, listen: PeerAddress) throws -> Discovery.Settings? {
        let port = args.values["discovery-port"], targets = args.values["announce-to"]
        if args.flags.contains("no-discovery") {
            guard port == nil, targets == nil else {
                throw CLIError.usage("--no-discovery turns discovery off: drop --discovery-port and --announce-to, or --no-discovery")
            }
            return nil
        }
        var settings = Discovery.Settings()
        if let port {
            guard let value = UInt16(port), value > 0 else { throw CLIError.usage("--discovery-port: \"\(port)\" is not a port number 1...65535") }
            settings.port = value
        }
        if let targets {
            let list = targets.split(separator: ",").map { String($0) }
            guard (1...8).contains(list.count) else { throw CLIError.usage("--announce-to takes 1 to 8 addresses separated by commas") }
            settings.targets = try list.map { text in
                do { return try PeerAddress(parsing: text) } catch { throw CLIError.usage("--announce-to: \(error)") }
            }
        }
        settings.loopbackOnly = listen.host == "localhost" || listen.host.hasPrefix("127.") || listen.host == "::1"
        settings.ipv6 = listen.host.contains(":")
        return settings
    }

    /// A listening address for `option` ("HOST:PORT"; port 0 asks the system for a free one).
    static func listenAddress(_ text: String, option: String) throws -> PeerAddress {
        // ":4717" means every interface, IPv6 and IPv4 (a dual-stack `[::]`), as in Syncthing's
        // and Go's listen addresses; `serve` falls back to 0.0.0.0 on a host without IPv6.
        if text.hasPrefix(":") { return try listenAddress("[::]" + text, option: option) }
        do {
            // PeerAddress itself wants a real port.
            if text.hasSuffix(":0") {
                let any = try PeerAddress(parsing: String(text.dropLast()) + "1")
                return PeerAddress(host: any.host, port: 0)
            }
            return try PeerAddress(parsing: text)
        } catch { throw CLIError.usage("\(option): \(error)") }
    }

    static let sync = CLI.Command(spec: CommandSpec(
        name: "sync", synopsis: "[HOST:PORT]", summary: "sync now with one or all known peers",
        details: "One session with each peer; exits when both sides are up to date. Exit 69 when no peer could be reached.\nA HOST:PORT that is not a known peer becomes one only when the sync with it succeeds; a failed one stores nothing.\nShows progress on a terminal for large transfers.\nA laptop whose revocation it learned still asks its peers in (exit 77 while they refuse it): a peer that lets it in holds the revocation void (an ownership recovery the revoking owner had not seen), and the sync brings the transfer that clears it here.",
        arguments: 0...1)) { ctx, args in
        let replica = try ctx.openReplica()
        let household = try LedgerCommands.requireHousehold(replica)
        guard let identity = try ctx.identity(creating: false) else { throw CLIError("no identity on this device", code: .notPermitted) }
        if let reason = try ctx.attentionReason(replica, identity: identity), try !Daemon.listsItselfRevoked(replica, identity) {
            throw CLIError("attention required: \(reason)", code: .notPermitted)
        }
        ctx.configure(replica, identity: identity)
        // One device under several addresses (typed, or found by discovery) is synced once: its
        // addresses are tried in turn until one answers.
        var groups = SyncDriver.dialGroups(try replica.device.peers()).map(\.addresses)
        // A new address is remembered only once a sync with it succeeded: a typo or a dead
        // address stores nothing (no peer, no address).
        var unknown: String?
        if let one = args.positionals.first {
            let address = try PeerCommands.validAddress(one)
            if !groups.joined().contains(address) { unknown = address }
            groups = [[address]]
        }
        guard !groups.isEmpty else {
            throw CLIError("no peers to sync with: start `kidledger serve` (it finds the household's other laptops on this network) or `kidledger peer add HOST:PORT`", code: .unavailable)
        }
        var results: [SyncDriver.Result] = []
        let meter = ProgressMeter(enabled: !ctx.json && isatty(2) == 1, console: ctx.console)
        // The peer learns where this laptop's running daemon listens, to dial it back.
        let listenPort = DaemonLock.holder(home: ctx.home)?.address.flatMap { try? PeerAddress(parsing: $0).port } ?? 0
        for addresses in groups {
            for address in addresses.prefix(Daemon.addressesPerDialMax) {
                let result = SyncDriver.sync(replica, household: household.id, with: address, identity: identity,
                                             listenPort: listenPort) { p, total in
                    meter.update(label: address, done: p.changesReceived, total: total)
                }
                meter.finish()
                if address == unknown && result.succeeded {
                    try replica.device.addPeer(address)
                    SyncDriver.record(result, in: replica)
                }
                results.append(result)
                ctx.say(SyncDriver.line(result))
                if result.succeeded || result.wasRefused { break }
            }
        }
        ctx.emit(.object([("results", .array(results.map { r in
            .object([("address", .string(r.address)), ("ok", .bool(r.succeeded)),
                     ("changesSent", .int(r.outcome?.summary?.changesSent ?? 0)),
                     ("changesReceived", .int(r.outcome?.summary?.changesApplied ?? 0)),
                     ("unauthenticated", .int(r.outcome?.summary?.unauthenticatedReceived ?? 0)),
                     ("heldBack", .int(r.outcome?.summary?.heldBackReceived ?? 0)),
                     ("bytes", .int((r.outcome?.summary?.bytesSent ?? 0) + (r.outcome?.summary?.bytesReceived ?? 0))),
                     ("wireBytesSent", .int(r.wireBytesSent)), ("wireBytesReceived", .int(r.wireBytesReceived)),
                     ("micros", .int(Int((r.seconds * 1_000_000).rounded()))),
                     ("upToDate", .bool(r.outcome?.summary?.bothUpToDate ?? false)),
                     ("error", r.failure.map(JSON.string) ?? .null),
                     ("revocation", r.learned.map { JSON.string(SyncDriver.name(of: $0)) } ?? .null)])
        })), ("digest", .string(try replica.digest().description))]))
        if let reason = try ctx.attentionReason(replica, identity: identity) {
            throw CLIError("attention required: \(reason)", code: .notPermitted)
        }
        if results.allSatisfy({ !$0.succeeded }) {
            // Laptops that share no protocol version with this one: say which to update.
            let gaps = results.compactMap(\.versionGap)
            if !gaps.isEmpty, gaps.count == results.count { throw CLIError(gaps.joined(separator: "; "), code: .unavailable) }
            throw CLIError("no peer could be reached", code: .unavailable)
        }
    }

    static let invite = CLI.Command(spec: CommandSpec(
        name: "invite", synopsis: "[--address HOST:PORT] [--minutes N]", summary: "print a one-time code another device joins with",
        details: """
        Prints two codes for one invitation; either works, once, for N minutes (default 60):
        - a short code, XXXX-XXXX-XXXX, to read aloud or type on another laptop on this network: the daemon
          announces the open invitation on the LAN (UDP 4717), `join` finds it there and proves the code without
          sending it (a PAKE); after 5 tries that do not match, the short code is burned;
        - the long code, KL1-…, which carries where to reach this device's daemon (the address of the
          `kidledger serve` running for this home, or --address; for a daemon on every interface, this laptop's
          LAN addresses), the household and a secret: for joining from another network. With a relay granted
          (`kidledger relay add`) it names the relay too, so a laptop that can't reach this one joins through it.
        On a terminal it also draws the long code as a QR code (--qr draws it anyway, --no-qr never), and shows
        this laptop's key fingerprint, which `join` shows too: check that they match.
          --qr / --no-qr   draw the QR code even when standard output is not a terminal / never
        Keep `kidledger serve` running. Warns on standard error (and in --json `warnings`) when the address is a
        loopback one (127.0.0.0/8, ::1, localhost: another laptop can't reach it) or when no daemon runs here.
        """, valueOptions: ["address", "minutes"], flagOptions: ["qr", "no-qr"])) { ctx, args in
        if args.has("qr") && args.has("no-qr") { throw CLIError.usage("--qr and --no-qr contradict each other: give one") }
        let replica = try ctx.openReplicaForChanges()
        let household = try LedgerCommands.requireHousehold(replica)
        guard let me = try ctx.identity(creating: false), let owner = try replica.members().first(where: \.isOwner),
              owner.key == me.publicKey.bytes else {
            throw CLIError("only the household's owner can invite", code: .notPermitted)
        }
        var minutes = 60
        if let raw = args.values["minutes"] {
            guard let n = Int(raw), (1...10_080).contains(n) else { throw CLIError.usage("--minutes takes 1 to 10080, got \"\(raw)\"") }
            minutes = n
        }
        // The live daemon is the one holding the home's lock (docs/SYNC.md); its address is the
        // one it bound, never a stale one a killed daemon left behind.
        let live = DaemonLock.holder(home: ctx.home)
        let address: String
        if let given = args.values["address"] {
            address = try PeerCommands.validAddress(given)
        } else if let listening = live?.address {
            address = listening
        } else if let live {
            throw CLIError("the daemon of this home (pid \(live.pid)) is still starting; try again in a moment, or pass --address HOST:PORT", code: .temporaryFailure)
        } else {
            throw CLIError.usage("no daemon runs for this home: start `kidledger serve --listen HOST:PORT` first, or pass --address HOST:PORT")
        }
        // A daemon on every interface is reached on this laptop's LAN addresses (an --address
        // given as a wildcard is refused: the code must name a reachable address).
        var addresses = [address]
        if isWildcard(address) {
            let lan = args.values["address"] == nil ? lanAddresses(for: address, hosts: LocalInterfaces.hosts()) : []
            guard !lan.isEmpty else {
                throw CLIError.usage("the daemon listens on every interface (\(address)); pass --address with this device's LAN address")
            }
            addresses = lan
        }
        let warnings = inviteWarnings(address: addresses[0], daemonRunning: live != nil)
        for warning in warnings { ctx.console.err("kidledger: warning: \(TextEscaping.terminal(warning))\n") }
        var random = SystemRandomNumberGenerator()
        let secret = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
        let expires = SystemClock().nowMillis() + Int64(minutes) * 60_000
        // Only the invitation's key is kept here: the joiner's handshake must open with it.
        guard try replica.device.addInvite(key: SecureChannel.invitationKey(secret: secret), expiresAtMillis: expires) else {
            let first = try replica.device.openInvites().map(\.expiresAtMillis).min() ?? expires
            throw CLIError("\(DeviceState.openInvitesMax) invitations are open here already; use one (each works once) or wait until the first expires at \(ctx.time.stamped(first))", code: .temporaryFailure)
        }
        // The joiner pins this household's one genesis by its hash (docs/SECURITY.md, "One genesis").
        guard let genesis = try replica.genesisHash() else {
            throw CLIError("this household was created without membership: it can't invite (create one with `kidledger init`)", code: .dataError)
        }
        let code = InviteCode(household: household.id, owner: me.publicKey.bytes, genesis: genesis, secret: secret,
                              expiresAtMillis: expires, addresses: addresses, relay: try inviteRelay(replica, owner: me)).text
        // The same invitation's short code: the daemon hands the long code to whoever proves it.
        var short: ShortCode?
        _ = try replica.device.addShortInvite(invitationKey: SecureChannel.invitationKey(secret: secret), code: code, expiresAtMillis: expires) { slot in
            let made = ShortCode(slot: slot, using: &random)
            short = made
            return made.password
        }
        let fingerprint = me.publicKey.fingerprint
        ctx.emit(.object([("shortCode", short.map { .string($0.text) } ?? .null), ("code", .string(code)), ("expiresAtMillis", .int(expires)),
                          ("address", .string(addresses[0])), ("addresses", .array(addresses.map(JSON.string))),
                          ("fingerprint", .string(fingerprint)),
                          ("daemonRunning", .bool(live != nil)), ("warnings", .array(warnings.map(JSON.string))),
                          ("qrSvg", ShortCodeJoin.qrSVG(code).map(JSON.string) ?? .null)]))
        var text = ""
        if let short { text += "On another laptop on this network run:\n  kidledger join \(short.text)\nFrom another network:\n" } else { text += "On the other device run:\n" }
        text += "  kidledger join \(code)\n"
        if args.has("qr") || (!args.has("no-qr") && isatty(1) == 1), let qr = ShortCodeJoin.qr(code) { text += qr }
        text += "The code works once, until \(ctx.time.stamped(expires)). This laptop's key fingerprint is \(fingerprint): `join` shows it too."
        ctx.say(text)
    }

    static let join = CLI.Command(spec: CommandSpec(
        name: "join", synopsis: "CODE [--replace] [--name DISPLAY]", summary: "join a household with a code from `kidledger invite`",
        details: """
        Connects to the inviting device, receives the whole ledger and remembers that device as a peer.
        CODE is the short code (XXXX-XXXX-XXXX; case, spaces, dashes, O for 0 and I or L for 1 are forgiven) or
        the long one (KL1-…). With the short code, join listens on UDP 4717 for the inviting daemon's
        announcement of the invitation (up to 30 s) and proves the code to it without sending it; a mistyped
        code is reported as mistyped (exit 65) and changes nothing.
          --address HOST:PORT      with a short code: ask the daemon there, without listening for announcements
          --discovery-port PORT    with a short code: the UDP port to listen on (default 4717)
          --wait SECONDS           with a short code: how long to listen (1...600, default 30); with a long code
                                   that names a relay: how long to wait for the owner's laptop (default 300)
        When no address of a long code answers and the code names the household's relay, join asks through
        the relay: it leaves a sealed request there and waits until the owner's laptop (its daemon, which
        syncs with the relay every 30 s, or `kidledger relay sync` there) lets it in, then takes the whole
        ledger from the relay. The message and --json are a direct join's, with `via` "relay" and `peer` null.
        A home that already holds a different ledger with children or transactions is not merged into it:
        join refuses, unless --replace, which first writes a backup CSV of the old ledger and says where.
          --name DISPLAY   the name the household knows you by (default: the account's name, or the login
                           name for the "default" account; change it with `kidledger account rename`).
                           The other laptops learn it at the next sync.
        """, valueOptions: ["name", "address", "discovery-port", "wait"], flagOptions: ["replace"], arguments: 1...1)) { ctx, args in
        let displayName = try ctx.displayName(args)
        let (code, shortCodeOwner) = try invitation(args, ctx: ctx)
        if code.expiresAtMillis < SystemClock().nowMillis() {
            throw CLIError("this invitation expired at \(ctx.time.stamped(code.expiresAtMillis)); ask for a new one", code: .dataError)
        }
        // Decide about an existing ledger first; change nothing until the join has succeeded.
        var replacing: Replica?
        if FileSystem.exists(ctx.storePath + "/data.mdb") {
            let existing = try ctx.openReplica()
            if let h = try existing.household(), h.id == code.household {
                return try syncAsMember(existing, code: code, ctx: ctx)
            }
            try refuseMerging(into: existing, replace: args.has("replace"))
            replacing = existing
        }
        // Join into a fresh store beside the home's; it replaces the home's only on success.
        let homeExisted = FileSystem.exists(ctx.home)
        let staging = ctx.joinStagingPath
        try? FileSystem.removeTree(staging)
        let replica = try ctx.openReplica(at: staging, creating: true)
        guard let me = try ctx.identity(creating: true) else { throw CLIError("no identity", code: .software) }
        func abandon() {
            (replica.store as? LMDBEnvironment)?.close()
            try? FileSystem.removeTree(staging)
            if !homeExisted { rmdir(ctx.home) }
        }
        // Only the invited household can become this home's: its genuine genesis names its owner
        // (the inviting device is its current owner, not always the genesis owner after a
        // `recover`).
        try replica.pinOwnedHousehold(code.household, genesis: code.genesis)
        var last: SyncDriver.Result?
        for address in code.addresses {
            try replica.device.addPeer(address)
            let result = SyncDriver.sync(replica, household: code.household, with: address, identity: me,
                                         invitationKey: SecureChannel.invitationKey(secret: code.secret), expectedPeer: code.owner)
            last = result
            if result.succeeded { break }
            try replica.device.removePeer(address)
            if result.wasRefused {
                abandon()
                throw CLIError("the inviting device refused: \(TextEscaping.terminal(result.failure ?? "no reason given"))", code: .notPermitted)
            }
        }
        // None answered: through the relay the code names (docs/RELAY-DESIGN.md, "Joining through the relay").
        var viaRelay: EpochKeyring?
        if last?.succeeded != true, let relay = code.relay {
            do {
                viaRelay = try joinThroughRelay(replica, code, relay: relay, me: me, tried: last, waitSeconds: try waitSeconds(args, default: 300), ctx: ctx)
            } catch {
                abandon()
                throw error
            }
        }
        let peer = last?.succeeded == true ? last?.address : nil
        guard peer != nil || viaRelay != nil, let h = try replica.household(), h.id == code.household else {
            abandon()
            let failure = TextEscaping.terminal(last?.failure ?? "no address")
            // The connection failure may already ask whether the daemon runs; don't ask twice.
            let hint = failure.contains("kidledger serve") ? "" : "; is `kidledger serve` running there?"
            // The short code is used up by its hand-over: the long code it stood for still works.
            let again = shortCodeOwner ? "the short code is used up; run `kidledger join \(code.text)` (its long code)" : "run this `kidledger join` again"
            throw CLIError("could not reach the inviting device (\(code.addresses.joined(separator: ", "))): \(failure)\(hint); nothing was changed here: \(again) once it is reachable", code: .unavailable)
        }
        var backup: String?
        if let old = replacing {
            if try old.household() != nil { backup = try writeBackup(old, ctx: ctx) }
            (old.store as? LMDBEnvironment)?.close()
            try removeStore(ctx)
        }
        ctx.configure(replica, identity: me)
        try replica.setMemberName(displayName, of: me.publicKey.bytes)
        // With a relay granted, this member's relay key too, so the owner's next access list names it.
        _ = try replica.publishRelayKeys(identity: me)
        // The inviting device learns the name at once (now as a member's sync, or an upload to
        // the relay as the guest key); if that fails, it learns it at the next sync.
        if let peer {
            _ = SyncDriver.sync(replica, household: code.household, with: peer, identity: me)
        } else if let keyring = viaRelay, let relay = code.relay {
            if let failure = RelayJoin.upload(replica, code, relay: relay, identity: me, keyring: keyring) {
                ctx.console.err("kidledger: warning: this laptop's name and relay key reach the relay at its next sync: \(TextEscaping.terminal(failure))\n")
            }
            // Its sessions run as the guest key until the owner lists this laptop's own relay key.
            try RelayRecord.keepGuest(try RelayJoin.guest(code, relay: relay), in: replica, relay: relay.key)
        }
        try replica.device.setSetting("memberKey", me.publicKey.hex)
        try replica.device.setSetting("memberAccount", ctx.accountName)
        let counts = try replica.counts()
        (replica.store as? LMDBEnvironment)?.close()
        try FileSystem.removeTree(ctx.storePath)
        guard rename(staging, ctx.storePath) == 0 else {
            throw CLIError("joined, but could not move \(staging) to \(ctx.storePath): \(String(cString: strerror(errno)))", code: .ioError)
        }
        if let backup { ctx.say("The previous ledger was saved to \(backup).") }
        let how = peer.map { "Peer \(TextEscaping.terminal($0)) added." } ?? "Joined through the relay \(PublicKey(bytes: code.relay?.key ?? [])?.fingerprint ?? "?")."
        ctx.say("Joined \"\(TextEscaping.terminal(h.name))\": \(Render.plural(counts.children, "child", "children")), \(Render.plural(counts.transactions, "transaction")). \(how)")
        let owner = PublicKey(bytes: code.owner)?.fingerprint ?? "?"
        if shortCodeOwner { ctx.say("The inviting laptop's key fingerprint is \(owner): check that `kidledger invite` showed the same there.") }
        ctx.emit(.object([("household", Render.household(h)), ("peer", peer.map(JSON.string) ?? .null), ("via", .string(peer == nil ? "relay" : "direct")),
                          ("children", .int(counts.children)), ("transactions", .int(counts.transactions)),
                          ("ownerFingerprint", .string(owner)), ("backup", backup.map(JSON.string) ?? .null)]))
    }

    /// `--wait` in seconds (1...600), or `fallback`.
    static func waitSeconds(_ args: ParsedArguments, default fallback: Int) throws -> Int {
        guard let raw = args.values["wait"] else { return fallback }
        guard let value = Int(raw), (1...600).contains(value) else { throw CLIError.usage("--wait takes 1 to 600 seconds, got \"\(raw)\"") }
        return value
    }

    /// The relay part of an invitation: the household's first granted relay with an address, and
    /// the owner's relay key there (whose mailbox takes the join request); nil without one.
    static func inviteRelay(_ replica: Replica, owner: Identity) throws -> InviteCode.Relay? {
        guard let granted = try replica.relays().first(where: { !$0.addresses.isEmpty }) else { return nil }
        return InviteCode.Relay(key: granted.key, streamKey: granted.streamKey,
                                ownerRelayKey: try RelayMemberIdentity.derive(from: owner, relay: granted.key).publicKey.bytes,
                                addresses: Array(granted.addresses.prefix(InviteCode.relayAddressesMax)))
    }

    /// A join through `relay` when no address of `code` answered (`tried`: the last direct try):
    /// asks, waits at most `waitSeconds` for the owner's laptop, then downloads the ledger into
    /// `replica` and checks it is the household's with this laptop a member. Returns the keyring.
    static func joinThroughRelay(_ replica: Replica, _ code: InviteCode, relay: InviteCode.Relay, me: Identity, tried: SyncDriver.Result?,
                                 waitSeconds: Int, ctx: Context) throws -> EpochKeyring {
        let fingerprint = PublicKey(bytes: relay.key)?.fingerprint ?? "?"
        // Progress on a terminal's standard error, as `sync`'s meter (elsewhere the error, if any, is the first line).
        let progress: (String) -> Void = { line in if !ctx.json && isatty(2) == 1 { ctx.console.err(line + "\n") } }
        let direct = code.addresses.isEmpty ? "The invitation names no address" : "The owner's laptop is not reachable directly (\(TextEscaping.terminal(tried?.failure ?? "no answer")))"
        progress("\(direct); asking through the relay \(fingerprint); waiting up to \(waitSeconds) s for the owner's laptop to let this one in (it syncs with the relay every 30 s).")
        let key: EpochKey
        do { key = try RelayJoin.awaitAdmission(code, relay: relay, me: me, waitMillis: Int64(waitSeconds) * 1_000, progress: progress) } catch {
            switch error {
            case .timedOut(let why):
                throw CLIError("the owner's laptop did not let this one in through the relay \(fingerprint) within \(waitSeconds) s (\(TextEscaping.terminal(why))): it must be on and synced with the relay (its daemon running, or `kidledger relay sync` there); nothing was changed here: run this `kidledger join` again", code: .unavailable)
            case .failed(let why):
                throw CLIError("could not join through the relay \(fingerprint): \(TextEscaping.terminal(why)); nothing was changed here", code: .unavailable)
            }
        }
        progress("Let in; taking the ledger from the relay.")
        let keyring: EpochKeyring
        do { keyring = try RelayJoin.download(into: replica, code, relay: relay, key: key) } catch {
            throw CLIError("could not take the ledger from the relay \(fingerprint): \(TextEscaping.terminal(error.description)); nothing was changed here: run this `kidledger join` again", code: .unavailable)
        }
        guard try replica.household()?.id == code.household, try replica.members().contains(where: { $0.key == me.publicKey.bytes && !$0.isRevoked }) else {
            throw CLIError("the relay \(fingerprint) did not bring the whole ledger with this laptop's admission yet; nothing was changed here: run this `kidledger join` again", code: .unavailable)
        }
        return keyring
    }

    /// Refuses a join into a home that holds another household's non-empty ledger, unless `replace`.
    static func refuseMerging(into existing: Replica, replace: Bool) throws {
        guard let h = try existing.household(), !replace else { return }
        let counts = try existing.counts()
        if counts.children > 0 || counts.transactions > 0 {
            throw CLIError("this home already holds the household \"\(TextEscaping.terminal(h.name))\" (\(Render.plural(counts.children, "child", "children")), \(Render.plural(counts.transactions, "transaction"))); ledgers are never merged silently. Run `kidledger export --csv FILE` to keep a copy, then `kidledger join CODE --replace`", code: .dataError)
        }
    }

    /// The invitation `join`'s CODE stands for: the long code itself, or the long code the daemon
    /// that holds a short code hands over once the code is proved (true then).
    static func invitation(_ args: ParsedArguments, ctx: Context) throws -> (InviteCode, shortCode: Bool) {
        let text = args.positionals[0]
        let shortOptions = ["address", "discovery-port"].filter { args.values[$0] != nil }
        if InviteCode.isOlderVersion(text) {
            throw CLIError("that invitation was made by an older kidledger (it does not name the household's genesis); ask for a new one with `kidledger invite`", code: .dataError)
        }
        if let code = InviteCode(text: text) {
            guard shortOptions.isEmpty else {
                throw CLIError.usage("--\(shortOptions[0]) is for a short code; a long code (KL1-…) carries the addresses itself")
            }
            return (code, false)
        }
        let short: ShortCode
        switch ShortCode.parse(text) {
        case .success(let parsed): short = parsed
        case .failure(.mistyped(let why)):
            throw CLIError("that code is mistyped: check each character (\(why))", code: .dataError)
        case .failure(.notAShortCode):
            throw CLIError("that is not a kidledger invitation code (a short code is XXXX-XXXX-XXXX, a long one starts with KL1-)", code: .dataError)
        }
        var port = Discovery.portDefault
        if let raw = args.values["discovery-port"] {
            guard let value = UInt16(raw), value > 0 else { throw CLIError.usage("--discovery-port: \"\(raw)\" is not a port number 1...65535") }
            port = value
        }
        var wait = ShortCodeJoin.waitDefaultSeconds
        if args.values["wait"] != nil { wait = try waitSeconds(args, default: wait) }
        let address = try args.values["address"].map { try PeerCommands.validAddress($0) }
        // Proving the short code uses it up: refuse what `join` would refuse anyway first (the
        // household is not known yet, so a home with a non-empty ledger needs --replace).
        if FileSystem.exists(ctx.storePath + "/data.mdb") { try refuseMerging(into: try ctx.openReplica(), replace: args.has("replace")) }
        // The hand-over needs no member key (the daemon admits the joiner to nothing else): a
        // throwaway one, so a code that gets nowhere leaves nothing here.
        var (code, at) = try ShortCodeJoin.resolve(short, address: address, discoveryPort: port, waitSeconds: wait, identity: .generate(),
                                                   console: ctx.console, interactive: !ctx.json && isatty(2) == 1)
        // The address that answered first, then the ones the invitation names.
        code.addresses = Array(([at] + code.addresses.filter { $0 != at }).prefix(InviteCode.addressesMax))
        return (code, true)
    }

    /// Whether `address` is a wildcard (every interface): 0.0.0.0:PORT or [::]:PORT.
    static func isWildcard(_ address: String) -> Bool {
        address.hasPrefix("0.0.0.0:") || address.hasPrefix("[::]:")
    }

    /// The addresses a daemon listening on the wildcard `address` is reached on: this laptop's
    /// interface `hosts` that another laptop can reach (not loopback, not link-local; IPv6 only for
    /// `[::]`), IPv4 first, at most 4, with the daemon's port.
    static func lanAddresses(for address: String, hosts: [String]) -> [String] {
        guard isWildcard(address), let port = address.split(separator: ":").last.flatMap({ UInt16($0) }) else { return [] }
        let ipv6 = address.hasPrefix("[::]:")
        var seen = Set<String>()
        let usable = hosts.filter { host in
            let lower = host.lowercased()
            guard !isLoopback(host: lower), !lower.hasPrefix("169.254."), !lower.hasPrefix("fe80:"), seen.insert(lower).inserted else { return false }
            return ipv6 || !lower.contains(":")
        }
        let ordered = usable.filter { !$0.contains(":") } + usable.filter { $0.contains(":") }
        return ordered.prefix(4).map { PeerAddress(host: $0, port: port).description }
    }

    /// What `invite` warns about: an address another laptop can't reach, or no daemon to answer.
    static func inviteWarnings(address: String, daemonRunning: Bool) -> [String] {
        var warnings: [String] = []
        if let parsed = try? PeerAddress(parsing: address), isLoopback(host: parsed.host) {
            warnings.append("\(address) is a loopback address: another laptop can't reach it. Serve on every interface (`kidledger serve --listen :4717`) or pass --address with this laptop's LAN address (`ip -brief address` lists them)")
        }
        if !daemonRunning {
            warnings.append("no daemon runs for this home now: the code works only while `kidledger serve` (or `kidledger service install`) runs here")
        }
        return warnings
    }

    /// Whether `host` names this machine only: 127.0.0.0/8, ::1, an IPv4-mapped 127.x address, or `localhost`.
    static func isLoopback(host: String) -> Bool {
        let name = host.lowercased()
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, name, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, name, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes == [UInt8](repeating: 0, count: 15) + [1] { return true }
        return Array(bytes.prefix(12)) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] && bytes[12] == 127
    }

    /// `join` on a home that already belongs to the household: sync instead of spending the code.
    static func syncAsMember(_ replica: Replica, code: InviteCode, ctx: Context) throws {
        if let reason = try ctx.attentionReason(replica) { throw CLIError("attention required: \(reason)", code: .notPermitted) }
        guard let me = try ctx.identity(creating: false) else { throw CLIError("no identity on this device", code: .notPermitted) }
        var last: SyncDriver.Result?
        for address in code.addresses {
            let added = try replica.device.addPeer(address)
            let result = SyncDriver.sync(replica, household: code.household, with: address, identity: me)
            last = result
            if result.succeeded { break }
            if added { try replica.device.removePeer(address) }
        }
        guard let result = last, result.succeeded, let h = try replica.household() else {
            throw CLIError("could not reach the inviting device (\(code.addresses.joined(separator: ", "))): \(TextEscaping.terminal(last?.failure ?? "no address"))", code: .unavailable)
        }
        ctx.say("This home already belongs to \"\(TextEscaping.terminal(h.name))\"; synced with \(TextEscaping.terminal(result.address)) instead of joining again.")
        ctx.emit(.object([("household", Render.household(h)), ("peer", .string(result.address)), ("alreadyMember", .bool(true))]))
    }

    static func writeBackup(_ replica: Replica, ctx: Context) throws -> String {
        var names: [RecordID: String] = [:]
        for c in try replica.children(includeArchived: true, includeMerged: true) { names[c.id] = c.name }
        let path = "\(ctx.home)/backup-\(Timestamp.iso8601(millis: SystemClock().nowMillis()).replacingColons()).csv"
        try FileSystem.writeFile(path, LedgerCSV.export(try replica.allTransactions(), childNames: names))
        return path
    }

    static func removeStore(_ ctx: Context) throws {
        for file in ["data.mdb", "lock.mdb"] where FileSystem.exists(ctx.storePath + "/" + file) {
            guard unlink(ctx.storePath + "/" + file) == 0 else {
                throw CLIError("cannot remove the old ledger in \(ctx.storePath): \(String(cString: strerror(errno)))", code: .ioError)
            }
        }
    }
}

extension String {
    /// The string with ":" replaced by "-" (for file names).
    func replacingColons() -> String { String(map { $0 == ":" ? "-" : $0 }) }
}

/// A one-line progress display on a terminal: "label: done/total changes (rate/s)".
///
/// Not `Sendable`: `sync` updates it from the session's progress callback, which runs on the
/// thread that runs the session (``SessionRunner``), the thread that made the meter.
final class ProgressMeter {
    let enabled: Bool
    let console: Console
    var started = Monotonic.millis()
    var lastDraw: Int64 = 0
    var drawn = false

    init(enabled: Bool, console: Console) {
        self.enabled = enabled
        self.console = console
    }

    func update(label: String, done: Int, total: Int) {
        guard enabled, total >= 1_000 else { return }
        let now = Monotonic.millis()
        guard now - lastDraw >= 100 || done >= total else { return }
        lastDraw = now
        let rate = Int(Double(done) / max(Double(now - started) / 1000, 0.001))
        console.err("\r\(label): \(done)/\(total) changes (\(rate)/s)   ")
        drawn = true
    }

    func finish() {
        if drawn { console.err("\n") }
        drawn = false
        started = Monotonic.millis()
    }
}

/// This machine's interface addresses (getifaddrs(3)).
enum LocalInterfaces {
    /// The numeric hosts of the interfaces that are up, in the system's order (loopback included).
    static func hosts() -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var hosts: [String] = []
        var next = list
        while let entry = next {
            next = entry.pointee.ifa_next
            let up: UInt32 = 0x1  // IFF_UP
            guard entry.pointee.ifa_flags & up != 0, let address = entry.pointee.ifa_addr else { continue }
            let family = Int32(address.pointee.sa_family)
            guard family == AF_INET || family == AF_INET6 else { continue }
            let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            var name = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            guard getnameinfo(address, length, &name, socklen_t(name.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            hosts.append(String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return hosts
    }
}

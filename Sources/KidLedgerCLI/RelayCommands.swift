#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerTransport
import KidLedgerLMDB
import KidLedgerSecurity
import KidLedgerSystem
import KidLedgerDaemon

/// `relay serve`, `relay add`, `relay remove`, `relay status`, `relay sync` (docs/RELAY-DESIGN.md).
enum RelayCommands {
    static let all: [CLI.Command] = [serve, add, remove, status, sync]

    /// The relay home's files: its device key (account "relay"), its store, the owner it pinned,
    /// the secret of its code while no owner adopted it, and the code as printed.
    struct Home {
        let path: String
        var keyStore: KeyStore { KeyStore(directory: path + "/identities") }
        var store: String { path + "/relay" }
        var owner: String { path + "/relay-owner" }
        var secret: String { path + "/relay-secret" }
        var code: String { path + "/relay-code.txt" }
        static let account = "relay"
    }

    static let serve = CLI.Command(spec: CommandSpec(
        name: "relay serve", synopsis: "--listen HOST:PORT", summary: "run a sealed relay for a household (on the relay machine)",
        details: """
        Runs the relay in this home (--home or KIDLEDGER_HOME; a relay home holds the relay's device key and its
        store, never a ledger). Until an owner adopts it, it prints a one-time relay code (KLR1-…, also kept in
        HOME/relay-code.txt) carrying its key, a secret and where to dial it: run `kidledger relay add CODE` on the
        owner's laptop. Afterwards it serves only the keys on the owner's signed access list, and reads nothing
        it stores. Logs one line per session to standard error; stops on SIGINT or SIGTERM.
        One relay per home (HOME/daemon.lock).
          --address HOST:PORT   the address the code names (default: the bound address; for a wildcard
                                listen address, this machine's LAN addresses)
        """, valueOptions: ["listen", "address"])) { ctx, args in
        guard let listen = args.values["listen"] else { throw CLIError.usage("relay serve needs --listen HOST:PORT") }
        let address = try NetworkCommands.listenAddress(listen, option: "--listen")
        let home = Home(path: ctx.home)
        if FileSystem.exists(ctx.storePath + "/data.mdb") {
            throw CLIError.usage("\(ctx.home) holds a ledger: a relay runs in a home of its own (pass --home DIR or set KIDLEDGER_HOME)")
        }
        try FileSystem.makeDirectory(ctx.home)
        let lock = try DaemonLock.acquire(home: ctx.home)
        defer { lock.release() }
        let identity: Identity
        do { identity = try home.keyStore.load(account: Home.account) ?? home.keyStore.create(account: Home.account, seed: Sodium.randomBytes(Identity.seedByteCount)) } catch {
            throw CLIError("the relay's device key: \(error)", code: .ioError)
        }
        let environment = try LMDBEnvironment(directory: home.store, tables: RelayStore.tables, mapSizeBytes: 64 << 20, mapSizeBytesMax: try ctx.mapSizeMax())
        defer { environment.close() }
        let pin = FileSystem.exists(home.owner) ? RelayPin(text: try FileSystem.readFile(home.owner)) : nil
        if FileSystem.exists(home.owner) && pin == nil { throw CLIError("\(home.owner) is damaged: it holds no owner key", code: .dataError) }
        let owner = pin?.owner
        let listener: TCPListener
        do { listener = try TCPListener(address: address) } catch { throw CLIError("cannot listen on \(listen): \(error)", code: .unavailable) }
        let bound = PeerAddress(host: address.host, port: listener.port).description
        lock.record(address: bound)
        let console = ctx.console
        let log: @Sendable (String) -> Void = { line in
            console.err("\(Timestamp.iso8601(millis: SystemClock().nowMillis())) \(TextEscaping.terminal(line))\n")
        }
        var secret: [UInt8]?
        if owner == nil {
            if let kept = FileSystem.exists(home.secret) ? Hex.decode(try FileSystem.readFile(home.secret).trimmingSuffixNewlines()) : nil,
               RelayCode.secretBytes.contains(kept.count) {
                secret = kept
            } else {
                let fresh = Sodium.randomBytes(16)
                try FileSystem.writeFile(home.secret, Hex.encode(fresh) + "\n")
                secret = fresh
            }
            var addresses = [try args.values["address"].map(PeerCommands.validAddress) ?? bound]
            if args.values["address"] == nil, NetworkCommands.isWildcard(bound) {
                addresses = Array(NetworkCommands.lanAddresses(for: bound, hosts: LocalInterfaces.hosts()).prefix(Limits.relayAddressesMax))
                guard !addresses.isEmpty else { throw CLIError.usage("the relay listens on every interface (\(bound)); pass --address with this machine's address") }
            }
            let code = RelayCode(relay: identity.publicKey.bytes, secret: secret ?? [], addresses: addresses).text
            try FileSystem.writeFile(home.code, code + "\n")
            ctx.emit(.object([("code", .string(code)), ("address", .string(addresses[0])), ("fingerprint", .string(identity.publicKey.fingerprint))]))
            ctx.say("relay code (one-time; also in \(home.code)):\n  \(code)\nOn the household owner's laptop run:\n  kidledger relay add \(code)\nThis relay's key fingerprint is \(identity.publicKey.fingerprint).")
        }
        Daemon.installSignalHandlers()
        let peerTimeout = try Daemon.peerTimeout(from: ctx.environment) ?? Daemon.peerTimeoutDefaultMillis
        let homeCopy = home
        let server = RelayServer(environment: environment, identity: identity, listener: listener,
                                 adoption: RelayServer.Adoption(pin: pin, secret: secret), peerTimeoutMillis: peerTimeout, log: log,
                                 persist: { pin in
                                     try FileSystem.writeFile(homeCopy.owner, pin.text)
                                     _ = unlink(homeCopy.secret)
                                     _ = unlink(homeCopy.code)
                                 })
        log("relay serving on \(bound) (key \(identity.publicKey.fingerprint)); " + (owner.map { "adopted by owner key \($0.fingerprint)" } ?? "not adopted yet: its code is in \(home.code)"))
        server.run()
    }

    static let add = CLI.Command(spec: CommandSpec(
        name: "relay add", synopsis: "CODE [--address HOST:PORT]", summary: "adopt a relay for the household (owner only)",
        details: """
        CODE is the KLR1-… code `kidledger relay serve` printed on the relay machine. Dials the relay (at the code's
        address, or --address), pins its key from the code, proves the code's secret and hands it the access list
        (owner-signed: the members' relay keys, 256 MiB each); then grants the relay in the ledger (every laptop
        learns it at its next sync; the new relay epoch is sealed to every member) and syncs this laptop through it.
        A HOST:PORT instead of a code is a usage error: a relay is added once, by its code; its later addresses
        come from the grant (remove and add a new relay to change them). Only the owner; exit 77 otherwise.
        """, valueOptions: ["address"], arguments: 1...1)) { ctx, args in
        let text = args.positionals[0]
        guard let code = RelayCode(text: text) else {
            if (try? PeerAddress(parsing: text)) != nil {
                throw CLIError.usage("relay add takes the KLR1-… code `kidledger relay serve` printed, not an address (pass the address with --address CODE's relay moved)")
            }
            throw CLIError("that is not a relay code (KLR1-…): copy the whole code `kidledger relay serve` printed", code: .dataError)
        }
        let address = try args.values["address"].map(PeerCommands.validAddress)
        let replica = try ctx.openReplicaForChanges()
        _ = try LedgerCommands.requireHousehold(replica)
        let me = try requireOwner(ctx, replica, doing: "add a relay")
        if try replica.relays().contains(where: { $0.key == code.relay }) { throw CLIError("that relay is granted already", code: .dataError) }
        let now = SystemClock().nowMillis()
        let list = try RelayDriver.accessList(replica, owner: me, relay: code.relay, now: now)
        // The recovery public key lets the relay follow a recovery (an owner change it verifies).
        let recovery = try replica.genesis().flatMap { PublicKey(bytes: $0.recovery) }
        let used: String
        do { used = try RelayDriver.adopt(code, address: address, owner: me, list: list, recovery: recovery) } catch let error as RelayAdoptionError {
            if case .refused = error { throw CLIError(error.description, code: .notPermitted) }
            throw CLIError(error.description, code: .unavailable)
        }
        var random = SystemRandomNumberGenerator()
        let addresses = address.map { [$0] } ?? code.addresses
        try replica.addRelay(code.relay, addresses: addresses, owner: me, using: &random)
        _ = try replica.publishRelayKeys(identity: me)
        let granted = try replica.relays().first { $0.key == code.relay }
        let result = granted.map { RelayDriver.sync(replica, identity: me, relay: $0, owner: true, now: SystemClock().nowMillis(), list: list) }
        let fingerprint = PublicKey(bytes: code.relay)?.fingerprint ?? "?"
        ctx.emit(.object([("relay", .string(Hex.encode(code.relay))), ("fingerprint", .string(fingerprint)), ("address", .string(used)),
                          ("addresses", .array(addresses.map(JSON.string))), ("synced", .bool(result?.succeeded ?? false)),
                          ("error", result?.failure.map(JSON.string) ?? .null)]))
        ctx.say("added the relay \(fingerprint) at \(used): every laptop of the household learns it at its next sync and syncs through it")
        if let result { ctx.say(RelayDriver.line(result)) }
    }

    static let remove = CLI.Command(spec: CommandSpec(
        name: "relay remove", synopsis: "[FINGERPRINT]", summary: "remove the household's relay (owner only)",
        details: """
        Tells the relay (when reachable) to serve nobody of this household (a newer access list naming no member),
        then revokes its grant in the ledger: every laptop stops dialling it at its next sync, and a relay once
        removed can't be added again. What the relay stored stays in its home, sealed (it can't read it): wipe the
        relay's home to delete it. FINGERPRINT picks one of several relays. Only the owner; exit 77 otherwise.
        """, arguments: 0...1)) { ctx, args in
        let replica = try ctx.openReplicaForChanges()
        _ = try LedgerCommands.requireHousehold(replica)
        let me = try requireOwner(ctx, replica, doing: "remove a relay")
        let relay = try pick(try replica.relays(), args.positionals.first)
        let list = try RelayDriver.closingList(replica, owner: me, relay: relay.key, now: SystemClock().nowMillis())
        let told = RelayDriver.sync(replica, identity: me, relay: relay, owner: true, now: SystemClock().nowMillis(), list: list)
        let installed = told.summary.installedAccessList != nil
        try replica.removeRelay(relay.key, owner: me)
        let fingerprint = PublicKey(bytes: relay.key)?.fingerprint ?? "?"
        ctx.emit(.object([("relay", .string(Hex.encode(relay.key))), ("fingerprint", .string(fingerprint)), ("relayTold", .bool(installed))]))
        ctx.say("removed the relay \(fingerprint)" + (installed ? "; it serves nobody of this household now" : "; it could not be told (\(told.failure ?? "it kept its list")): it refuses nobody until it is, but nothing new is sealed for it to hold"))
    }

    static let status = CLI.Command(spec: CommandSpec(
        name: "relay status", synopsis: "", summary: "the household's relays and what they last told of each laptop",
        details: "Per granted relay: its key fingerprint, addresses, the last session from this laptop (when, and why it failed), whether the relay is out of date (it lacked changes this laptop holds after that session, had lost what it held, or that session is over a day old; --json: outOfDate, relayLacks), whether it has yet to learn of this laptop's recovery (--json: ownerChangePending) and when the relay last saw each member sync.")) { ctx, _ in
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        let relays = try replica.relays()
        let names = Dictionary(try replica.members().map { (Hex.encode($0.key), $0.name) }, uniquingKeysWith: { a, _ in a })
        var objects: [JSON] = []
        var text = relays.isEmpty ? "no relay: the owner adds one with `kidledger relay add CODE`\n" : ""
        for relay in relays {
            let last = try RelayRecord.last(replica, relay: relay.key) ?? RelayRecord.Last()
            let fingerprint = PublicKey(bytes: relay.key)?.fingerprint ?? "?"
            let outOfDate = RelayRecord.outOfDate(last, now: ctx.clock.nowMillis())
            // After `recover`: the statement this laptop still has to hand the relay (RelayDriver.changeOwner).
            let ownerChangePending = try RelayRecord.pendingStatement(replica, relay: relay.key) != nil
            objects.append(.object([("relay", .string(Hex.encode(relay.key))), ("fingerprint", .string(fingerprint)),
                                    ("addresses", .array(relay.addresses.map(JSON.string))),
                                    ("lastAttemptMillis", last.attemptMillis > 0 ? .int(Int(last.attemptMillis)) : .null),
                                    ("lastSuccessMillis", last.successMillis > 0 ? .int(Int(last.successMillis)) : .null),
                                    ("error", last.error.isEmpty ? .null : .string(last.error)), ("refused", .bool(last.refused)),
                                    ("outOfDate", outOfDate.map(JSON.string) ?? .null), ("relayLacks", .int(last.lacks)),
                                    ("ownerChangePending", .bool(ownerChangePending)),
                                    ("members", .array(last.members.sorted { $0.key < $1.key }.map { key, millis in
                                        .object([("member", .string(key)), ("name", names[key].map(JSON.string) ?? .null),
                                                 ("lastSyncMillis", millis > 0 ? .int(Int(millis)) : .null)])
                                    }))]))
            text += "relay \(fingerprint) at \(relay.addresses.joined(separator: ", ")): "
            if last.attemptMillis == 0 { text += "not synced with from this laptop yet\n" }
            else if last.error.isEmpty { text += "last synced \(ctx.time.stamped(last.successMillis))\n" }
            else { text += "\(last.refused ? "refused" : "unreachable") at \(ctx.time.stamped(last.attemptMillis)): \(last.error)\n" }
            if let outOfDate { text += "  out of date: \(outOfDate)\n" }
            if ownerChangePending {
                text += "  recovery: the relay still takes orders from the former owner's key; this laptop's next session with it (`kidledger relay sync`, or the daemon's) hands it the recovery\n"
            }
            for (key, millis) in last.members.sorted(by: { $0.key < $1.key }) {
                text += "  \(names[key] ?? key.prefix(8) + "…"): " + (millis > 0 ? "last synced with the relay \(ctx.time.stamped(millis))" : "never synced with the relay") + "\n"
            }
        }
        ctx.emit(.object([("relays", .array(objects))]))
        ctx.say(String(text.dropLast()))
    }

    static let sync = CLI.Command(spec: CommandSpec(
        name: "relay sync", synopsis: "", summary: "sync now through the household's relay(s)",
        details: "One session with each granted relay: uploads what it lacks, sealed, and applies what the other laptops left there. Exit 69 when no relay could be reached, 77 when the relay refused this laptop.")) { ctx, _ in
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        guard let identity = try ctx.identity(creating: false) else { throw CLIError("no identity on this device", code: .notPermitted) }
        if let reason = try ctx.attentionReason(replica, identity: identity) { throw CLIError("attention required: \(reason)", code: .notPermitted) }
        ctx.configure(replica, identity: identity)
        let relays = try replica.relays()
        guard !relays.isEmpty else { throw CLIError("no relay granted: the owner adds one with `kidledger relay add CODE`", code: .unavailable) }
        let isOwner = try replica.members().contains { $0.isOwner && $0.key == identity.publicKey.bytes }
        var results: [RelayDriver.Result] = []
        for relay in relays {
            let result = RelayDriver.sync(replica, identity: identity, relay: relay, owner: isOwner, now: SystemClock().nowMillis())
            results.append(result)
            ctx.say(RelayDriver.line(result))
        }
        ctx.emit(.object([("results", .array(results.map { r in
            .object([("relay", .string(Hex.encode(r.relay))), ("address", .string(r.address)), ("ok", .bool(r.succeeded)),
                     ("changesSent", .int(r.summary.changesUploaded)), ("changesReceived", .int(r.summary.changesApplied)),
                     ("changesDeferred", .int(r.summary.changesDeferred)),
                     ("envelopesSent", .int(r.summary.envelopesUploaded)), ("envelopesReceived", .int(r.summary.envelopesReceived)),
                     ("envelopesRefused", .int(r.summary.envelopesRefused)),
                     ("bytes", .int(r.summary.bytesSent + r.summary.bytesReceived)),
                     ("micros", .int(Int((r.seconds * 1_000_000).rounded()))), ("refused", .bool(r.refused)),
                     ("error", r.failure.map(JSON.string) ?? .null)])
        })), ("digest", .string(try replica.digest().description))]))
        if results.allSatisfy({ !$0.succeeded }) {
            if results.contains(where: \.refused) { throw CLIError("the relay refused this laptop", code: .notPermitted) }
            throw CLIError("no relay could be reached", code: .unavailable)
        }
    }

    /// The owner's identity, or exit 77.
    static func requireOwner(_ ctx: Context, _ replica: Replica, doing what: String) throws -> Identity {
        guard let me = try ctx.identity(creating: false), try replica.members().contains(where: { $0.isOwner && $0.key == me.publicKey.bytes }) else {
            throw CLIError("only the household's owner can \(what)", code: .notPermitted)
        }
        return me
    }

    /// The one relay `fingerprint` names (or the only one).
    static func pick(_ relays: [GrantedRelay], _ fingerprint: String?) throws -> GrantedRelay {
        guard !relays.isEmpty else { throw CLIError("no relay is granted", code: .dataError) }
        guard let fingerprint else {
            guard relays.count == 1 else { throw CLIError.usage("\(relays.count) relays are granted: name one by its key fingerprint (`kidledger relay status`)") }
            return relays[0]
        }
        let matching = relays.filter { PublicKey(bytes: $0.key)?.fingerprint.hasPrefix(fingerprint) ?? false || Hex.encode($0.key).hasPrefix(fingerprint.lowercased()) }
        guard matching.count == 1 else { throw CLIError("no single granted relay has the fingerprint \(fingerprint)", code: .dataError) }
        return matching[0]
    }
}

extension String {
    /// The string without trailing newlines.
    func trimmingSuffixNewlines() -> String {
        var s = self
        while s.last?.isNewline == true { s.removeLast() }
        return s
    }
}

/// What `status` adds for the granted relays (docs/RELAY-DESIGN.md, "Running a relay"): per other member,
/// the route "via the relay" and when the relay last saw it sync; or that the relay was unreachable
/// or refused this laptop at the last try, and when it is out of date (``RelayRecord/outOfDate(_:now:)``).
/// Nothing when no relay is granted.
struct RelayRoutes {
    var lines: [String] = []
    var json: [JSON] = []

    init(replica: Replica, me: [UInt8]?, now: Int64) throws {
        let members = try replica.members().filter { !$0.isRevoked && $0.key != me }
        for relay in try replica.relays() {
            let last = try RelayRecord.last(replica, relay: relay.key) ?? RelayRecord.Last()
            let address = last.address.isEmpty ? relay.addresses.first ?? "?" : last.address
            var reach: String
            if last.attemptMillis == 0 {
                reach = "not tried from this laptop yet"
                lines.append("the relay at \(address) was not tried from this laptop yet")
            } else if last.error.isEmpty {
                reach = "reachable"
            } else {
                reach = last.refused ? "refused" : "unreachable"
                lines.append("the relay at \(address) \(last.refused ? "refused this laptop" : "was unreachable") \(Render.ago(last.attemptMillis, now: now)): \(TextEscaping.terminal(last.error))")
            }
            var routed: [JSON] = []
            for member in members {
                let millis = last.members[Hex.encode(member.key)] ?? 0
                routed.append(.object([("name", .string(member.name)), ("route", .string("relay")),
                                       ("lastSyncMillis", millis > 0 ? .int(Int(millis)) : .null)]))
                guard last.successMillis > 0 else { continue }
                lines.append("\(TextEscaping.terminal(member.name))'s laptop: via the relay, " + (millis > 0 ? "last synced \(Render.ago(millis, now: now))" : "not synced with the relay yet"))
            }
            if reach != "reachable" && last.attemptMillis == 0 { reach = "untried" }
            let outOfDate = RelayRecord.outOfDate(last, now: now)
            if let outOfDate { lines.append("the relay at \(address) is out of date: \(outOfDate)") }
            json.append(.object([("address", .string(address)), ("fingerprint", .string(PublicKey(bytes: relay.key)?.fingerprint ?? "?")),
                                 ("reach", .string(reach)), ("lastAttemptMillis", last.attemptMillis > 0 ? .int(Int(last.attemptMillis)) : .null),
                                 ("lastSuccessMillis", last.successMillis > 0 ? .int(Int(last.successMillis)) : .null),
                                 ("error", last.error.isEmpty ? .null : .string(last.error)),
                                 ("outOfDate", outOfDate.map(JSON.string) ?? .null), ("relayLacks", .int(last.lacks)),
                                 ("laptops", .array(routed))]))
        }
    }
}

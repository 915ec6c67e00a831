#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB
import KidLedgerTransport
import KidLedgerUI
import KidLedgerDaemon

/// The family page's commands (`ui`, `quick show|set`) and what `serve` needs to serve the page.
/// The page runs these same commands, and the ledger's, through ``runner(home:environment:store:)``.
enum PageCommands {
    static let all: [CLI.Command] = [ui, quickShow, quickSet, quickLimit]

    /// Where `serve` serves the page unless `--ui` says otherwise.
    static let defaultAddress = "127.0.0.1:4718"
    /// The device setting holding the quick amounts ("5,10,15").
    static let quickSetting = "quickAmounts"
    /// The quick amounts of a device that never set them (cents).
    static let quickDefault: [Int64] = [5, 10, 15, 20, 25, 50]
    /// The most quick amounts.
    static let quickCountMax = 6

    static let ui = CLI.Command(spec: CommandSpec(
        name: "ui", synopsis: "[--open] [--address-only]", summary: "print a one-time sign-in address of this home's page (served by `serve`)",
        details: """
        The address carries a one-time sign-in code: the first browser to open it within a minute is signed in
        for months (a cookie), and the code is spent. The home's page key (HOME/ui-token, mode 0600) never leaves
        this laptop's files. The page is served by `kidledger serve` (on 127.0.0.1:4718 unless --ui says
        otherwise), on loopback only, so only this laptop's browser reaches it. `kidledger open` starts the
        service and opens the page in one step. Before this home holds a household, the page is where one is
        started or joined (`--json`: `household` is null then).
          --open           also open it in the default browser (xdg-open)
          --address-only   print the page's address without a sign-in code
        """, flagOptions: ["open", "address-only"])) { ctx, args in
        // A daemon started in an empty home serves the page before there is a household (the page
        // starts or joins one): its address is in the daemon's lock file then.
        let holder = DaemonLock.holder(home: ctx.home)
        let replica = FileSystem.exists(ctx.storePath + "/data.mdb") ? try ctx.openReplica() : nil
        guard let replica, let household = try replica.household() else {
            guard let page = holder?.page else { throw LedgerError.noHousehold }
            let url = args.has("address-only") ? "http://\(page)/" : try signInURL(ctx, address: page)
            ctx.emit(.object([("url", .string(url)), ("address", .string(page)), ("serving", .bool(true)), ("household", .null)]))
            ctx.say(url)
            ctx.say("No household here yet: open the page to start one or to join one.")
            if args.has("open") { try open(url) }
            return
        }
        let recorded = try replica.device.setting("ui")
        // The address the daemon recorded, while a daemon holds the home's lock (or this is the
        // daemon, answering its page): a daemon that was killed leaves its address behind.
        let live = ctx.sharedStore != nil || holder != nil
        let serving = live ? recorded : nil
        let address = recorded ?? defaultAddress
        let url = args.has("address-only") ? "http://\(address)/" : try signInURL(ctx, address: address)
        ctx.emit(.object([("url", .string(url)), ("address", .string(address)), ("serving", .bool(serving != nil)),
                          ("household", Render.household(household))]))
        ctx.say(url)
        if serving == nil {
            ctx.console.err("kidledger: the page is not being served now: start `kidledger serve --listen HOST:PORT` (it serves the page on \(defaultAddress)), or run `kidledger open`\n")
        }
        if args.has("open") { try open(url) }
    }

    static let quickShow = CLI.Command(spec: CommandSpec(
        name: "quick show", synopsis: "", summary: "this device's quick amounts (the page's buttons)",
        details: "Kept on this device only, never synced. Default: 5, 10, 15, 20, 25 and 50 cents.")) { ctx, _ in
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        let amounts = try quickAmounts(replica)
        ctx.emit(.object([("quickAmountsCents", .array(amounts.map { .int($0) })), ("confirmAboveCents", .int(try replica.householdConfirmAbove()))]))
        ctx.say(amounts.map { Money.format(cents: $0) }.joined(separator: " "))
    }

    static let quickSet = CLI.Command(spec: CommandSpec(
        name: "quick set", synopsis: "AMOUNT...", summary: "set this device's quick amounts (1 to 6, unique)",
        details: "AMOUNTs as for give: 0.05, $0.10, quarter, 1. In the order given; never synced.",
        arguments: 1...64)) { ctx, args in
        guard args.positionals.count <= quickCountMax else {
            throw CLIError("at most \(quickCountMax) quick amounts, got \(args.positionals.count)", code: .dataError)
        }
        var amounts: [Int64] = []
        for word in args.positionals {
            let cents = try Money.parseAmount(word)
            guard !amounts.contains(cents) else { throw CLIError("\(Money.format(cents: cents)) is given twice; each quick amount once", code: .dataError) }
            amounts.append(cents)
        }
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        try replica.device.setSetting(quickSetting, amounts.map(String.init).joined(separator: ","))
        ctx.say("Quick amounts on this device: " + amounts.map { Money.format(cents: $0) }.joined(separator: " "))
        ctx.emit(.object([("quickAmountsCents", .array(amounts.map { .int($0) }))]))
    }

    /// Deprecated: `household limit AMOUNT`, which it runs. The limit was this device's own until
    /// it became the household's (a replicated register); a script that sets it still works.
    static let quickLimit = CLI.Command(spec: CommandSpec(
        name: "quick limit", synopsis: "AMOUNT|never", summary: "deprecated: `household limit AMOUNT` (the household's limit for asking first)",
        details: "Sets the household's limit for asking first, on every laptop, as `kidledger household limit AMOUNT` does,\nand says on stderr that it is deprecated. It used to set this laptop's own limit.",
        arguments: 1...1)) { ctx, args in
        ctx.console.err("kidledger: `quick limit` is deprecated: it sets the household's limit now, as `kidledger household limit` does\n")
        try HouseholdCommands.setLimit(ctx, args.positionals[0])
    }

    /// The device's quick amounts; the default when unset or unreadable.
    static func quickAmounts(_ replica: Replica) throws -> [Int64] {
        guard let raw = try replica.device.setting(quickSetting) else { return quickDefault }
        let values = raw.split(separator: ",").compactMap { Int64($0) }
        guard (1...quickCountMax).contains(values.count), values.allSatisfy({ $0 > 0 }), Set(values).count == values.count else { return quickDefault }
        return values
    }

    static func loadToken(_ home: String) throws -> String {
        do { return try TokenFile.loadOrCreate(home: home) } catch { throw CLIError(error.message, code: .ioError) }
    }

    /// The page's address at `address` with a fresh one-time sign-in code (``SignIn``).
    static func signInURL(_ ctx: Context, address: String) throws -> String {
        "http://\(address)/?code=" + SignIn.code(key: try loadToken(ctx.home), nowMillis: ctx.clock.nowMillis())
    }

    /// Runs `xdg-open URL` and does not wait for the browser. Only a one-time address may be
    /// passed: other local users can read a command line.
    static func open(_ url: String) throws {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("xdg-open"), strdup(url), nil]
        defer { argv.forEach { free($0) } }
        let status = posix_spawnp(&pid, "xdg-open", nil, nil, argv, environ)
        guard status == 0 else { throw CLIError("cannot run xdg-open: \(String(cString: strerror(status))); open the address above in a browser", code: .unavailable) }
    }

    /// Runs one command line in this process, on the daemon's open store, as the page's API does:
    /// `--home` and `--json` are added, the JSON document, the text message and the error kept.
    static func runner(home: String, environment: [String: String], store: LMDBEnvironment?) -> CommandRunner {
        { words in run(words, home: home, environment: environment, store: store) }
    }

    /// ``runner(home:environment:store:)`` on a store that may not exist yet (a daemon started in
    /// an empty home, ``PageStore``): the store is shared once the page made the household.
    static func runner(_ ctx: Context, store: PageStore) -> CommandRunner {
        let home = ctx.home, environment = ctx.environment
        return { words in store.run(ctx) { shared in run(words, home: home, environment: environment, store: shared) } }
    }

    static func run(_ words: [String], home: String, environment: [String: String], store: LMDBEnvironment?) -> CommandOutcome {
        let output = BufferConsole()
        let messages = BufferConsole()
        do {
            let code = try CLI.dispatch(ArgumentTokens(["--home", home, "--json"] + words), environment: environment, console: output,
                                        clock: SystemClock(), sharedStore: store, messages: messages)
            return CommandOutcome(exitCode: code.rawValue, json: Text.trimmed(output.stdout), message: Text.trimmed(messages.stdout))
        } catch {
            let failure = CLIError.from(error)
            return CommandOutcome(exitCode: failure.code.rawValue, json: "", error: failure.description)
        }
    }

    /// The page's address from `serve --ui` (default ``defaultAddress``; "off" for none).
    ///
    /// - Throws: a usage error for a bad address, or one off loopback without `--ui-any-interface`.
    static func address(_ args: ParsedArguments) throws -> PeerAddress? {
        let raw = args.values["ui"] ?? defaultAddress
        if raw == "off" { return nil }
        let address = try NetworkCommands.listenAddress(raw, option: "--ui")
        let loopback = ["127.0.0.1", "::1", "localhost"].contains(address.host.lowercased())
        guard loopback || args.has("ui-any-interface") else {
            throw CLIError.usage("--ui \(raw) is not a loopback address: the page would be reachable from other machines. Use 127.0.0.1:PORT, or pass --ui-any-interface if you really mean it (docs/UI.md)")
        }
        return address.host.lowercased() == "localhost" ? PeerAddress(host: "127.0.0.1", port: address.port) : address
    }

    /// Starts the page for `serve` (also before the home holds a household: ``PageStore``) and
    /// records its address in the daemon's lock; nil (after logging why) when it cannot listen, so
    /// the daemon still syncs.
    static func start(_ ctx: Context, at address: PeerAddress, store: PageStore, lock: DaemonLock.Held,
                      log: @escaping @Sendable (String) -> Void) throws -> UIServer? {
        let token = try loadToken(ctx.home)
        let listener: TCPListener
        do { listener = try TCPListener(address: address) } catch {
            log("page not served: cannot listen on \(address): \(error) (the daemon still syncs; pick another port with --ui)")
            return nil
        }
        let bound = PeerAddress(host: address.host, port: listener.port)
        let home = ctx.home
        let gate = UIGate(key: token, port: bound.port, boundHost: bound.host, clock: ctx.clock) { try TokenFile.rotate(home: home) }
        let server = UIServer(listener: listener, app: UIApp(gate: gate, run: runner(ctx, store: store)), log: log)
        server.start()
        lock.record(page: bound.description)
        log("page on http://\(bound)/ (sign in with `kidledger open`, or the one-time address `kidledger ui` prints)")
        return server
    }

    /// Records the page's address in the store's device settings, where `ui` reads it.
    static func record(_ server: UIServer?, host: String, in replica: Replica) throws {
        guard let server else { return }
        try replica.device.setSetting("ui", PeerAddress(host: host, port: server.port).description)
    }
}

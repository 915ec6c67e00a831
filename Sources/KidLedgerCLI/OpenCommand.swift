#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerTransport
import KidLedgerSystem
import KidLedgerDaemon

/// `kidledger open`: what the applications menu's "Kid Ledger" runs. Starts this home's service
/// when no daemon runs (enabling it for next time), waits until the page listens, and opens the
/// page in the default browser with a one-time sign-in address (docs/UI.md, "Signing in").
enum OpenCommand {
    static let all: [CLI.Command] = [open]

    /// The unit the Debian package installs in the system's user-unit folder: `kidledger serve`
    /// for the default home (~/.kidledger).
    static let packagedUnit = "kidledger.service"
    /// Where the package puts it.
    static let packagedUnitPath = "/usr/lib/systemd/user/kidledger.service"
    /// How long `open` waits for the page to listen.
    static let waitMillis = 30_000

    static let open = CLI.Command(spec: CommandSpec(
        name: "open", synopsis: "[--no-browser]", summary: "start this home's service if needed and open the page, signed in",
        details: """
        What "Kid Ledger" in the applications menu runs. When no daemon runs for this home it starts the systemd
        user service: kidledger.service (installed by the Debian package) for the default home ~/.kidledger,
        else this home's own unit (`kidledger service install`, written when missing). A service that was not
        enabled is enabled, so it starts at every login from then on, and `open` says so. Then it waits (at most
        \(waitMillis / 1000) s) until the page answers and opens it in the default browser (xdg-open) with a one-time
        sign-in address: the browser is signed in for months, and the address is spent.
        Without systemd's user manager (a container, a root shell), start `kidledger serve` yourself first; `open`
        then only opens the page.
          --no-browser   print the one-time address instead of opening it
        From the applications menu (no terminal to read), a failure is also shown as a desktop notification
        (notify-send, when installed).
        """, flagOptions: ["no-browser"])) { ctx, args in
        do { try run(ctx, args) } catch {
            notify(ctx, CLIError.from(error).message)
            throw error
        }
    }

    static func run(_ ctx: Context, _ args: ParsedArguments) throws {
        // A home with no household yet gets its service too: its page starts or joins one.
        let household = FileSystem.exists(ctx.storePath + "/data.mdb") ? try ctx.openReplica().household() : nil
        if DaemonLock.holder(home: ctx.home) == nil {
            try startService(ctx, household: household?.name ?? "")
        }
        let address = try waitForPage(ctx)
        let url = try PageCommands.signInURL(ctx, address: address)
        ctx.emit(.object([("url", .string(url)), ("address", .string(address)), ("opened", .bool(!args.has("no-browser")))]))
        if args.has("no-browser") {
            ctx.say(url)
        } else {
            try PageCommands.open(url)
            ctx.say("Opened the page (http://\(address)/) in the browser.")
        }
    }

    /// Shows `message` as a desktop notification when no terminal reads standard error (the
    /// menu's launcher); best effort, bounded.
    static func notify(_ ctx: Context, _ message: String) {
        guard isatty(2) == 0 else { return }
        let directories = (ctx.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        guard let path = directories.map({ $0 + "/notify-send" }).first(where: { access($0, X_OK) == 0 }) else { return }
        _ = Subprocess.run(path, ["--app-name=Kid Ledger", "--icon=kidledger", "Kid Ledger could not open", message],
                           environment: ctx.environment, timeoutMillis: 5_000)
    }

    /// Starts (and, when it is not, enables) the service of this home.
    static func startService(_ ctx: Context, household: String) throws {
        let systemctl = Systemctl(ctx)
        if let reason = systemctl.unusable {
            throw CLIError("no daemon runs for this home, and systemd's user manager can't start one here (\(TextEscaping.terminal(reason))): run `kidledger serve --listen :4717` in a terminal, then `kidledger open` again", code: .unavailable)
        }
        let own = try ServiceUnit(ctx, listen: ServiceUnit.defaultListen, ui: nil, household: "")
        let name: String
        if FileSystem.exists(own.path) {
            name = own.name
        } else if try isDefaultHome(ctx), FileSystem.exists(packagedUnitPath) {
            name = packagedUnit
        } else {
            let unit = try ServiceUnit(ctx, listen: ServiceUnit.defaultListen, ui: nil, household: household)
            try FileSystem.makeDirectory(unit.directory)
            try FileSystem.writeFile(unit.path, unit.text)
            ctx.say("Wrote \(unit.path).")
            if let failure = systemctl.run(["daemon-reload"]) {
                throw CLIError("systemctl --user daemon-reload failed: \(TextEscaping.terminal(failure))", code: .unavailable)
            }
            name = unit.name
        }
        let enabled = systemctl.query(["is-enabled", name]) == "enabled"
        if let failure = systemctl.run(enabled ? ["start", name] : ["enable", "--now", name]) {
            throw CLIError("cannot start \(name): \(TextEscaping.terminal(failure)) (see `journalctl --user -u \(name)`)", code: .unavailable)
        }
        if !enabled {
            ctx.say("Started kidledger's service (\(name)) and set it to start at every login; `systemctl --user disable \(name)` stops that.")
        }
    }

    /// Whether the home is ~/.kidledger, the packaged unit's.
    static func isDefaultHome(_ ctx: Context) throws -> Bool {
        let standard = (ctx.environment["HOME"] ?? ServiceUnit.passwdHome()) + "/.kidledger"
        guard let resolved = realpath(standard, nil) else { return false }
        defer { free(resolved) }
        return String(cString: resolved) == (try ServiceUnit.absolute(ctx.home))
    }

    /// The page's address once a daemon of this home answers there; bounded by ``waitMillis``.
    static func waitForPage(_ ctx: Context) throws -> String {
        let deadline = Monotonic.millis() + Int64(waitMillis)
        var last = "no daemon runs for this home yet"
        while true {
            // The daemon writes the page's address into its lock file once the page listens
            // (before there is a household too).
            if let holder = DaemonLock.holder(home: ctx.home) {
                if let address = holder.page {
                    if let peer = try? NetworkCommands.listenAddress(address, option: "--ui"),
                       let connection = try? TCPConnection.connect(to: peer, timeoutMillis: 1_000) {
                        connection.close()
                        return address
                    }
                    last = "the page at \(address) does not answer"
                } else if holder.address != nil {
                    last = "the daemon serves no page (was it started with --ui off?)"
                }
            }
            if Monotonic.millis() > deadline {
                throw CLIError("the page did not come up within \(waitMillis / 1000) s: \(last) (`kidledger service status`, `journalctl --user`)", code: .unavailable)
            }
            usleep(100_000)
        }
    }
}

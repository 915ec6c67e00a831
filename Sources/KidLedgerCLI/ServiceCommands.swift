#if canImport(Glibc)
import Glibc
#endif
import Foundation
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSystem
import KidLedgerDaemon

/// `kidledger service install|status|uninstall`: the daemon as a sandboxed systemd user unit
/// (docs/SYNC.md, steps 4 and 6, and "The service unit").
enum ServiceCommands {
    static let all: [CLI.Command] = [install, status, uninstall]

    static let install = CLI.Command(spec: CommandSpec(
        name: "service install", synopsis: "[--listen ADDR] [--dry-run]",
        summary: "run the daemon as a systemd user service for this home",
        details: """
        Writes a systemd user unit, $XDG_CONFIG_HOME/systemd/user/kidledger-HASH.service (else
        ~/.config/systemd/user/; HASH names this home), that runs `kidledger --home HOME serve --listen ADDRESS`
        with absolute paths, restarts it on failure and sandboxes it (read-only system, writes only to the home,
        private /tmp, no new privileges, only IP, Unix and netlink sockets). Then, when `systemctl --user` works here, it
        runs `systemctl --user daemon-reload` and `systemctl --user enable --now` for the unit; otherwise it says so
        and prints those commands. To keep the service running after you log out: `loginctl enable-linger $USER`.
          --listen HOST:PORT   the daemon's address (default :4717, every interface)
          --ui ADDRESS         passed on to `serve --ui` (default: serve's, 127.0.0.1:4718)
          --relay              run `kidledger relay serve --listen ADDRESS` for this home instead (a relay home,
                               holding no ledger); its code is in HOME/relay-code.txt until an owner adopts it
          --dry-run            print the unit on standard output; write and run nothing
        """, valueOptions: ["listen", "ui"], flagOptions: ["dry-run", "relay"])) { ctx, args in
        let listen = args.values["listen"] ?? ServiceUnit.defaultListen
        _ = try NetworkCommands.listenAddress(listen, option: "--listen")
        let ui = try args.values["ui"].map { raw in
            if raw != "off" { _ = try NetworkCommands.listenAddress(raw, option: "--ui") }
            return raw
        }
        // A home with no household yet gets its service too: the daemon serves the page, where the
        // household is started or joined (docs/SYNC.md), and the unit may write only to the home.
        let relay = args.has("relay")
        if relay && ui != nil { throw CLIError.usage("a relay serves no page: drop --ui, or --relay") }
        if relay && FileSystem.exists(ctx.storePath + "/data.mdb") { throw CLIError.usage("\(ctx.home) holds a ledger: a relay runs in a home of its own") }
        let household = !relay && FileSystem.exists(ctx.storePath + "/data.mdb") ? try ctx.openReplica().household() : nil
        if !relay && household == nil && ui == "off" { throw LedgerError.noHousehold }
        let unit = try ServiceUnit(home: ctx.home, environment: ctx.environment, listen: listen, ui: ui, household: household?.name ?? "", relay: relay)
        if args.has("dry-run") {
            ctx.console.out(unit.text)
            ctx.console.err("kidledger: dry run: would write \(unit.path)\n")
            return
        }
        let existed = FileSystem.exists(unit.path)
        try FileSystem.makeDirectory(ctx.home)
        try FileSystem.makeDirectory(unit.directory)
        try FileSystem.writeFile(unit.path, unit.text)
        ctx.say("\(existed ? "Updated" : "Wrote") \(unit.path).")
        let systemctl = Systemctl(ctx)
        var started = false
        var failure: String?
        if let reason = systemctl.unusable {
            failure = reason
        } else if let reason = systemctl.run(["daemon-reload"]) ?? systemctl.run(["enable", "--now", unit.name]) {
            failure = reason
        } else {
            started = true
        }
        if started {
            ctx.say("Enabled and started \(unit.name) (`systemctl --user status \(unit.name)`, logs: `journalctl --user -u \(unit.name)`).")
        } else {
            ctx.say("systemctl --user does not work here (\(TextEscaping.terminal(failure ?? "unknown"))); to start the service, run:\n  systemctl --user daemon-reload\n  systemctl --user enable --now \(unit.name)")
        }
        if let holder = DaemonLock.holder(home: ctx.home), !started {
            ctx.say("A daemon already runs for this home (\(holder.description)): stop it before starting the service (one daemon per home).")
        }
        ctx.say("To keep it running after you log out: loginctl enable-linger \(ServiceUnit.userName(ctx))")
        ctx.emit(.object([("unit", .string(unit.name)), ("unitPath", .string(unit.path)), ("written", .bool(true)),
                          ("updated", .bool(existed)), ("started", .bool(started)),
                          ("systemctlError", failure.map(JSON.string) ?? .null)]))
    }

    static let status = CLI.Command(spec: CommandSpec(
        name: "service status", synopsis: "", summary: "whether this home's service is installed, enabled and running",
        details: """
        Shows whether the unit file is installed, whether systemd has it enabled and active (when `systemctl --user`
        works here), and whether a daemon holds this home's lock (a service or a `kidledger serve` in a terminal).
        """)) { ctx, _ in
        let unit = try ServiceUnit(ctx, listen: ServiceUnit.defaultListen, ui: nil, household: "")
        let installed = FileSystem.exists(unit.path)
        let systemctl = Systemctl(ctx)
        var enabled: String?
        var active: String?
        if systemctl.unusable == nil {
            enabled = systemctl.query(["is-enabled", unit.name])
            active = systemctl.query(["is-active", unit.name])
        }
        let holder = DaemonLock.holder(home: ctx.home)
        var lines = ["unit \(unit.name): " + (installed ? "installed (\(unit.path))" : "not installed (`kidledger service install`)")]
        if let reason = systemctl.unusable {
            lines.append("systemd: unknown, systemctl --user does not work here (\(TextEscaping.terminal(reason)))")
        } else {
            lines.append("systemd: \(enabled ?? "unknown"), \(active ?? "unknown")")
        }
        lines.append(holder.map { "daemon: running (\($0.description))" } ?? "daemon: none runs for this home")
        ctx.say(lines.joined(separator: "\n"))
        ctx.emit(.object([("unit", .string(unit.name)), ("unitPath", .string(unit.path)), ("installed", .bool(installed)),
                          ("systemctl", .bool(systemctl.unusable == nil)),
                          ("enabled", enabled.map(JSON.string) ?? .null), ("active", active.map(JSON.string) ?? .null),
                          ("daemonRunning", .bool(holder != nil)),
                          ("daemonPid", holder.map { .int(Int($0.pid)) } ?? .null),
                          ("daemonAddress", holder?.address.map(JSON.string) ?? .null)]))
    }

    static let uninstall = CLI.Command(spec: CommandSpec(
        name: "service uninstall", synopsis: "", summary: "stop, disable and remove this home's service",
        details: "Runs `systemctl --user disable --now` for the unit (when systemctl --user works here), removes the unit file\nand reloads systemd. The home and its ledger are not touched.")) { ctx, _ in
        let unit = try ServiceUnit(ctx, listen: ServiceUnit.defaultListen, ui: nil, household: "")
        guard FileSystem.exists(unit.path) else {
            throw CLIError("no service is installed for this home (\(unit.path) does not exist)", code: .dataError)
        }
        let systemctl = Systemctl(ctx)
        let failure = systemctl.unusable ?? systemctl.run(["disable", "--now", unit.name])
        guard unlink(unit.path) == 0 else {
            throw CLIError("cannot remove \(unit.path): \(String(cString: strerror(errno)))", code: .ioError)
        }
        let reload = failure == nil ? systemctl.run(["daemon-reload"]) : nil
        ctx.say("Removed \(unit.path).")
        if let failure {
            ctx.say("systemctl --user does not work here (\(TextEscaping.terminal(failure))); if the service runs, stop it with:\n  systemctl --user disable --now \(unit.name)\n  systemctl --user daemon-reload")
        } else {
            ctx.say("Stopped and disabled \(unit.name)." + (reload.map { " (daemon-reload failed: \(TextEscaping.terminal($0)))" } ?? ""))
        }
        ctx.emit(.object([("unit", .string(unit.name)), ("unitPath", .string(unit.path)), ("removed", .bool(true)),
                          ("systemctlError", failure.map(JSON.string) ?? .null)]))
    }
}

extension ServiceUnit {
    /// The unit of `ctx`'s home.
    init(_ ctx: Context, listen: String, ui: String?, household: String) throws {
        try self.init(home: ctx.home, environment: ctx.environment, listen: listen, ui: ui, household: household)
    }

    /// The login name for `loginctl enable-linger` ($USER, else the password database's).
    static func userName(_ ctx: Context) -> String { userName(environment: ctx.environment) }
}

extension Systemctl {
    /// `systemctl --user` on the command's PATH and environment.
    init(_ ctx: Context) { self.init(environment: ctx.environment) }
}

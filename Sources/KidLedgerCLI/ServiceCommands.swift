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

    /// The default `--listen` of the service: every interface, so the other laptop can reach it.
    static let defaultListen = ":4717"

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
          --dry-run            print the unit on standard output; write and run nothing
        """, valueOptions: ["listen", "ui"], flagOptions: ["dry-run"])) { ctx, args in
        let listen = args.values["listen"] ?? defaultListen
        _ = try NetworkCommands.listenAddress(listen, option: "--listen")
        let ui = try args.values["ui"].map { raw in
            if raw != "off" { _ = try NetworkCommands.listenAddress(raw, option: "--ui") }
            return raw
        }
        // A home with no household yet gets its service too: the daemon serves the page, where the
        // household is started or joined (docs/SYNC.md), and the unit may write only to the home.
        let household = FileSystem.exists(ctx.storePath + "/data.mdb") ? try ctx.openReplica().household() : nil
        if household == nil && ui == "off" { throw LedgerError.noHousehold }
        let unit = try ServiceUnit(ctx, listen: listen, ui: ui, household: household?.name ?? "")
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
        let unit = try ServiceUnit(ctx, listen: defaultListen, ui: nil, household: "")
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
        let unit = try ServiceUnit(ctx, listen: defaultListen, ui: nil, household: "")
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

/// The systemd user unit of one home: its name, where it goes and its text.
struct ServiceUnit {
    /// `kidledger-HASH.service`.
    let name: String
    /// The user unit directory.
    let directory: String
    /// `directory/name`.
    let path: String
    /// The unit file's text.
    let text: String

    init(_ ctx: Context, listen: String, ui: String?, household: String) throws {
        let home = try Self.absolute(ctx.home)
        let binary = try Self.executable()
        name = "kidledger-" + Self.hash(home) + ".service"
        let environment = ctx.environment
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((environment["HOME"] ?? Self.passwdHome()) + "/.config")
        directory = config + "/systemd/user"
        path = directory + "/" + name
        text = try Self.text(binary: binary, home: home, listen: listen, ui: ui, household: household)
    }

    /// The unit's text for `binary` serving `home` on `listen`.
    static func text(binary: String, home: String, listen: String, ui: String?, household: String) throws -> String {
        for path in [binary, home] where path.contains(where: { $0.isNewline || ($0.asciiValue.map { $0 < 0x20 || $0 == 0x7f } ?? false) }) {
            throw CLIError("cannot write a unit for a path with control characters: \(TextEscaping.terminal(path))", code: .dataError)
        }
        let command = [binary, "--home", home, "serve", "--listen", listen] + (ui.map { ["--ui", $0] } ?? [])
        let label = household.isEmpty ? "" : " (\(TextEscaping.terminal(household)))"
        // A private /tmp would hide a home that lives under /tmp.
        let underTmp = ["/tmp", "/var/tmp"].contains { home == $0 || home.hasPrefix($0 + "/") }
        return body(header: "# Written by `kidledger service install`; remove it with `kidledger service uninstall`.",
                    description: "kidledger daemon for \(escapeSpecifiers(home))\(escapeSpecifiers(label))",
                    execStart: command.map(quote).joined(separator: " "), readWrite: quote(home), privateTmp: !underTmp)
    }

    /// The unit the Debian package installs in /usr/lib/systemd/user (`kidledger open` starts it):
    /// the daemon of the default home, ~/.kidledger (`%h`), with the same sandbox.
    static func packaged(binary: String) -> String {
        body(header: "# Installed by the kidledger package; `kidledger open` enables and starts it for ~/.kidledger.",
             description: "kidledger daemon for ~/.kidledger",
             execStart: "\(binary) --home %h/.kidledger serve --listen \(ServiceCommands.defaultListen)",
             readWrite: "-%h/.kidledger", privateTmp: true)
    }

    /// A unit's text: `execStart` run with the sandbox, writing only to `readWrite`.
    static func body(header: String, description: String, execStart: String, readWrite: String, privateTmp: Bool) -> String {
        let privateTmpLine = privateTmp ? "PrivateTmp=yes"
                                        : "# PrivateTmp=yes is left out: the home is under /tmp, which a private /tmp would hide."
        return """
        \(header)
        [Unit]
        Description=\(description)

        [Service]
        Type=simple
        ExecStart=\(execStart)
        Restart=on-failure
        RestartSec=5
        # Sandboxing (systemd.exec(5)); in a user unit the file-system and kernel options run in a user
        # namespace of their own (they imply PrivateUsers=yes).
        NoNewPrivileges=yes
        ProtectSystem=strict
        ProtectHome=read-only
        ReadWritePaths=\(readWrite)
        \(privateTmpLine)
        ProtectKernelTunables=yes
        ProtectKernelModules=yes
        ProtectControlGroups=yes
        # IP for peers and the page, Unix sockets for the journal, netlink to list interfaces (LAN addresses).
        RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK
        RestrictNamespaces=yes
        RestrictRealtime=yes
        RestrictSUIDSGID=yes
        LockPersonality=yes
        MemoryDenyWriteExecute=yes
        SystemCallArchitectures=native
        UMask=0077

        [Install]
        WantedBy=default.target

        """
    }

    /// A word for ExecStart= or a path list: as is when plain, else double-quoted with `\` and `"`
    /// escaped; `%` (a specifier) and `$` (a variable) are doubled either way.
    static func quote(_ word: String) -> String {
        let escaped = escapeSpecifiers(word).replacingOccurrences(of: "$", with: "$$")
        let plain = !word.isEmpty && word.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "/._-:+,=@[]".contains($0)) }
        if plain { return escaped }
        return "\"" + escaped.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    static func escapeSpecifiers(_ text: String) -> String { text.replacingOccurrences(of: "%", with: "%%") }

    /// The first 8 hex digits of SHA-256 of the home's absolute path.
    static func hash(_ home: String) -> String {
        hexString(Array(SHA256.hash(Array(home.utf8)).prefix(4)))
    }

    /// `path` made absolute and free of symbolic links (it must exist).
    static func absolute(_ path: String) throws -> String {
        guard let resolved = realpath(path, nil) else {
            throw CLIError("cannot find the home \(path): \(String(cString: strerror(errno)))", code: .ioError)
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// This executable's absolute path.
    static func executable() throws -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { throw CLIError("cannot find this program's path (/proc/self/exe)", code: .software) }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func passwdHome() -> String {
        guard let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir else { return "/" }
        return String(cString: dir)
    }

    /// The login name for `loginctl enable-linger` ($USER, else the password database's).
    static func userName(_ ctx: Context) -> String {
        if let user = ctx.environment["USER"], !user.isEmpty { return user }
        guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return "$USER" }
        return String(cString: name)
    }
}

/// `systemctl --user`, found on the command's PATH; every run bounded in time.
struct Systemctl {
    /// The program's path, nil when it is not on PATH.
    let path: String?
    /// Why systemctl --user can't be used here (not found, or no user manager), nil when it can.
    let unusable: String?
    /// The environment it runs with (the command's: the user manager's bus address is in it).
    let environment: [String: String]
    /// How long one systemctl run may take.
    static let timeoutMillis = 30_000

    init(_ ctx: Context) {
        environment = ctx.environment
        let directories = (ctx.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        path = directories.map { $0 + "/systemctl" }.first { access($0, X_OK) == 0 }
        guard let path else {
            unusable = "systemctl was not found on PATH"
            return
        }
        // `show-environment` needs the user manager and changes nothing.
        let probe = Subprocess.run(path, ["--user", "show-environment"], environment: ctx.environment, timeoutMillis: Self.timeoutMillis)
        unusable = probe.code == 0 ? nil : Self.reason(probe)
    }

    /// Runs `systemctl --user ARGS`; nil on success, else why it failed.
    func run(_ arguments: [String]) -> String? {
        guard let path else { return unusable }
        let outcome = Subprocess.run(path, ["--user"] + arguments, environment: environment, timeoutMillis: Self.timeoutMillis)
        return outcome.code == 0 ? nil : Self.reason(outcome)
    }

    /// The first line `systemctl --user ARGS` printed (is-enabled, is-active answer there even when they exit 1).
    func query(_ arguments: [String]) -> String? {
        guard let path else { return nil }
        let outcome = Subprocess.run(path, ["--user"] + arguments, environment: environment, timeoutMillis: Self.timeoutMillis)
        let first = outcome.output.split(separator: "\n").first.map { Text.trimmed(String($0)) }
        return first.flatMap { $0.isEmpty ? nil : $0 }
    }

    static func reason(_ outcome: Subprocess.Outcome) -> String {
        let first = outcome.output.split(separator: "\n").first.map { Text.trimmed(String($0)) } ?? ""
        if outcome.code == nil { return "systemctl did not answer within \(timeoutMillis / 1000) s" }
        return first.isEmpty ? "systemctl exited with \(outcome.code ?? -1)" : first
    }
}

/// Runs a program to its end (bounded), its standard output and error read together.
enum Subprocess {
    struct Outcome {
        /// The exit status; nil when it ended by a signal or was killed at the time limit.
        var code: Int32?
        /// What it printed (at most 64 KiB).
        var output: String
    }

    /// Runs `path ARGS` with `environment`, standard input /dev/null.
    static func run(_ path: String, _ arguments: [String], environment: [String: String], timeoutMillis: Int) -> Outcome {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { return Outcome(code: nil, output: "pipe: \(String(cString: strerror(errno)))") }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 2)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        let spawned = posix_spawn(&child, path, &actions, nil, argv, envp)
        _ = close(pipeEnds[1])
        defer { _ = close(pipeEnds[0]) }
        guard spawned == 0 else { return Outcome(code: nil, output: "cannot run \(path): \(String(cString: strerror(spawned)))") }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Monotonic.millis() + Int64(timeoutMillis)
        var killed = false
        while true {
            let left = deadline - Monotonic.millis()
            if left <= 0 { kill(child, SIGKILL); killed = true; break }
            var poller = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(left, 1_000)))
            if ready <= 0 { continue }  // timed out or interrupted: check the deadline again
            let n = retryWhileInterrupted { buffer.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) } }
            if n <= 0 { break }
            if output.count < 65_536 { output.append(contentsOf: buffer[0..<n]) }
        }
        var status: Int32 = 0
        _ = retryWhileInterrupted { waitpid(child, &status, 0) }
        let exited = !killed && (status & 0x7f) == 0
        return Outcome(code: exited ? (status >> 8) & 0xff : nil, output: String(decoding: output, as: UTF8.self))
    }
}

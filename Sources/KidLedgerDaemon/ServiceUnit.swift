#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSystem

/// The systemd user unit of one home: its name, where it goes and its text.
public struct ServiceUnit {
    /// The default `--listen` of the service: every interface, so the other laptop can reach it.
    public static let defaultListen = ":4717"

    /// `kidledger-HASH.service`.
    public let name: String
    /// The user unit directory.
    public let directory: String
    /// `directory/name`.
    public let path: String
    /// The unit file's text.
    public let text: String

    /// The unit serving `home` (the command's `environment` names the config directory); with
    /// `relay`, the unit runs `relay serve` (a relay home) instead of the daemon.
    public init(home: String, environment: [String: String], listen: String, ui: String?, household: String, relay: Bool = false) throws {
        let home = try Self.absolute(home)
        let binary = try Self.executable()
        name = "kidledger-" + Self.hash(home) + ".service"
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((environment["HOME"] ?? Self.passwdHome()) + "/.config")
        directory = config + "/systemd/user"
        path = directory + "/" + name
        text = try Self.text(binary: binary, home: home, listen: listen, ui: ui, household: household, relay: relay)
    }

    /// The unit's text for `binary` serving `home` on `listen`.
    public static func text(binary: String, home: String, listen: String, ui: String?, household: String, relay: Bool = false) throws -> String {
        for path in [binary, home] where path.contains(where: { $0.isNewline || ($0.asciiValue.map { $0 < 0x20 || $0 == 0x7f } ?? false) }) {
            throw DaemonError("cannot write a unit for a path with control characters: \(TextEscaping.terminal(path))", kind: .dataError)
        }
        let command = [binary, "--home", home] + (relay ? ["relay", "serve", "--listen", listen] : ["serve", "--listen", listen] + (ui.map { ["--ui", $0] } ?? []))
        let label = household.isEmpty ? "" : " (\(TextEscaping.terminal(household)))"
        // A private /tmp would hide a home that lives under /tmp.
        let underTmp = ["/tmp", "/var/tmp"].contains { home == $0 || home.hasPrefix($0 + "/") }
        return body(header: "# Written by `kidledger service install`; remove it with `kidledger service uninstall`.",
                    description: "kidledger \(relay ? "relay" : "daemon") for \(escapeSpecifiers(home))\(escapeSpecifiers(label))",
                    execStart: command.map(quote).joined(separator: " "), readWrite: quote(home), privateTmp: !underTmp)
    }

    /// The unit the Debian package installs in /usr/lib/systemd/user (`kidledger open` starts it):
    /// the daemon of the default home, ~/.kidledger (`%h`), with the same sandbox.
    public static func packaged(binary: String) -> String {
        body(header: "# Installed by the kidledger package; `kidledger open` enables and starts it for ~/.kidledger.",
             description: "kidledger daemon for ~/.kidledger",
             execStart: "\(binary) --home %h/.kidledger serve --listen \(defaultListen)",
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
        Hex.encode(SHA256.hash(Array(home.utf8)).prefix(4))
    }

    /// `path` made absolute and free of symbolic links (it must exist).
    public static func absolute(_ path: String) throws -> String {
        guard let resolved = realpath(path, nil) else {
            throw DaemonError("cannot find the home \(path): \(String(cString: strerror(errno)))", kind: .ioError)
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// This executable's absolute path.
    static func executable() throws -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { throw DaemonError("cannot find this program's path (/proc/self/exe)", kind: .software) }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public static func passwdHome() -> String {
        guard let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir else { return "/" }
        return String(cString: dir)
    }

    /// The login name for `loginctl enable-linger` ($USER, else the password database's).
    public static func userName(environment: [String: String]) -> String {
        if let user = environment["USER"], !user.isEmpty { return user }
        guard let entry = getpwuid(getuid()), let name = entry.pointee.pw_name else { return "$USER" }
        return String(cString: name)
    }
}

/// `systemctl --user`, found on the command's PATH; every run bounded in time.
public struct Systemctl {
    /// The program's path, nil when it is not on PATH.
    let path: String?
    /// Why systemctl --user can't be used here (not found, or no user manager), nil when it can.
    public let unusable: String?
    /// The environment it runs with (the command's: the user manager's bus address is in it).
    let environment: [String: String]
    /// How long one systemctl run may take.
    static let timeoutMillis = 30_000

    public init(environment: [String: String]) {
        self.environment = environment
        let directories = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        path = directories.map { $0 + "/systemctl" }.first { access($0, X_OK) == 0 }
        guard let path else {
            unusable = "systemctl was not found on PATH"
            return
        }
        // `show-environment` needs the user manager and changes nothing.
        let probe = Subprocess.run(path, ["--user", "show-environment"], environment: environment, timeoutMillis: Self.timeoutMillis)
        unusable = probe.code == 0 ? nil : Self.reason(probe)
    }

    /// Runs `systemctl --user ARGS`; nil on success, else why it failed.
    public func run(_ arguments: [String]) -> String? {
        guard let path else { return unusable }
        let outcome = Subprocess.run(path, ["--user"] + arguments, environment: environment, timeoutMillis: Self.timeoutMillis)
        return outcome.code == 0 ? nil : Self.reason(outcome)
    }

    /// The first line `systemctl --user ARGS` printed (is-enabled, is-active answer there even when they exit 1).
    public func query(_ arguments: [String]) -> String? {
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
public enum Subprocess {
    public struct Outcome {
        /// The exit status; nil when it ended by a signal or was killed at the time limit.
        public var code: Int32?
        /// What it printed (at most 64 KiB).
        public var output: String
    }

    /// Runs `path ARGS` with `environment`, standard input /dev/null.
    public static func run(_ path: String, _ arguments: [String], environment: [String: String], timeoutMillis: Int) -> Outcome {
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

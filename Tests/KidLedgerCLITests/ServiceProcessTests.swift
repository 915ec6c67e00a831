import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerDaemon

/// One daemon per home (the lock), the footguns of issue 22 point 7, and `kidledger service`
/// (point 6). Real processes on 127.0.0.1; nothing listens on another address.
@Suite("One daemon per home, footguns, service")
struct ServiceProcessTests {
    // MARK: One daemon per home

    @Test func aSecondServeOnOneHomeIsRefusedAndAKilledDaemonLeavesNoLock() throws {
        let a = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove() }
        try ok(a, "init", "Smiths")
        let noDaemon = try runKidledger(a, ["invite"])
        #expect(noDaemon.code == 64 && noDaemon.stderr.hasPrefix("kidledger: no daemon runs for this home"), "\(noDaemon)")

        let first = try #require(try DaemonProcess.start(a, in: group))
        let second = try runKidledger(a, ["serve", "--listen", "127.0.0.1:0"])
        #expect(second.code == 75, "\(second)")
        #expect(second.stderr.hasPrefix("kidledger: another `kidledger serve` already runs for this home (pid \(first.background.pid), listening on \(first.address))"), "\(second)")
        // invite names the live daemon, and warns that its loopback address is for this machine only.
        let invite = try runKidledger(a, ["--json", "invite"])
        #expect(invite.code == 0, "\(invite)")
        let document = parseJSON(invite.stdout) as? [String: Any] ?? [:]
        #expect(document["address"] as? String == first.address && document["daemonRunning"] as? Bool == true, "\(document)")
        let warnings = document["warnings"] as? [String] ?? []
        #expect(warnings.count == 1 && warnings[0].contains("is a loopback address"), "\(warnings)")
        #expect(invite.stderr.contains("kidledger: warning: \(first.address) is a loopback address"), "\(invite)")
        let status = try runKidledger(a, ["--json", "service", "status"])
        let state = parseJSON(status.stdout) as? [String: Any] ?? [:]
        #expect(state["daemonRunning"] as? Bool == true && (state["daemonPid"] as? NSNumber)?.int32Value == first.background.pid
                && state["daemonAddress"] as? String == first.address, "\(status)")

        // SIGKILL: the kernel drops the lock; the file's stale text is not believed.
        first.background.send(SIGKILL)
        #expect(first.background.wait(timeout: 30))
        let afterKill = try runKidledger(a, ["invite"])
        #expect(afterKill.code == 64 && afterKill.stderr.hasPrefix("kidledger: no daemon runs for this home"), "\(afterKill)")
        let next = try #require(try DaemonProcess.start(a, in: group))
        let again = try json(a, "invite")
        #expect(again["address"] as? String == next.address, "\(again)")
        #expect(next.stop() == 0, "\(next.log)")
        let stopped = try json(a, "service", "status")
        #expect(stopped["daemonRunning"] as? Bool == false, "\(stopped)")
    }

    // MARK: open

    /// With a daemon running, `open` starts nothing: it waits for the page and hands out a
    /// one-time address of it (never the page key).
    @Test func openWithADaemonRunningGivesAOneTimeAddressOfItsPage() throws {
        let a = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove() }
        try ok(a, "init", "Smiths")
        let daemon = try #require(try DaemonProcess.start(a, in: group, arguments: ["--ui", "127.0.0.1:0"]))
        let page = try #require(try json(a, "ui", "--address-only")["address"] as? String)
        let opened = try json(a, "open", "--no-browser")
        let url = opened["url"] as? String ?? ""
        #expect(opened["address"] as? String == page && opened["opened"] as? Bool == false, "\(opened)")
        #expect(url.hasPrefix("http://\(page)/?code="), "\(url)")
        let key = try String(contentsOfFile: a.home + "/ui-token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(key.count == 64 && !url.contains(key))
        #expect(try json(a, "open", "--no-browser")["url"] as? String != url, "each address is new")
        #expect(daemon.stop() == 0, "\(daemon.log)")
    }

    // MARK: Footguns

    @Test func aFailingSyncWithANewAddressStoresNothing() throws {
        let a = TestLedger(), other = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); other.remove() }
        try ok(a, "init", "Smiths")
        try ok(a, "child", "add", "Ava")
        try ok(other, "init", "Joneses")
        let stranger = try #require(try DaemonProcess.start(other, in: group))
        let (fd, port) = try refusingPort()
        defer { close(fd) }
        let peersBefore = try runKidledger(a, ["--json", "peers"]).stdout
        let digestBefore = try digest(a)
        // Nothing listening, then a daemon of another household that refuses the handshake.
        for address in ["127.0.0.1:\(port)", stranger.address] {
            let failed = try runKidledger(a, ["sync", address])
            #expect(failed.code == 69, "sync \(address): \(failed)")
            #expect(try runKidledger(a, ["--json", "peers"]).stdout == peersBefore, "sync \(address) stored a peer")
            #expect(try digest(a) == digestBefore)
        }
    }

    @Test func aSuccessfulSyncWithANewAddressRemembersIt() throws {
        let a = TestLedger(), b = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove() }
        try ok(a, "init", "Smiths")
        let daemon = try #require(try DaemonProcess.start(a, in: group))
        try ok(b, "join", try inviteCode(a))
        try ok(b, "peer", "remove", daemon.address)
        try ok(b, "sync", daemon.address)
        let peers = try json(b, "peers")["peers"] as? [[String: Any]] ?? []
        #expect(peers.map { $0["address"] as? String } == [daemon.address] && peers.first?["lastSyncMillis"] is NSNumber, "\(peers)")
    }

    @Test func listenWithoutAHostMeansEveryInterface() throws {
        // Dual-stack: IPv6 and IPv4 (serve falls back to 0.0.0.0 on a host without IPv6).
        #expect(try NetworkCommands.listenAddress(":4717", option: "--listen").description == "[::]:4717")
        #expect(try NetworkCommands.listenAddress(":0", option: "--listen").description == "[::]:0")
        #expect(try NetworkCommands.listenAddress("127.0.0.1:0", option: "--listen").description == "127.0.0.1:0")
        #expect(throws: CLIError.self) { try NetworkCommands.listenAddress(":", option: "--listen") }
        #expect(throws: CLIError.self) { try NetworkCommands.listenAddress(":99999", option: "--listen") }
    }

    @Test func loopbackAddressesAreRecognized() {
        for host in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "localhost", "LOCALHOST", "a.localhost"] {
            #expect(NetworkCommands.isLoopback(host: host), "\(host)")
        }
        for host in ["192.168.1.20", "10.0.0.1", "128.0.0.1", "::2", "fe80::1", "0.0.0.0", "laptop.local", "::ffff:10.0.0.1"] {
            #expect(!NetworkCommands.isLoopback(host: host), "\(host)")
        }
    }

    @Test func aDaemonOnEveryInterfaceIsInvitedToOnItsLANAddresses() {
        let hosts = ["127.0.0.1", "::1", "192.168.1.20", "fe80::1", "169.254.3.4", "2001:db8::7", "10.0.0.5", "192.168.1.20"]
        #expect(NetworkCommands.lanAddresses(for: "0.0.0.0:4717", hosts: hosts) == ["192.168.1.20:4717", "10.0.0.5:4717"])
        #expect(NetworkCommands.lanAddresses(for: "[::]:4717", hosts: hosts) == ["192.168.1.20:4717", "10.0.0.5:4717", "[2001:db8::7]:4717"])
        #expect(NetworkCommands.lanAddresses(for: "0.0.0.0:4717", hosts: ["127.0.0.1", "::1"]).isEmpty)
        #expect(NetworkCommands.lanAddresses(for: "127.0.0.1:4717", hosts: hosts).isEmpty)
        #expect(NetworkCommands.lanAddresses(for: "0.0.0.0:1", hosts: (1...9).map { "10.0.0.\($0)" }).count == 4)
        // The loopback interface is up on any machine that runs these tests.
        #expect(LocalInterfaces.hosts().contains("127.0.0.1"), "\(LocalInterfaces.hosts())")
    }

    @Test func inviteWarnsOnStandardErrorAndInJSON() {
        let l = TestLedger()
        defer { l.remove() }
        l.ok("init", "Home")
        let loopback = l.run("invite", "--address", "127.0.0.1:4717")
        #expect(loopback.code == 0)
        #expect(loopback.stderr.contains("kidledger: warning: 127.0.0.1:4717 is a loopback address: another laptop can't reach it"), "\(loopback)")
        #expect(loopback.stderr.contains("kidledger: warning: no daemon runs for this home now"), "\(loopback)")
        let lan = l.run("--json", "invite", "--address", "192.168.1.20:4717")
        let warnings = (parseJSON(lan.stdout) as? [String: Any])?["warnings"] as? [String] ?? ["?"]
        #expect(warnings.count == 1 && warnings[0].hasPrefix("no daemon runs for this home now"), "\(lan)")
        #expect(!lan.stderr.contains("loopback"), "\(lan)")
    }

    // MARK: kidledger service

    /// A temporary directory with a `bin` holding a fake `systemctl` (a shell script logging its
    /// arguments to `systemctl.log` and exiting `exit`), and an XDG config directory.
    struct FakeSystem {
        let root: TemporaryDirectory
        var bin: String { root.sub("bin") }
        var config: String { root.sub("config") }
        var log: String { root.sub("systemctl.log") }

        init(systemctlExit: Int32?) throws {
            root = TemporaryDirectory(prefix: "kidledger-service")
            try FileManager.default.createDirectory(atPath: root.sub("bin"), withIntermediateDirectories: true)
            if let code = systemctlExit {
                let script = """
                #!/bin/sh
                echo "$@" >> '\(root.sub("systemctl.log"))'
                if [ \(code) -ne 0 ]; then echo "Failed to connect to bus: No medium found" >&2; exit \(code); fi
                case "$2" in is-enabled) echo enabled ;; is-active) echo active ;; esac
                exit 0

                """
                try script.write(toFile: root.sub("bin/systemctl"), atomically: true, encoding: .utf8)
                chmod(root.sub("bin/systemctl"), 0o755)
            }
        }

        var calls: [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }

        /// `kidledger ARGS` as a process, with PATH holding only the fake `bin`.
        func run(_ ledger: TestLedger, _ arguments: String...) throws -> ProcessOutcome {
            let binary = try #require(Binary.path)
            return try runProcess(binary, arguments, environment: ["KIDLEDGER_HOME": ledger.home, "HOME": ledger.directory,
                                                                  "XDG_CONFIG_HOME": config, "PATH": bin, "USER": "parent", "LC_ALL": "C"],
                                  timeout: 60)
        }
    }

    @Test func installWritesASandboxedUserUnitWhenSystemctlIsMissing() throws {
        let l = TestLedger(), fake = try FakeSystem(systemctlExit: nil)
        defer { l.remove(); fake.root.remove() }
        try ok(l, "init", "Smiths")
        let binary = try #require(Binary.path)
        let home = try #require(realpath(l.home, nil).map { p in defer { free(p) }; return String(cString: p) })
        let exe = try #require(realpath(binary, nil).map { p in defer { free(p) }; return String(cString: p) })
        let name = "kidledger-\(ServiceUnit.hash(home)).service"
        let path = fake.config + "/systemd/user/" + name

        let dry = try fake.run(l, "service", "install", "--dry-run")
        #expect(dry.code == 0 && dry.stderr == "kidledger: dry run: would write \(path)\n", "\(dry)")
        #expect(!FileManager.default.fileExists(atPath: path), "--dry-run wrote the unit")

        let installed = try fake.run(l, "service", "install")
        #expect(installed.code == 0, "\(installed)")
        #expect(installed.stdout.contains("Wrote \(path)."), "\(installed)")
        #expect(installed.stdout.contains("systemctl --user does not work here (systemctl was not found on PATH); to start the service, run:\n  systemctl --user daemon-reload\n  systemctl --user enable --now \(name)"), "\(installed)")
        #expect(installed.stdout.contains("loginctl enable-linger parent"), "\(installed)")
        let unit = try String(contentsOfFile: path, encoding: .utf8)
        #expect(unit == dry.stdout, "the dry run prints what install writes")
        let lines = Set(unit.split(separator: "\n").map(String.init))
        for expected in ["ExecStart=\(exe) --home \(home) serve --listen :4717", "Restart=on-failure", "NoNewPrivileges=yes",
                         "ProtectSystem=strict", "ReadWritePaths=\(home)", "ProtectKernelTunables=yes",
                         "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK", "LockPersonality=yes",
                         "MemoryDenyWriteExecute=yes", "RestrictRealtime=yes", "SystemCallArchitectures=native",
                         "WantedBy=default.target", "[Unit]", "[Service]", "[Install]"] {
            #expect(lines.contains(expected), "missing \(expected) in\n\(unit)")
        }
        // This home is under /tmp, which a private /tmp would hide; elsewhere the unit has one.
        #expect(lines.contains("# PrivateTmp=yes is left out: the home is under /tmp, which a private /tmp would hide.") == home.hasPrefix("/tmp/"))
        let elsewhere = try ServiceUnit.text(binary: "/usr/bin/kidledger", home: "/home/parent/.kidledger", listen: ":4717", ui: "off", household: "Smiths")
        #expect(elsewhere.contains("\nPrivateTmp=yes\n") && elsewhere.contains("\nExecStart=/usr/bin/kidledger --home /home/parent/.kidledger serve --listen :4717 --ui off\n")
                && elsewhere.contains("\nDescription=kidledger daemon for /home/parent/.kidledger (Smiths)\n"), "\(elsewhere)")
        let again = try fake.run(l, "service", "install", "--listen", "127.0.0.1:4800")
        #expect(again.code == 0 && again.stdout.contains("Updated \(path)."), "\(again)")
        #expect(try String(contentsOfFile: path, encoding: .utf8).contains("serve --listen 127.0.0.1:4800\n"))

        let status = try fake.run(l, "--json", "service", "status")
        let state = parseJSON(status.stdout) as? [String: Any] ?? [:]
        #expect(state["installed"] as? Bool == true && state["systemctl"] as? Bool == false && state["unit"] as? String == name
                && state["enabled"] is NSNull && state["daemonRunning"] as? Bool == false, "\(status)")

        let removed = try fake.run(l, "service", "uninstall")
        #expect(removed.code == 0 && removed.stdout.contains("Removed \(path)."), "\(removed)")
        #expect(!FileManager.default.fileExists(atPath: path))
        let twice = try fake.run(l, "service", "uninstall")
        #expect(twice.code == 65 && twice.stderr.hasPrefix("kidledger: no service is installed for this home"), "\(twice)")
    }

    @Test func installAndUninstallRunSystemctlWhenItWorks() throws {
        let l = TestLedger(), fake = try FakeSystem(systemctlExit: 0)
        defer { l.remove(); fake.root.remove() }
        try ok(l, "init", "Smiths")
        let installed = try fake.run(l, "service", "install")
        #expect(installed.code == 0 && installed.stdout.contains("Enabled and started kidledger-"), "\(installed)")
        let status = try fake.run(l, "--json", "service", "status")
        let state = parseJSON(status.stdout) as? [String: Any] ?? [:]
        #expect(state["enabled"] as? String == "enabled" && state["active"] as? String == "active" && state["systemctl"] as? Bool == true, "\(status)")
        let removed = try fake.run(l, "service", "uninstall")
        #expect(removed.code == 0 && removed.stdout.contains("Stopped and disabled kidledger-"), "\(removed)")
        let unit = try #require(state["unit"] as? String)
        #expect(fake.calls == ["--user show-environment", "--user daemon-reload", "--user enable --now \(unit)",
                               "--user show-environment", "--user is-enabled \(unit)", "--user is-active \(unit)",
                               "--user show-environment", "--user disable --now \(unit)", "--user daemon-reload"], "\(fake.calls)")
    }

    @Test func installSaysSoWhenSystemctlFails() throws {
        let l = TestLedger(), fake = try FakeSystem(systemctlExit: 1)
        defer { l.remove(); fake.root.remove() }
        try ok(l, "init", "Smiths")
        let installed = try fake.run(l, "--json", "service", "install")
        let document = parseJSON(installed.stdout) as? [String: Any] ?? [:]
        #expect(installed.code == 0 && document["started"] as? Bool == false
                && document["systemctlError"] as? String == "Failed to connect to bus: No medium found", "\(installed)")
        #expect(fake.calls == ["--user show-environment"], "\(fake.calls)")
        let removed = try fake.run(l, "service", "uninstall")
        #expect(removed.code == 0 && removed.stdout.contains("systemctl --user disable --now kidledger-"), "\(removed)")
    }

    @Test func unitQuotingKeepsPathsWhole() throws {
        #expect(ServiceUnit.quote("/usr/bin/kidledger") == "/usr/bin/kidledger")
        #expect(ServiceUnit.quote(":4717") == ":4717")
        #expect(ServiceUnit.quote("/home/a b/100%") == "\"/home/a b/100%%\"")
        #expect(ServiceUnit.quote("/x/\"q\"$y\\z") == "\"/x/\\\"q\\\"$$y\\\\z\"")
        #expect(throws: DaemonError.self) {
            try ServiceUnit.text(binary: "/bin/kidledger", home: "/home/a\nExecStartPre=/bin/evil", listen: ":4717", ui: nil, household: "")
        }
        #expect(CLIError.from(DaemonError("x", kind: .dataError)).code == .dataError)
    }

    static let systemdAnalyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].contains { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(.enabled(if: systemdAnalyze, "systemd-analyze is not installed (apt-get install systemd): Scripts/check-unit.sh not run"))
    func theGeneratedUnitPassesSystemdAnalyzeVerify() throws {
        let binary = try #require(Binary.path)
        let outcome = try runProcess("/bin/bash", [Binary.packageRoot + "/Scripts/check-unit.sh", binary],
                                     environment: ["PATH": "/usr/bin:/bin", "LC_ALL": "C"], timeout: 120)
        #expect(outcome.code == 0, "\(outcome)")
        #expect(outcome.stdout.components(separatedBy: "check-unit: ok:").count == 5, "\(outcome)")
    }
}

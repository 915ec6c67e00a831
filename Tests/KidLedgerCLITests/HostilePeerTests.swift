import Foundation
import Synchronization
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity
@testable import KidLedgerDaemon

/// A running daemon on 127.0.0.1 under hostile connections while a member keeps syncing with it:
/// bad length prefixes, unknown frame types, truncated frames, frames in the wrong order, a
/// handshake for another household, a peer sending a byte a second, a stranger that completes the
/// handshake and then trickles, and 300 connections at once (from one address: 4 are served, the
/// rest refused with a per-address `busy` and logged without a flood of lines). The daemon's peer timeout is set to
/// 1.5 s (`KIDLEDGER_PEER_TIMEOUT_MS`) so the slow ones are dropped quickly. Every connection,
/// loop and wait is bounded in count and time.
@Suite("Hostile peers against a running daemon")
struct HostilePeerTests {
    /// What the member's thread did.
    final class Member: Sendable {
        let state = Mutex<(stop: Bool, rounds: Int, succeeded: Int, given: [String], failures: [String])>((false, 0, 0, [], []))
        let done = Mutex(false)
    }

    static let peerTimeoutMillis = 1_500

    /// Hands out local ports below the system's ephemeral range, so no other connection to the
    /// daemon (the member's, which get ephemeral ports) can reuse a hostile connection's port and
    /// each port names one connection in the daemon's log.
    final class LocalPorts: Sendable {
        private let next: Atomic<Int>
        init() {
            let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? "32768 60999"
            let low = Int(range.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first ?? "") ?? 32768
            next = Atomic(max(low - 6_000, 10_000))
        }

        /// A blocking TCP connection to 127.0.0.1:port from 127.0.0.1 on a port of our own; -1 on failure.
        func connect(to port: Int) -> Int32 {
            for _ in 0..<2_000 {
                let local = next.wrappingAdd(1, ordering: .relaxed).oldValue
                let fd = connectLocal(port, from: local)
                if fd >= 0 { return fd }
            }
            return -1
        }
    }

    /// The local port of a connected socket.
    static func localPort(_ fd: Int32) -> Int {
        var addr = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let rc = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return rc == 0 ? Int(UInt16(bigEndian: addr.sin_port)) : -1
    }

    /// Reads until the daemon closes the connection (EOF or reset) or `timeout` s pass; returns
    /// what arrived and whether it was closed.
    static func drain(_ fd: Int32, timeout: TimeInterval) -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        let deadline = Deadline(seconds: timeout)
        while !deadline.passed {
            guard let chunk = receiveSome(fd, millis: 100) else { continue }
            if chunk.isEmpty { return (received, true) }
            received += chunk
        }
        return (received, false)
    }

    /// A channel frame: `[u32 length][type][payload]`.
    static func frame(_ type: UInt8, _ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count + 1)
        return [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF), type] + payload
    }

    /// A fresh identity and 64 bytes of channel randomness from `random`.
    static func stranger(_ random: inout SplitMix64) throws -> (Identity, [UInt8]) {
        let identity = try Identity(seed: (0..<32).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        return (identity, (0..<SecureChannel.seedByteCount).map { _ in UInt8(truncatingIfNeeded: random.next()) })
    }

    /// Runs the initiator's side of the secure handshake over a raw socket (bounded by 10 s).
    /// Returns the channel once established, or nil (with what the daemon answered). `received`
    /// sees every byte the daemon sent, as it arrives.
    static func handshake(_ fd: Int32, _ channel: SecureChannel, received: ([UInt8]) -> Void = { _ in }) -> SecureChannel? {
        for action in channel.start() { if case .send(let bytes) = action { sendAll(fd, bytes) } }
        let deadline = Deadline(seconds: 10)
        while !deadline.passed {
            guard let chunk = receiveSome(fd, millis: 100) else { continue }
            if chunk.isEmpty { return nil }
            received(chunk)
            for action in channel.receive(chunk) {
                switch action {
                case .send(let bytes): sendAll(fd, bytes)
                case .established: return channel
                case .failed: return nil
                default: break
                }
            }
        }
        return nil
    }

    /// Runs `kidledger ARGS` on `ledger` from a thread outside the test (no expectations recorded
    /// there); nil when it could not run.
    static func quietly(home: String, directory: String, _ arguments: [String]) -> ProcessOutcome? {
        guard let binary = Binary.path else { return nil }
        return try? runProcess(binary, arguments, environment: ["KIDLEDGER_HOME": home, "HOME": directory,
                                                                "PATH": "/usr/bin:/bin", "LC_ALL": "C"], timeout: 60)
    }

    @Test func daemonSurvivesHostilePeersWhileAMemberKeepsSyncing() throws {
        let a = TestLedger(), b = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove() }
        try ok(a, "init", "Smiths")
        try ok(a, "child", "add", "Ava")
        try ok(a, "give", "Ava", "5.00", "--note", "start")
        let daemon = try #require(try DaemonProcess.start(a, in: group, extraEnvironment: [Daemon.peerTimeoutVariable: "\(Self.peerTimeoutMillis)"]))
        try ok(b, "join", try inviteCode(a))
        let household = try #require(try Context(home: a.home, json: false, console: BufferConsole(), clock: SystemClock())
            .openReplica().household()).id
        let membersBefore = try json(a, "members")["members"] as? [[String: Any]] ?? []
        func memory() -> (rss: Int, hwm: Int) {
            let status = (try? String(contentsOfFile: "/proc/\(daemon.background.pid)/status", encoding: .utf8)) ?? ""
            func kB(_ key: String) -> Int {
                let line = status.split(separator: "\n").first { $0.hasPrefix(key + ":") } ?? ""
                return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
            }
            return (kB("VmRSS"), kB("VmHWM"))
        }
        let memoryBefore = memory()

        // The member: gives, then syncs, again and again until told to stop (at most 80 rounds, 0.2 s apart).
        let legit = Member()
        let (memberHome, memberDirectory, address) = (b.home, b.directory, daemon.address)
        Thread.detachNewThread {
            defer { legit.done.withLock { $0 = true } }
            for round in 0..<80 {
                if legit.state.withLock({ $0.stop }) { return }
                if round > 0 { usleep(200_000) }
                let note = "legit \(round)"
                let give = Self.quietly(home: memberHome, directory: memberDirectory, ["give", "Ava", "0.01", "--note", note])
                guard give?.code == 0 else {
                    legit.state.withLock { $0.failures.append("give: \(give.map { "\($0)" } ?? "did not run")") }
                    continue
                }
                let sync = Self.quietly(home: memberHome, directory: memberDirectory, ["sync", address])
                legit.state.withLock {
                    $0.rounds += 1
                    $0.given.append(note)
                    if sync?.code == 0 { $0.succeeded += 1 } else { $0.failures.append(sync.map { "\($0)" } ?? "sync did not run") }
                }
            }
        }

        var hostilePorts: [Int: String] = [:]
        let ports = LocalPorts()
        func open(_ label: String) throws -> Int32 {
            let fd = ports.connect(to: daemon.port)
            try #require(fd >= 0, "connect for \(label)")
            hostilePorts[Self.localPort(fd)] = label
            return fd
        }
        var random = SplitMix64(seed: 0x4057_11E)

        // 1. Bad frames before any handshake: each is refused and the connection closed.
        let hello = ChannelFrame.hello
        let badFrames: [(String, [UInt8])] = [
            ("oversized length prefix", [0xFF, 0xFF, 0xFF, 0xFF, hello]),
            ("length above the handshake limit", [0x00, 0x00, 0x02, 0x01, hello] + [UInt8](repeating: 0, count: 600)),
            ("zero length prefix", [0, 0, 0, 0]),
            ("unknown message type", Self.frame(0x42, [1, 2, 3, 4])),
            ("sync frame instead of the channel", Self.frame(1, [0, 1, 0, 1])),
            ("confirm before hello (wrong order)", Self.frame(ChannelFrame.confirm, [UInt8](repeating: 7, count: 113))),
            ("accept from the initiator (wrong order)", Self.frame(ChannelFrame.accept, [UInt8](repeating: 7, count: 113))),
            ("a version 1 hello", Self.frame(0xF0, [1] + [UInt8](repeating: 7, count: 112))),
            ("data before the handshake", Self.frame(0xF4, [UInt8](repeating: 7, count: 40))),
            ("hello of the wrong size", Self.frame(hello, [UInt8](repeating: 1, count: 50))),
        ]
        for (label, bytes) in badFrames {
            let fd = try open(label)
            defer { close(fd) }
            sendAll(fd, bytes)
            let answer = Self.drain(fd, timeout: 10)
            #expect(answer.closed, "\(label): the daemon kept the connection open")
            #expect(!ChannelFrame.split(answer.bytes).contains { $0.type != ChannelFrame.refused }, "\(label): \(answer.bytes.count) bytes back")
        }

        // 2. Truncated frames: closed early, or left hanging (dropped at the peer timeout).
        let (identity, seed) = try Self.stranger(&random)
        let realHello = try #require(SecureChannel(role: .initiator, identity: identity, household: household, seed: seed,
                                                   authorize: { _, _, _, _ in nil }).start().compactMap { action -> [UInt8]? in
            if case .send(let bytes) = action { return bytes } else { return nil }
        }.first)
        do {
            let fd = try open("truncated hello, then close")
            sendAll(fd, Array(realHello.prefix(40)))
            shutdown(fd, Int32(SHUT_WR))
            #expect(Self.drain(fd, timeout: 10).closed)
            close(fd)
        }
        do {
            let fd = try open("truncated hello, then silence")
            defer { close(fd) }
            sendAll(fd, Array(realHello.prefix(40)))
            #expect(Self.drain(fd, timeout: 20).closed, "a silent half-sent hello was not dropped")
        }

        // 3. A handshake for another household: refused, nothing of the ledger sent.
        do {
            let fd = try open("handshake for another household")
            defer { close(fd) }
            let (other, otherSeed) = try Self.stranger(&random)
            let channel = try SecureChannel(role: .initiator, identity: other, household: RecordID(high: random.next(), low: random.next()),
                                            seed: otherSeed, authorize: { _, _, _, _ in nil })
            #expect(Self.handshake(fd, channel) == nil)
            let answer = Self.drain(fd, timeout: 10)
            #expect(answer.closed)
        }

        // 4. A peer sending its hello one byte a second: dropped at the peer timeout, long before
        //    the 71 bytes are in (at most 12 bytes are tried).
        do {
            let fd = try open("one byte a second")
            defer { close(fd) }
            var sent = 0, dropped = false
            for byte in realHello.prefix(12) {
                if let chunk = receiveSome(fd, millis: 1_000), chunk.isEmpty || ChannelFrame.split(chunk).contains(where: { $0.type == ChannelFrame.refused }) {
                    dropped = true
                    break
                }
                guard sendAll(fd, [byte]) else { dropped = true; break }
                sent += 1
            }
            if !dropped { dropped = Self.drain(fd, timeout: 10).closed }
            #expect(dropped, "the slow peer was not dropped after \(sent) bytes")
            #expect(sent < realHello.count)
        }

        // 5. A stranger's handshake is refused before the daemon reveals its key (issue 22,
        //    point 5); the hostile member completes it and then trickles its sync hello a byte at
        //    a time: dropped when it has not identified itself in time.
        let member = try accountIdentity(b), daemonKey = try accountIdentity(a).publicKey.bytes
        do {
            let fd = try open("stranger's handshake")
            defer { close(fd) }
            let (key, keySeed) = try Self.stranger(&random)
            let channel = try SecureChannel(role: .initiator, identity: key, household: household, seed: keySeed, authorize: { _, _, _, _ in nil })
            #expect(Self.handshake(fd, channel) == nil, "the daemon admitted a stranger's handshake")
            #expect(channel.peerKey == nil)
        }
        do {
            let fd = try open("member trickling after the handshake")
            defer { close(fd) }
            let (_, keySeed) = try Self.stranger(&random)
            let channel = try SecureChannel(role: .initiator, identity: member, household: household, seed: keySeed, authorize: { _, _, _, _ in nil })
            let established = try #require(Self.handshake(fd, channel), "the daemon refused the member's handshake")
            #expect(established.peerKey?.bytes == daemonKey)
            let sealed = try established.seal([0, 0, 0, 30, 1] + [UInt8](repeating: 0, count: 29))
            var dropped = false
            for byte in sealed.prefix(12) {
                if let chunk = receiveSome(fd, millis: 700), chunk.isEmpty { dropped = true; break }
                guard sendAll(fd, [byte]) else { dropped = true; break }
            }
            if !dropped { dropped = Self.drain(fd, timeout: 10).closed }
            #expect(dropped, "the trickling stranger was not dropped")
        }

        // 6. The hostile member completes the handshake, then sends sync frames the daemon must refuse:
        //    out of order (a vector before hello), an unknown type, a zero and an oversized length.
        let syncFrames: [(String, [UInt8])] = [
            ("sync vector before hello (wrong order)", [0, 0, 0, 3, 3, 0, 0]),
            ("unknown sync message type", [0, 0, 0, 3, 0x63, 1, 2]),
            ("zero sync length prefix", [0, 0, 0, 0, 1]),
            ("oversized sync length prefix", [0x7F, 0xFF, 0xFF, 0xFF, 1]),
        ]
        for (label, bytes) in syncFrames {
            let fd = try open(label)
            defer { close(fd) }
            let (_, keySeed) = try Self.stranger(&random)
            let channel = try SecureChannel(role: .initiator, identity: member, household: household, seed: keySeed, authorize: { _, _, _, _ in nil })
            let established = try #require(Self.handshake(fd, channel), "\(label): the daemon refused the member's handshake")
            sendAll(fd, try established.seal(bytes))
            #expect(Self.drain(fd, timeout: 10).closed, "\(label): not closed")
        }

        // 7. 300 connections at once, holding them open; then all closed.
        var flood: [Int32] = []
        defer { flood.forEach { close($0) } }
        for i in 0..<300 {
            let fd = ports.connect(to: daemon.port)
            if fd < 0 { Issue.record("connect \(i) of the flood failed: errno \(errno)"); break }
            hostilePorts[Self.localPort(fd)] = "flood \(i)"
            flood.append(fd)
        }
        #expect(flood.count == 300)
        // Each is refused at once (busy: 4 at most from one address) or dropped at the peer
        // timeout: all end closed.
        let floodDeadline = Deadline(seconds: 60)
        var closedCount = 0
        for fd in flood {
            let answer = Self.drain(fd, timeout: max(0.1, floodDeadline.secondsLeft))
            if answer.closed { closedCount += 1 }
        }
        #expect(closedCount == flood.count, "\(flood.count - closedCount) flood connections were never closed")
        flood.forEach { close($0) }
        flood = []

        // The member got through after all that, and keeps getting through.
        #expect(eventually(timeout: 60) { legit.state.withLock { $0.succeeded } >= 1 }, "the member never synced: \(legit.state.withLock { $0.failures })")
        legit.state.withLock { $0.stop = true }
        #expect(eventually(timeout: 120) { legit.done.withLock { $0 } })
        let (rounds, succeeded, given, failures) = legit.state.withLock { ($0.rounds, $0.succeeded, $0.given, $0.failures) }
        try ok(b, "sync", daemon.address)

        // Converged: A holds every legitimate change, nothing else.
        #expect(try digest(a) == digest(b))
        let history = try json(a, "history", "--limit", "0")["transactions"] as? [[String: Any]] ?? []
        let notes = history.compactMap { ($0["transaction"] as? [String: Any])?["note"] as? String }
        #expect(Set(notes) == Set(given + ["start"]), "A's notes: \(notes.sorted())")
        #expect(notes.count == given.count + 1)
        #expect(try childTable(a).keys.sorted() == ["Ava"])
        let membersAfter = try json(a, "members")["members"] as? [[String: Any]] ?? []
        #expect(membersAfter.count == membersBefore.count, "no grant for any hostile key")
        try expectVerified(a, "the attacked daemon's home")
        #expect(!daemon.background.hasExited, "the daemon died: \(daemon.log.suffix(2000))")

        // Memory stayed bounded (an absolute, generous bound; no timing).
        let memoryAfter = memory()
        #expect(memoryAfter.hwm > 0 && memoryAfter.hwm < 256 * 1024, "daemon VmHWM \(memoryAfter.hwm) kB")

        // Each hostile connection before the flood was logged exactly once; of the flood, those
        // served once each, the refused ones (all from 127.0.0.1) without a flood of lines: the
        // first of each 10 s, and the rest counted in one line.
        func linesMentioning(_ port: Int) -> Int {
            let needle = "127.0.0.1:\(port)"
            return daemon.log.split(separator: "\n").filter { line in
                var rest = line[...]
                while let range = rest.range(of: needle) {
                    let after = rest[range.upperBound...].first
                    if after == nil || !(after!.isASCII && after!.isNumber) { return true }
                    rest = rest[range.upperBound...]
                }
                return false
            }.count
        }
        let single = hostilePorts.filter { !$0.value.hasPrefix("flood ") }
        let floodPorts = hostilePorts.keys.filter { hostilePorts[$0]!.hasPrefix("flood ") }
        func counted() -> Int {
            daemon.log.split(separator: "\n").compactMap { line -> Int? in
                guard let range = line.range(of: "refused "), line.contains(" more connection"), line.contains(" from 127.0.0.1 within ") else { return nil }
                return Int(line[range.upperBound...].prefix { $0.isNumber })
            }.reduce(0, +)
        }
        #expect(eventually(timeout: 30) { single.keys.allSatisfy { linesMentioning($0) >= 1 } })
        let wrong = single.filter { linesMentioning($0.key) != 1 }.map { "\($0.value) (port \($0.key)): \(linesMentioning($0.key)) lines" }
        #expect(wrong.isEmpty, "not logged exactly once: \(wrong.prefix(10))\n\(daemon.log.suffix(3000))")
        // Counted refusals may include the member's own during the flood.
        #expect(eventually(timeout: 30) { floodPorts.filter { linesMentioning($0) == 1 }.count + counted() >= floodPorts.count },
                "flood connections neither logged nor counted\n\(daemon.log.suffix(3000))")
        let floodLines = floodPorts.filter { linesMentioning($0) >= 1 }.count
        #expect(floodPorts.allSatisfy { linesMentioning($0) <= 1 } && floodLines <= 40, "\(floodLines) lines for \(floodPorts.count) flood connections")
        print("hostile peers: \(hostilePorts.count) hostile connections; member \(succeeded) of \(rounds) syncs succeeded (a failure: \(failures.first.map { $0.split(separator: "\n").filter { $0.hasPrefix("kidledger") || $0.hasPrefix("exit") }.joined(separator: " | ") } ?? "none")); daemon VmRSS \(memoryBefore.rss) -> \(memoryAfter.rss) kB, VmHWM \(memoryBefore.hwm) -> \(memoryAfter.hwm) kB")
    }
}

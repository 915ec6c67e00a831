import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerSecurity
@testable import KidLedgerDaemon

/// What a peer that is not admitted yet (the secure handshake and its sync `hello` not both done)
/// can make a running daemon hold (issue 21, point 5): a few connections per address, kilobytes
/// each. Hostile connections come from other loopback addresses (127.0.0.2, 127.0.0.3: all of 127/8
/// is this machine), the member's syncs from 127.0.0.1, so the daemon runs with its product limits.
/// Since the channel refuses a stranger before establishment (issue 22, point 5), the connections
/// that finish the handshake and then stall are a hostile member's (the threat model's insider). The peer
/// timeout is 60 s, far longer than each test, so nothing here ends by a timeout. Every loop and
/// wait is bounded.
@Suite("Pre-admission limits of a running daemon")
struct PreAdmissionTests {
    static let peerTimeout = [Daemon.peerTimeoutVariable: "60000"]

    /// A daemon for a household with child Ava, and a member that joined it (its identity, for
    /// the hostile connections).
    static func household(_ a: TestLedger, _ b: TestLedger, _ group: ProcessGroup) throws -> (DaemonProcess, RecordID, Identity)? {
        try ok(a, "init", "Smiths")
        try ok(a, "child", "add", "Ava")
        guard let daemon = try DaemonProcess.start(a, in: group, extraEnvironment: peerTimeout) else { return nil }
        try ok(b, "join", try inviteCode(a))
        let household = try #require(try Context(home: a.home, json: false, console: BufferConsole(), clock: SystemClock())
            .openReplica().household()).id
        return (daemon, household, try accountIdentity(b))
    }

    /// A connection from `source` that completes the secure handshake as `member` and then sends
    /// nothing: established, not admitted.
    static func establishedStranger(_ port: Int, source: String, household: RecordID, member identity: Identity,
                                    _ random: inout SplitMix64) throws -> (fd: Int32, channel: SecureChannel) {
        let fd = connectLocal(port, source: source)
        try #require(fd >= 0, "connect from \(source)")
        let (_, seed) = try HostilePeerTests.stranger(&random)
        let channel = try SecureChannel(role: .initiator, identity: identity, household: household, seed: seed, authorize: { _, _, _, _ in nil })
        guard let established = HostilePeerTests.handshake(fd, channel) else {
            close(fd)
            throw CLIError("the daemon refused a member's handshake", code: .software)
        }
        return (fd, established)
    }

    /// The refusal log: the first refusal of an address is logged, the rest within the interval
    /// counted into one line, other addresses apart; the table is bounded.
    @Test func refusalsAreLoggedOncePerAddressAndIntervalThenCounted() {
        var log = RefusalLog()
        let busy = "busy: too many connections from 10.0.0.9 (4 at most); try again later"
        #expect(log.refused("10.0.0.9:5000", address: "10.0.0.9", busy, now: 0) == "refused 10.0.0.9:5000: \(busy)")
        for port in 5001..<5100 { #expect(log.refused("10.0.0.9:\(port)", address: "10.0.0.9", busy, now: 1_000) == nil) }
        #expect(log.refused("10.0.0.7:6000", address: "10.0.0.7", busy, now: 2_000) != nil)
        #expect(log.due(now: RefusalLog.intervalMillis - 1).isEmpty)
        #expect(log.due(now: RefusalLog.intervalMillis) == ["refused 99 more connections from 10.0.0.9 within 10 s (not logged one by one): \(busy)"])
        // 10.0.0.7 had nothing more: no line; after its interval, a refusal is logged again.
        #expect(log.due(now: RefusalLog.intervalMillis + 2_000).isEmpty)
        #expect(log.refused("10.0.0.9:5200", address: "10.0.0.9", busy, now: RefusalLog.intervalMillis + 3_000) != nil)
        // Many addresses: the table starts afresh past its bound instead of growing.
        for i in 0..<(RefusalLog.addressesMax * 3) {
            #expect(log.refused("10.1.\(i / 256).\(i % 256):1", address: "10.1.\(i / 256).\(i % 256)", busy, now: 30_000) != nil)
        }
        #expect(log.tracked <= RefusalLog.addressesMax)
    }

    @Test func strangersFromOneAddressGetAFewSlotsAndAMemberKeepsSyncing() throws {
        let a = TestLedger(), b = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove() }
        let (daemon, household, member) = try #require(try Self.household(a, b, group))
        var random = SplitMix64(seed: 0x21_05)
        let perAddress = Daemon.limitsDefault.perAddressMax

        // A stranger holds as many connections as one address may: half finish the handshake and
        // stall before their sync hello, half send nothing.
        var held: [Int32] = []
        defer { held.forEach { close($0) } }
        for i in 0..<perAddress {
            if i % 2 == 0 {
                held.append(try Self.establishedStranger(daemon.port, source: "127.0.0.2", household: household, member: member, &random).fd)
            } else {
                let fd = connectLocal(daemon.port, source: "127.0.0.2")
                try #require(fd >= 0)
                held.append(fd)
            }
        }
        // More from that address are refused at once with the per-address reason.
        let reason = "busy: too many connections from 127.0.0.2 (\(perAddress) at most); try again later"
        let refusedCount = 20
        for i in 0..<refusedCount {
            let fd = connectLocal(daemon.port, source: "127.0.0.2")
            try #require(fd >= 0)
            defer { close(fd) }
            let answer = HostilePeerTests.drain(fd, timeout: 20)
            #expect(answer.closed, "refusal \(i): left open")
            #expect(ChannelFrame.split(answer.bytes).map { String(decoding: $0.payload, as: UTF8.self) } == [reason], "refusal \(i)")
        }

        // Meanwhile a member (another address) gives and syncs, three times.
        for round in 0..<3 {
            try ok(b, "give", "Ava", "1.00", "--note", "round \(round)")
            try ok(b, "sync", daemon.address)
        }
        #expect(try digest(a) == digest(b))
        // The stranger's connections are still held (not dropped to make room).
        for (i, fd) in held.enumerated() { #expect(receiveSome(fd, millis: 0) == nil, "held connection \(i) was closed") }

        // The refusals are logged without a flood: one line for the first, then the rest counted
        // in one line when the 10 s interval ends.
        func refusalLines() -> (first: Int, counted: Int) {
            let lines = daemon.log.split(separator: "\n")
            let first = lines.filter { $0.contains("refused 127.0.0.2:") && $0.hasSuffix(reason) }.count
            let counted = lines.compactMap { line -> Int? in
                guard let range = line.range(of: "refused "), line.contains(" more connection"), line.contains(" from 127.0.0.2 within ") else { return nil }
                return Int(line[range.upperBound...].prefix { $0.isNumber })
            }.reduce(0, +)
            return (first, counted)
        }
        #expect(eventually(timeout: 40) { let r = refusalLines(); return r.first + r.counted == refusedCount }, "\(daemon.log)")
        #expect(refusalLines().first <= 2, "one refusal line per address and interval: \(daemon.log)")
        #expect(!daemon.background.hasExited)
    }

    @Test func aStrangersLargeFrameBeforeAdmissionIsRefusedFromItsLengthPrefix() throws {
        let a = TestLedger(), b = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove() }
        let (daemon, household, member) = try #require(try Self.household(a, b, group))
        var random = SplitMix64(seed: 0x21_0B)

        // A channel data frame announcing 1 MiB: the daemon closes at its length prefix rather
        // than wait for the body (the peer timeout is 60 s).
        do {
            let (fd, _) = try Self.establishedStranger(daemon.port, source: "127.0.0.2", household: household, member: member, &random)
            defer { close(fd) }
            sendAll(fd, [0, 0x10, 0, 0, ChannelFrame.data] + [UInt8](repeating: 0, count: 1_000))
            #expect(HostilePeerTests.drain(fd, timeout: 20).closed, "the daemon waited for a 1 MiB channel frame from a stranger")
        }
        // A sync frame announcing 1 MiB inside a small data frame: refused the same way.
        do {
            let (fd, channel) = try Self.establishedStranger(daemon.port, source: "127.0.0.2", household: household, member: member, &random)
            defer { close(fd) }
            sendAll(fd, try channel.seal([0, 0x10, 0, 0, 1] + [UInt8](repeating: 0, count: 100)))
            #expect(HostilePeerTests.drain(fd, timeout: 20).closed, "the daemon waited for a 1 MiB sync frame from a stranger")
        }
        #expect(eventually(timeout: 20) {
            daemon.log.contains("length 1048576 exceeds \(SecureChannel.unadmittedFrameBytesMax) bytes")
                && daemon.log.contains("malformed frame: length 1048576 exceeds \(helloFrameBytesMax) bytes")
        }, "\(daemon.log)")

        // Strangers filling every slot they may have (4 from each of two addresses) each send a
        // whole 4 MiB frame: the daemon holds none of it.
        func highWater() -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(daemon.background.pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        }
        let before = highWater()
        var strangers: [Int32] = []
        defer { strangers.forEach { close($0) } }
        for source in ["127.0.0.2", "127.0.0.3"] {
            for _ in 0..<Daemon.limitsDefault.perAddressMax {
                strangers.append(try Self.establishedStranger(daemon.port, source: source, household: household, member: member, &random).fd)
            }
        }
        let frameBytes = SecureChannel.frameBytesMax
        let big = [UInt8(frameBytes >> 24), UInt8((frameBytes >> 16) & 0xFF), UInt8((frameBytes >> 8) & 0xFF), UInt8(frameBytes & 0xFF),
                   ChannelFrame.data] + [UInt8](repeating: 0x5A, count: frameBytes - 1)
        for fd in strangers { sendAll(fd, big) }
        for (i, fd) in strangers.enumerated() { #expect(HostilePeerTests.drain(fd, timeout: 20).closed, "stranger \(i) left open") }
        let after = highWater()
        #expect(before > 0 && after - before < 8 << 10, "the daemon's VmHWM grew from \(before) to \(after) kB")
        print("pre-admission: 8 strangers sending a 4 MiB frame each: daemon VmHWM \(before) -> \(after) kB")

        // The member still syncs.
        try ok(b, "give", "Ava", "1.00")
        try ok(b, "sync", daemon.address)
        #expect(try digest(a) == digest(b))
    }

    /// Strangers from two addresses hold every slot not admitted yet (4 each): a member's
    /// connection takes the place of the oldest of them, so the member keeps syncing (before, it
    /// was refused "busy" until a stranger let go); the closing is logged.
    @Test func strangersFillingThePoolNotAdmittedDoNotKeepAMemberOut() throws {
        let a = TestLedger(), b = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove() }
        let (daemon, household, member) = try #require(try Self.household(a, b, group))
        var random = SplitMix64(seed: 0x21_05_02)
        var strangers: [Int32] = []
        defer { strangers.forEach { close($0) } }
        for source in ["127.0.0.2", "127.0.0.3"] {
            for i in 0..<Daemon.limitsDefault.perAddressMax {
                if i % 2 == 0 {
                    strangers.append(try Self.establishedStranger(daemon.port, source: source, household: household, member: member, &random).fd)
                } else {
                    let fd = connectLocal(daemon.port, source: source)
                    try #require(fd >= 0)
                    strangers.append(fd)
                }
            }
        }
        #expect(Daemon.limitsDefault.unadmittedMax == strangers.count)
        for round in 0..<3 {
            try ok(b, "give", "Ava", "1.00", "--note", "round \(round)")
            try ok(b, "sync", daemon.address)
        }
        #expect(try digest(a) == digest(b))
        // The first session took the place of one stranger; the later ones found that place free.
        let closed = strangers.filter { HostilePeerTests.drain($0, timeout: 0.5).closed }.count
        #expect(closed == 1, "\(closed) stranger connections closed")
        #expect(eventually(timeout: 20) { daemon.log.contains("closed a connection not admitted yet to make room") }, "\(daemon.log)")
        #expect(!daemon.background.hasExited)
    }
}

import Foundation
import Synchronization
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
import KidLedgerSecurity
@testable import KidLedgerDaemon

/// Issue 22, point 5: nothing identifying on the wire. Every byte of real sessions between two
/// homes (a join, then syncs that carry names both ways) goes through a recording relay on
/// 127.0.0.1; neither device's key (raw, hex, base64url), nor the household id (raw, hex, dashed),
/// nor the household's, the child's or the member's names, nor a note appear in it. An active
/// stranger that connects to the daemon gets no byte holding the daemon's key or the household.
@Suite("What the wire shows (recorded sessions between real processes)")
struct NetworkCaptureTests {
    /// A TCP relay on 127.0.0.1 (a free port) to `target` for any number of connections (served
    /// one at a time, each bounded by the relay's deadline), recording every byte of both
    /// directions of all of them.
    final class RecordingRelay: Sendable {
        let port: Int
        private let state = Mutex<(bytes: [UInt8], connections: Int, stop: Bool)>(([], 0, false))

        init(to target: Int, timeout: TimeInterval = 120) throws {
            let (listener, port) = try listeningSocket()
            self.port = port
            Thread.detachNewThread { [self] in
                defer { close(listener) }
                let deadline = Deadline(seconds: timeout)
                var p = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                while !deadline.passed && !state.withLock({ $0.stop }) {
                    guard poll(&p, 1, 50) > 0 else { continue }
                    let client = accept(listener, nil, nil)
                    guard client >= 0 else { continue }
                    state.withLock { $0.connections += 1 }
                    pump(client, target, deadline)
                }
            }
        }

        var address: String { "127.0.0.1:\(port)" }
        /// Every byte relayed so far, both directions, all connections.
        var bytes: [UInt8] { state.withLock { $0.bytes } }
        var connections: Int { state.withLock { $0.connections } }
        func stop() { state.withLock { $0.stop = true } }

        private func pump(_ client: Int32, _ target: Int, _ deadline: Deadline) {
            defer { close(client) }
            let server = connectLocal(target)
            guard server >= 0 else { return }
            defer { close(server) }
            var open = [true, true]
            let ends = [client, server]
            while !deadline.passed && (open[0] || open[1]) {
                var fds = (0..<2).map { pollfd(fd: open[$0] ? ends[$0] : -1, events: Int16(POLLIN), revents: 0) }
                guard poll(&fds, 2, 50) > 0 else { continue }
                for side in 0..<2 where open[side] && fds[side].revents != 0 {
                    let chunk = receiveSome(ends[side], millis: 0) ?? []
                    if chunk.isEmpty {
                        open[side] = false
                        shutdown(ends[1 - side], Int32(SHUT_WR))
                    } else {
                        state.withLock { $0.bytes += chunk }
                        _ = sendAll(ends[1 - side], chunk)
                    }
                }
            }
        }
    }

    /// The ways a secret could show: its bytes, and its text forms.
    static func forms(of raw: [UInt8]) -> [(String, [UInt8])] {
        let hex = raw.map { String(format: "%02x", $0) }.joined()
        let base64 = Data(raw).base64EncodedString()
        let base64url = base64.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        return [("raw", raw), ("hex", Array(hex.utf8)), ("HEX", Array(hex.uppercased().utf8)),
                ("base64", Array(base64.utf8)), ("base64url", Array(base64url.utf8)),
                // A 24-byte prefix of the base64url form: the key inside a longer encoding.
                ("base64url prefix", Array(base64url.utf8.prefix(24)))]
    }

    /// What must not show: both devices' keys, the household id, and names (labelled).
    static func secrets(keys: [(String, PublicKey)], household: RecordID, names: [String]) -> [(String, [UInt8])] {
        var out: [(String, [UInt8])] = []
        for (label, key) in keys { out += forms(of: key.bytes).map { ("\(label) key (\($0.0))", $0.1) } }
        out += forms(of: household.bytes).map { ("household id (\($0.0))", $0.1) }
        out.append(("household id (dashed)", Array(household.description.utf8)))
        out += names.map { ("name \"\($0)\"", Array($0.utf8)) }
        return out
    }

    @Test func aRecordedJoinAndSyncsShowNoKeyHouseholdOrName() throws {
        let a = TestLedger(), b = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove() }
        try ok(a, "init", "Quixbury Household")
        try ok(a, "child", "add", "Zanzibarra")
        try ok(a, "give", "Zanzibarra", "5.00", "--note", "Veritaserum note")
        let daemon = try #require(try DaemonProcess.start(a, in: group))
        let relay = try RecordingRelay(to: daemon.port)
        defer { relay.stop() }

        // B joins through the relay (the code names the relay's address), under a display name.
        let code = try #require(try json(a, "invite", "--address", relay.address)["code"] as? String)
        try ok(b, "join", code, "--name", "Wilhelmina Grubb")
        // Names travel both ways: a child's rename and a gift on B, the owner's new display name on A.
        try ok(b, "child", "rename", "Zanzibarra", "Xylophonetta")
        try ok(b, "give", "Xylophonetta", "1.25", "--note", "Mnemosyne gift")
        try ok(b, "sync", relay.address)
        try ok(a, "account", "rename", "Bartholomew Quince")
        try ok(a, "give", "Xylophonetta", "0.50", "--note", "Oubliette bonus")
        try ok(b, "sync", relay.address)
        #expect(try digest(a) == digest(b))
        #expect(try childTable(b)["Xylophonetta"] == [675, 3])
        #expect(relay.connections >= 4, "join (2 sessions) and 2 syncs: \(relay.connections) connections")

        let captured = relay.bytes
        #expect(captured.count > 2_000, "\(captured.count) bytes captured")
        let household = try #require(try Context(home: a.home, json: false, console: BufferConsole(), clock: SystemClock())
            .openReplica().household()).id
        let names = ["Quixbury", "Bartholomew", "Quince", "Zanzibarra", "Xylophonetta", "Wilhelmina", "Grubb",
                     "Veritaserum", "Mnemosyne", "Oubliette"]
        let secrets = Self.secrets(keys: [("owner's", try accountIdentity(a).publicKey), ("joiner's", try accountIdentity(b).publicKey)],
                                   household: household, names: names)
        #expect(secrets.count > 20)
        // The check finds what is there: the owner's key as `account show` prints it, the names in a
        // plaintext listing.
        let shown = Array(try runKidledger(a, ["--json", "account", "show"]).stdout.utf8)
        #expect(secrets.contains { $0.0.hasPrefix("owner's") && occurs(in: shown, $0.1) })
        #expect(occurs(in: Array(try ok(b, "children").utf8), Array("Xylophonetta".utf8)))
        print("wire capture: \(captured.count) bytes in \(relay.connections) connections; \(secrets.count) forms of keys, household id and names checked")
        for (label, needle) in secrets {
            #expect(!occurs(in: captured, needle), "the \(label) appears in the \(captured.count) captured bytes")
        }
        // The capture is the channel's frames: a plaintext refusal would be the only clear text.
        let frames = ChannelFrame.split(captured)
        #expect(frames.contains { $0.type == ChannelFrame.hello } && frames.contains { $0.type == ChannelFrame.data })
        #expect(!frames.contains { $0.type == ChannelFrame.refused }, "\(frames.map(\.type))")
    }

    /// Issue 22, point 4: a join with the short code (the CPace handshake and the long code's
    /// hand-over, then the join it leads to) through the recording relay shows neither key, the
    /// household id, a name, the short code or its password, nor the long code it hands over.
    @Test func aRecordedShortCodeJoinShowsNoKeyHouseholdNameOrCode() throws {
        let a = TestLedger(), b = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove(); b.remove() }
        try ok(a, "init", "Quixbury Household")
        try ok(a, "child", "add", "Zanzibarra")
        let daemon = try #require(try DaemonProcess.start(a, in: group))
        let relay = try RecordingRelay(to: daemon.port)
        defer { relay.stop() }
        let invite = try json(a, "invite", "--address", relay.address)
        let shortText = try #require(invite["shortCode"] as? String), long = try #require(invite["code"] as? String)
        let short = try ShortCode.parse(shortText).get()
        try ok(b, "join", shortText, "--address", relay.address, "--name", "Wilhelmina Grubb")
        #expect(try digest(a) == digest(b))
        #expect(relay.connections >= 3, "hand-over, join, first member sync: \(relay.connections) connections")
        let captured = relay.bytes
        let household = try #require(try Context(home: a.home, json: false, console: BufferConsole(), clock: SystemClock())
            .openReplica().household()).id
        var secrets = Self.secrets(keys: [("owner's", try accountIdentity(a).publicKey), ("joiner's", try accountIdentity(b).publicKey)],
                                   household: household, names: ["Quixbury", "Zanzibarra", "Wilhelmina", "Grubb"])
        secrets += [("short code", Array(shortText.utf8)), ("short code without dashes", Array(shortText.filter { $0 != "-" }.utf8)),
                    ("long code", Array(long.utf8)), ("long code's tail", Array(long.utf8.suffix(24)))]
        secrets += Self.forms(of: short.password).map { ("short code's password (\($0.0))", $0.1) }
        for (label, needle) in secrets {
            #expect(!occurs(in: captured, needle), "the \(label) appears in the \(captured.count) captured bytes")
        }
        let frames = ChannelFrame.split(captured)
        // The short-code hello (mode 2) came first; no refusal crossed.
        #expect(frames.first?.type == ChannelFrame.hello && frames.first?.payload.count == 67 && frames.first?.payload[1] == 2)
        #expect(!frames.contains { $0.type == ChannelFrame.refused }, "\(frames.map(\.type))")
    }

    /// An active stranger connects to the daemon, sends a v2 hello (member mode, and join mode),
    /// then a confirm (with a household it guessed wrong, and with the right household id): it
    /// gets a reply of fresh randomness and a refusal, never the daemon's key or the household.
    @Test func anActiveStrangerLearnsOnlyThatADaemonListens() throws {
        let a = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); a.remove() }
        try ok(a, "init", "Quixbury Household")
        try ok(a, "child", "add", "Zanzibarra")
        let daemon = try #require(try DaemonProcess.start(a, in: group))
        _ = try inviteCode(a)  // an invitation is open: a join's handshake is tried against it
        let household = try #require(try Context(home: a.home, json: false, console: BufferConsole(), clock: SystemClock())
            .openReplica().household()).id
        let secrets = Self.secrets(keys: [("daemon's", try accountIdentity(a).publicKey)], household: household,
                                   names: ["Quixbury", "Zanzibarra"])
        var random = SplitMix64(seed: 0x22_05)
        let cases: [(String, RecordID, SecureChannel.Mode)] = [
            ("member, guessed household", RecordID(high: random.next(), low: random.next()), .member),
            ("member, known household", household, .member),
            ("join, guessed invitation", household, .join(invitationKey: SecureChannel.invitationKey(secret: Array(repeating: 7, count: 16)))),
        ]
        for (label, claimed, mode) in cases {
            let (identity, seed) = try HostilePeerTests.stranger(&random)
            let channel = try SecureChannel(role: .initiator, identity: identity, household: claimed, seed: seed, mode: mode,
                                            authorize: { _, _, _, _ in nil })
            let fd = connectLocal(daemon.port)
            try #require(fd >= 0)
            defer { close(fd) }
            var received: [UInt8] = []
            #expect(HostilePeerTests.handshake(fd, channel) { received += $0 } == nil, "\(label): the daemon admitted a stranger")
            received += HostilePeerTests.drain(fd, timeout: 10).bytes
            let failed = channel.isFailed
            let types = ChannelFrame.split(received).map(\.type)
            #expect(failed && channel.peerKey == nil, "\(label): \(types)")
            #expect(types.first == ChannelFrame.reply && types.count == 2, "\(label): \(types)")
            #expect(!types.contains(ChannelFrame.accept) && !types.contains(ChannelFrame.data), "\(label): \(types)")
            for (what, needle) in secrets {
                #expect(!occurs(in: received, needle), "\(label): the \(what) appears in the \(received.count) bytes the stranger got")
            }
        }
        #expect(!daemon.background.hasExited)
    }
}

import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerSecurity
import Testing
@testable import KidLedgerDaemon

/// The sealed relay between real `kidledger` processes on 127.0.0.1 (docs/RELAY-DESIGN.md):
/// Mom adopts a relay, Dad joins, and from then on the two laptops never dial each other: each
/// writes while the other is off and syncs only through the relay, and they converge. The relay's
/// files hold none of the names, notes or amounts.
@Suite("A sealed relay between real processes")
struct RelayProcessTests {
    /// Starts `relay serve --listen 127.0.0.1:0` in `home` and waits at most 30 s for its code
    /// (HOME/relay-code.txt) and its first log line.
    static func startRelay(_ home: TestLedger, in group: ProcessGroup) throws -> (BackgroundProcess, String) {
        let relay = group.add(try BackgroundProcess(home, ["relay", "serve", "--listen", "127.0.0.1:0"]))
        let deadline = Deadline(seconds: 30)
        while !deadline.passed && !relay.hasExited {
            if relay.stderr.contains("relay serving on 127.0.0.1:"),
               let code = try? String(contentsOfFile: home.home + "/relay-code.txt", encoding: .utf8) {
                return (relay, code.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            usleep(20_000)
        }
        Issue.record("relay serve did not start: \(relay.stderr)")
        throw CancellationError()
    }

    @Test func momAndDadConvergeOnlyThroughTheRelay() throws {
        let mom = TestLedger(), dad = TestLedger(), relayHome = TestLedger(), stranger = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); [mom, dad, relayHome, stranger].forEach { $0.remove() } }
        try ok(mom, "init", "Smiths")
        try ok(mom, "child", "add", "Zephyrine")
        try ok(mom, "give", "Zephyrine", "12.34", "--note", "marmalade-fund")
        let (relay, code) = try Self.startRelay(relayHome, in: group)
        #expect(code.hasPrefix("KLR1-"))
        // An address is not a code (usage); the owner adopts with the code.
        #expect(try runKidledger(mom, ["relay", "add", "127.0.0.1:9"]).code == 64)
        let added = try json(mom, "relay", "add", code)
        #expect(added["synced"] as? Bool == true, "\(added)")
        #expect(!FileManager.default.fileExists(atPath: relayHome.home + "/relay-code.txt"), "the code is used up")

        // Hostile input does not stop the relay: raw garbage, and a stranger who completes the
        // handshake and then sends an adopt, a frame of an unknown type and a lying length.
        let port = Int(relay.stderr.split(separator: "127.0.0.1:").dropFirst().first?.prefix { $0.isNumber } ?? "") ?? 0
        let raw = connectLocal(port)
        #expect(raw >= 0)
        let garbage = (0..<4_096).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ 7) }
        _ = garbage.withUnsafeBytes { send(raw, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        close(raw)
        let relayKey = try #require(RelayCode(text: code)).relay
        let strangerKey = try Identity(seed: [UInt8](repeating: 0x66, count: 32))
        for hostile in [RelayAdoption.adoptFrame(secret: [UInt8](repeating: 0, count: 16),
                                                 list: SignedRelayAccessList.sign(try RelayAccessList(number: 9, quotas: [RelayMemberKey(bytes: strangerKey.publicKey.bytes)!: 1]),
                                                                                  relay: PublicKey(bytes: relayKey)!, owner: strangerKey)),
                        Frame.encode(type: 99, payload: [1, 2, 3]), [0xFF, 0xFF, 0xFF, 0xFF, 1] + garbage] {
            let (stream, _) = try RelayDriver.connect(["127.0.0.1:\(port)"], relay: relayKey, as: strangerKey)
            try stream.write(hostile, timeoutMillis: 5_000)
            // The relay answers `error` and closes, or just closes: either way within the peer timeout.
            var ended = false
            for _ in 0..<64 where !ended {
                do { ended = try stream.read(maxBytes: 1 << 16, timeoutMillis: 20_000).isEmpty } catch { ended = true }
            }
            #expect(ended)
            stream.close()
        }
        #expect(!relay.hasExited, "\(relay.stderr)")

        // Dad joins while Mom's daemon runs, for the join only.
        let daemon = try #require(try DaemonProcess.start(mom, in: group))
        try ok(dad, "join", try inviteCode(mom), "--name", "Dad")
        #expect(daemon.stop() == 0)
        // A member that is not the owner can't add a relay; a stranger's owner can't adopt an adopted one.
        #expect(try runKidledger(dad, ["relay", "add", code]).code == 77)
        try ok(stranger, "init", "Joneses")
        #expect(try runKidledger(stranger, ["relay", "add", code]).code == 77)

        // The owner's relay session hands the relay the list with Dad's key.
        try ok(mom, "relay", "sync")
        // Dad writes while Mom is off, and syncs with the relay only; then Mom, then Dad again.
        try ok(dad, "give", "Zephyrine", "0.77", "--note", "quokka-snacks")
        try ok(dad, "relay", "sync")
        try ok(mom, "give", "Zephyrine", "5.55", "--note", "pelican-tax")
        let momSync = try json(mom, "relay", "sync")
        let results = momSync["results"] as? [[String: Any]] ?? []
        #expect((results.first?["changesReceived"] as? Int ?? 0) >= 1, "\(momSync)")
        try ok(dad, "relay", "sync")
        #expect(try digest(mom) == digest(dad))
        #expect(try childTable(dad)["Zephyrine"]?[0] == 1_234 + 77 + 555)

        // `status` says the route; --json has `relays`.
        let status = try ok(mom, "status")
        #expect(status.contains("Dad's laptop: via the relay, last synced"), "\(status)")
        let document = try json(mom, "status")
        let route = ((document["relays"] as? [[String: Any]])?.first?["laptops"] as? [[String: Any]])?.first?["route"] as? String
        #expect(route == "relay", "\(document)")

        // The relay's files hold none of the names, notes or amounts.
        let stored = try Data(contentsOf: URL(fileURLWithPath: relayHome.home + "/relay/data.mdb"))
        for secret in ["Zephyrine", "Smiths", "marmalade", "quokka", "pelican", "Dad", "12.34", "1234", "5.55"] {
            #expect(stored.range(of: Data(secret.utf8)) == nil, "the relay's store holds \"\(secret)\"")
        }

        // Dad's daemon syncs through the relay by itself (its gossip loop), never dialling Mom:
        // Dad forgets Mom's address first.
        for peer in try json(dad, "peers")["peers"] as? [[String: Any]] ?? [] {
            if let address = peer["address"] as? String { try ok(dad, "peer", "remove", address) }
        }
        try ok(mom, "give", "Zephyrine", "1.00", "--note", "heron-gift")
        try ok(mom, "relay", "sync")
        let dadDaemon = try #require(try DaemonProcess.start(dad, in: group, arguments: ["--ui", "off", "--no-discovery"]))
        let momDigest = try digest(mom)
        var deadline = Deadline(seconds: 60)
        while try digest(dad) != momDigest && !deadline.passed { usleep(100_000) }
        #expect(try digest(dad) == momDigest, "\(dadDaemon.log)")
        // Dad writes while his daemon runs: it pushes the change to the relay soon after; Mom pulls it.
        try ok(dad, "give", "Zephyrine", "2.00", "--note", "ibis-fee")
        deadline = Deadline(seconds: 60)
        while !deadline.passed {
            _ = try runKidledger(mom, ["relay", "sync"])
            if try childTable(mom)["Zephyrine"]?[0] == 1_234 + 77 + 555 + 100 + 200 { break }
            usleep(200_000)
        }
        #expect(try digest(mom) == digest(dad), "\(dadDaemon.log)")
        #expect(dadDaemon.log.contains("relay 127.0.0.1:"), "\(dadDaemon.log)")
        #expect(dadDaemon.stop() == 0)

        // Removed: the relay serves nobody of the household, Dad (who never learned of the removal) is refused.
        try ok(mom, "relay", "remove")
        let refused = try runKidledger(dad, ["relay", "sync"])
        #expect(refused.code == 77, "\(refused)")
        relay.send(SIGTERM)
        #expect(relay.wait(timeout: 15), "the relay did not stop")
        #expect(relay.stderr.contains("adopted by owner key"))
        // Unreachable now: status says so.
        _ = try runKidledger(dad, ["relay", "sync"])
        #expect(try ok(dad, "status").contains("was unreachable"))
    }

    @Test func aRelayHomeGetsItsOwnServiceUnit() throws {
        let relayHome = TestLedger()
        defer { relayHome.remove() }
        try FileManager.default.createDirectory(atPath: relayHome.home, withIntermediateDirectories: true)
        let unit = try ok(relayHome, "service", "install", "--relay", "--listen", "127.0.0.1:4790", "--dry-run")
        #expect(unit.contains("relay serve --listen 127.0.0.1:4790"), "\(unit)")
        #expect(unit.contains("Description=kidledger relay for"), "\(unit)")
        #expect(try runKidledger(relayHome, ["service", "install", "--relay", "--ui", "off", "--dry-run"]).code == 64)
    }
}

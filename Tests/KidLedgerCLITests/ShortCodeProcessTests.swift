#if canImport(Glibc)
import Glibc
#endif
import Foundation
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI

/// Issue 22, point 4: a code a person can pass on. `join XXXX-XXXX-XXXX` finds the inviting
/// daemon by its invitation announcement (unicast to 127.0.0.1 here: `--announce-to`, a loopback
/// daemon broadcasts nowhere), proves the code in a CPace handshake and joins; a mistyped code
/// is reported as mistyped and changes nothing; a wrong code is refused, counted and, after 5,
/// burns the short code; the long code keeps working.
@Suite("Joining with a short code", .serialized)
struct ShortCodeProcessTests {
    /// An owner's home with a child and a daemon announcing to `joinPort` (UDP on 127.0.0.1).
    static func inviter(_ mom: TestLedger, group: ProcessGroup, joinPort: Int) throws -> DaemonProcess {
        try ok(mom, "init", "Smiths")
        try ok(mom, "child", "add", "Ava")
        try ok(mom, "give", "Ava", "2.50")
        let own = try DiscoveryProcessTests.freeUDPPort()
        return try #require(try DaemonProcess.start(mom, in: group,
                                                    arguments: DiscoveryProcessTests.discoveryArguments(listen: own, announceTo: joinPort)))
    }

    /// A well-formed code for `slot` that is not `code`.
    static func wrong(_ code: ShortCode) -> ShortCode { ShortCode(slot: code.slot, secret: code.secret ^ 0x2A) }

    @Test func aShortCodeFindsTheInviterByItsAnnouncementAndJoins() throws {
        let mom = TestLedger(), dad = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove() }
        let joinPort = try DiscoveryProcessTests.freeUDPPort()
        let daemon = try Self.inviter(mom, group: group, joinPort: joinPort)
        let invite = try json(mom, "invite")
        let short = try #require(invite["shortCode"] as? String)
        #expect(invite["code"] is String && (invite["fingerprint"] as? String)?.count == 19)
        #expect(try ShortCode.parse(short).get().text == short)
        // Typed sloppily: lower case, spaces for dashes.
        let typed = short.lowercased().replacingOccurrences(of: "-", with: " ")
        let joined = try runKidledger(dad, ["join", typed, "--discovery-port", String(joinPort), "--wait", "20"])
        #expect(joined.code == 0, "\(joined)")
        let fingerprint = try #require(invite["fingerprint"] as? String)
        #expect(joined.stdout.contains("Joined \"Smiths\"") && joined.stdout.contains(fingerprint))
        #expect(try childTable(dad)["Ava"] == [250, 1])
        #expect(try digest(mom) == digest(dad))
        #expect(daemon.background.stderr.contains("proved the short code of invitation slot"))
        // A code works once: the short code is used up, so is the long one.
        let again = TestLedger()
        defer { again.remove() }
        let second = try runKidledger(again, ["join", short, "--address", "127.0.0.1:\(daemon.port)"])
        #expect(second.code == 77 && second.stderr.contains("no open invitation on this network matches that code"), "\(second)")
        #expect(try runKidledger(again, ["join", try #require(invite["code"] as? String)]).code == 77)
    }

    @Test func aMistypedCodeSaysSoAndChangesNothing() throws {
        let mom = TestLedger(), dad = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove() }
        let joinPort = try DiscoveryProcessTests.freeUDPPort()
        let daemon = try Self.inviter(mom, group: group, joinPort: joinPort)
        let short = try #require(try json(mom, "invite")["shortCode"] as? String)
        var symbols = Array(short)
        symbols[5] = symbols[5] == "7" ? "8" : "7"
        for typo in [String(symbols), String(short.dropLast()), "Z" + short.dropFirst().replacingOccurrences(of: "-", with: "")] {
            let outcome = try runKidledger(dad, ["join", typo, "--discovery-port", String(joinPort), "--wait", "5"])
            #expect(outcome.code == 65 && outcome.stderr.hasPrefix("kidledger: that code is mistyped: check each character"), "\(outcome)")
        }
        #expect(!FileManager.default.fileExists(atPath: dad.home), "a mistyped code created the home")
        #expect(!daemon.background.stderr.contains("session from"), "a mistyped code reached the daemon")
        // The code still works.
        #expect(try runKidledger(dad, ["join", short, "--discovery-port", String(joinPort), "--wait", "20"]).code == 0)
    }

    @Test func aHomeWithAnotherLedgerIsRefusedBeforeTheShortCodeIsSpent() throws {
        let mom = TestLedger(), dad = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove() }
        let joinPort = try DiscoveryProcessTests.freeUDPPort()
        let daemon = try Self.inviter(mom, group: group, joinPort: joinPort)
        let short = try #require(try json(mom, "invite", "--qr")["shortCode"] as? String)
        try ok(dad, "init", "Joneses")
        try ok(dad, "child", "add", "Zed")
        let refused = try runKidledger(dad, ["join", short, "--address", "127.0.0.1:\(daemon.port)"])
        #expect(refused.code == 65 && refused.stderr.contains("ledgers are never merged silently"), "\(refused)")
        #expect(!daemon.background.stderr.contains("session from"))
        try ok(dad, "join", short, "--address", "127.0.0.1:\(daemon.port)", "--replace")
        #expect(try childTable(dad)["Ava"] == [250, 1] && (try childTable(dad)["Zed"]) == nil)
    }

    @Test func theQRCodeIsDrawnWithHalfBlocksWhenAsked() throws {
        let code = "KL1-" + String(repeating: "Ab9_", count: 34)
        let qr = try #require(ShortCodeJoin.qr(code))
        let rows = qr.split(separator: "\n").map { Array($0) }
        // Version 7 at level L holds 140 bytes: 45 modules and a 2-module quiet zone each side.
        let size = try #require(rows.first?.count)
        #expect(size >= 21 + 4 && (size - 4 - 17) % 4 == 0, "\(size) columns")
        #expect(rows.count == (size + 1) / 2 && rows.allSatisfy { $0.count == size })
        #expect(rows.joined().allSatisfy { "█▀▄ ".contains($0) } && rows[0].allSatisfy { $0 == "█" })
        let mom = TestLedger()
        defer { mom.remove() }
        try ok(mom, "init", "Smiths")
        #expect(try ok(mom, "invite", "--address", "192.168.1.20:4717", "--qr").contains("▀"))
        #expect(!(try ok(mom, "invite", "--address", "192.168.1.20:4717")).contains("▀"))
    }

    @Test func aWrongCodeIsRefusedCountedAndBurnsTheShortCodeButNotTheLongOne() throws {
        let mom = TestLedger(), dad = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove() }
        let joinPort = try DiscoveryProcessTests.freeUDPPort()
        let daemon = try Self.inviter(mom, group: group, joinPort: joinPort)
        let invite = try json(mom, "invite")
        let short = try ShortCode.parse(try #require(invite["shortCode"] as? String)).get()
        let wrong = Self.wrong(short)
        // By discovery, a wrong code matches no announcement: nobody is dialed, nothing counted.
        let unheard = try runKidledger(dad, ["join", wrong.text, "--discovery-port", String(joinPort), "--wait", "3"])
        #expect(unheard.code == 69 && unheard.stderr.contains("no open invitation on this network matches that code"), "\(unheard)")
        #expect(!daemon.background.stderr.contains("session from"))
        // At the daemon's address, each wrong code is refused and counted.
        for attempt in 1...DeviceState.shortCodeTries {
            let outcome = try runKidledger(dad, ["join", wrong.text, "--address", "127.0.0.1:\(daemon.port)"])
            #expect(outcome.code == 77 && outcome.stderr.contains("no open invitation on this network matches that code"), "\(outcome)")
            let left = DeviceState.shortCodeTries - attempt
            let line = left == 0 ? "is burned after \(DeviceState.shortCodeTries) tries" : "has \(left) tr\(left == 1 ? "y" : "ies") left"
            #expect(eventually(timeout: 5, interval: 0.2) { daemon.background.stderr.contains(line) }, "\(daemon.background.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: dad.home), "a refused code left something in the home")
        // Burned: the right code is refused too; the long code still joins.
        let burned = try runKidledger(dad, ["join", short.text, "--address", "127.0.0.1:\(daemon.port)"])
        #expect(burned.code == 77, "\(burned)")
        try ok(dad, "join", try #require(invite["code"] as? String))
        #expect(try childTable(dad)["Ava"] == [250, 1])
    }
}

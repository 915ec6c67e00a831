import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTransport
@testable import KidLedgerDaemon

/// Issue 21, points 1 and 4 through the CLI: a receipt holding a huge number (stored before
/// sequences were bounded) does not trap `status` or `peers`; notes reach the terminal escaped,
/// and `--json` keeps them as they are. Every other text command: `HostileTextCommandsTests`.
@Suite("Hostile numbers and text in the CLI")
struct HostileTextAndNumbersTests {
    /// Every character of `text` that would act on a terminal, if any.
    static func unsafe(_ text: String) -> [Unicode.Scalar] {
        text.unicodeScalars.filter { $0 != "\n" && TextEscaping.isUnsafeForTerminal($0) }
    }

    /// What a hostile member writes: an escape sequence, a carriage return, a new line with a
    /// fake line after it, a bell, a C1 control, DEL and a right-to-left override.
    static let hostile = "red\u{1B}[31m\r\nstatus: synced\u{7}\u{85}\u{7F}\u{202E}cba"

    /// A new ledger with a household and Ava, and `peers` added as peers (127.0.0.1:1, :2, ...).
    static func ledger(peers: Int) -> TestLedger {
        let l = TestLedger()
        _ = l.ok("init", "Smiths")
        _ = l.ok("child", "add", "Ava")
        for port in 0..<peers { _ = l.ok("peer", "add", "127.0.0.1:\(port + 1)") }
        return l
    }

    static func withReplica(_ l: TestLedger, _ body: (Replica) throws -> Void) throws {
        let replica = try Context(home: l.home, json: false, console: BufferConsole(), clock: SystemClock()).openReplicaForChanges()
        defer { (replica.store as? LMDBEnvironment)?.close() }
        try body(replica)
    }

    @Test func aStoredHugeReceiptDoesNotTrapStatusOrPeers() throws {
        let l = Self.ledger(peers: 2)
        defer { l.remove() }
        try Self.withReplica(l) { replica in
            // What an acknowledgement held before decoders bounded sequences: 2^63, and entries
            // whose sum overflows.
            try replica.device.updatePeer("127.0.0.1:1") { p in
                p.lastSuccessMillis = 1_795_000_000_000
                p.receipt = [ReplicaID(1): 1 << 63, ReplicaID(2): .max]
            }
            try replica.device.updatePeer("127.0.0.1:2") { p in
                p.lastSuccessMillis = 1_795_000_000_000
                p.receipt = [ReplicaID(3): .max - 1, ReplicaID(4): .max - 1, replica.replicaID: 1]
            }
        }
        #expect(l.ok("status").contains("status: "))
        #expect(l.ok("peers").contains("127.0.0.1:1"))
        let peers = try #require(checkJSON(l, "peers") as? [String: Any])
        let list = try #require(peers["peers"] as? [[String: Any]])
        #expect(list.count == 2)
        #expect(list.contains { $0["weLack"] as? Int == Int.max }, "\(list)")
        _ = try #require(checkJSON(l, "status") as? [String: Any])
    }

    @Test func notesAreEscapedInTablesAndRoundTripInJSON() throws {
        let l = Self.ledger(peers: 0)
        defer { l.remove() }
        let given = l.ok("give", "Ava", "1", "--note", Self.hostile)
        #expect(Self.unsafe(given).isEmpty)
        let history = l.ok("history", "Ava")
        #expect(Self.unsafe(history).isEmpty, "\(history.debugDescription)")
        #expect(!history.contains("\nstatus: synced"), "the note started a line of its own: \(history)")
        #expect(history.contains("red\\u{1b}[31m\\r\\nstatus: synced"))
        let json = try #require(checkJSON(l, "history", "Ava") as? [String: Any])
        let entries = try #require(json["transactions"] as? [[String: Any]], "\(json)")
        let notes = entries.compactMap { ($0["transaction"] as? [String: Any])?["note"] as? String }
        #expect(notes == [Self.hostile])
        let raw = l.run(["--json", "history", "Ava"]).stdout
        #expect(Self.unsafe(raw).isEmpty, "JSON printed to a terminal is safe too")
    }

    @Test func terminalEscapingIsIdempotentAndKeepsOrdinaryText() {
        let once = TextEscaping.terminal(Self.hostile)
        #expect(TextEscaping.terminal(once) == once)
        #expect(TextEscaping.terminal("Zoë 👩‍👧 $1.25 \\n") == "Zoë 👩‍👧 $1.25 \\n")
        #expect(TextEscaping.terminalLines("a\nb\u{1B}") == "a\nb\\u{1b}")
        #expect(TextEscaping.terminal("a\nb") == "a\\nb")
        // Format controls that reorder or hide text are escaped; joiners (emoji need them) are not.
        #expect(TextEscaping.terminal("a\u{206A}b\u{FFF9}c\u{200D}d") == "a\\u{206a}b\\u{fff9}c\u{200D}d")
    }
}

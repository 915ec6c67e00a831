#if canImport(Glibc)
import Glibc
#endif
import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI

/// Issue 23 point 5: a `join` killed before it finished leaves a home whose commands (and `status`)
/// say to run the join again, instead of "run init"; running it again works.
@Suite("An interrupted join")
struct JoinInterruptedTests {
    static let message = "kidledger: " + Context.joinInterruptedMessage + "\n"

    @Test func killedJoinSaysRunItAgainAndTheSecondJoinWorks() throws {
        try withLedger { owner in
            try withLedger { joiner in
                let group = ProcessGroup()
                defer { group.stopAll() }
                _ = try ok(owner, "init", "Home")
                _ = try ok(owner, "child", "add", "Ava")
                _ = try ok(owner, "give", "Ava", "1")
                // The inviting address is a socket that listens but never answers: the join connects,
                // builds its staging ledger and waits, and is killed there.
                let silent = try loopbackSocket(listening: true)
                defer { close(silent.fd) }
                let code = try #require(try json(owner, "invite", "--address", "127.0.0.1:\(silent.port)")["code"] as? String)
                let join = group.add(try BackgroundProcess(joiner, ["join", code]))
                let staging = joiner.home + "/ledger.joining/data.mdb"
                let deadline = Deadline(seconds: 60)
                while !FileManager.default.fileExists(atPath: staging) && !join.hasExited && !deadline.passed { usleep(10_000) }
                #expect(FileManager.default.fileExists(atPath: staging) && !join.hasExited, "join: \(join.stderr)")
                join.killAndReap()
                #expect(join.killedBySignal)

                for arguments in [["status"], ["balance"], ["history"]] {
                    let outcome = joiner.run(arguments)
                    #expect(outcome.code == 75 && outcome.stdout == "" && outcome.stderr == Self.message, "\(arguments): \(outcome)")
                }
                let jsonStatus = joiner.run("--json", "status")
                #expect(jsonStatus.code == 75 && jsonStatus.stderr.contains("\"code\":\"temporaryFailure\""), "\(jsonStatus)")

                // Run again against the real daemon: it joins, and the staging ledger is gone.
                let daemon = try #require(try DaemonProcess.start(owner, in: group))
                _ = daemon
                let joined = try runKidledger(joiner, ["join", try inviteCode(owner)])
                #expect(joined.code == 0 && joined.stdout.hasPrefix("Joined \"Home\": 1 child, 1 transaction."), "\(joined)")
                #expect(!FileManager.default.fileExists(atPath: joiner.home + "/ledger.joining"))
                let status = try runKidledger(joiner, ["status"])
                #expect(status.code == 0 && !status.stdout.contains("did not finish"), "\(status)")
                #expect(try json(joiner, "status")["joinInterrupted"] as? Bool == false)
            }
        }
    }

    /// A home that has a ledger and a left-over staging ledger (a `join --replace` killed): the
    /// ledger still works, and `status` says the join did not finish.
    @Test func interruptedReplaceKeepsTheLedgerAndStatusSaysSo() throws {
        try withLedger { l in
            l.ok("init", "Home")
            try FileManager.default.createDirectory(atPath: l.home + "/ledger.joining", withIntermediateDirectories: true)
            #expect(l.ok("balance") == "No children yet: `kidledger child add NAME`.\n")
            let status = l.masked(l.ok("status"))
            #expect(status.hasPrefix("status: alone\n" + Context.joinInterruptedMessage
                                     + "; this home's ledger is the one it had before (to keep it and forget that join, remove $HOME/ledger.joining)\n"), "\(status)")
            #expect((checkJSON(l, "status") as? [String: Any])?["joinInterrupted"] as? Bool == true)
        }
    }
}

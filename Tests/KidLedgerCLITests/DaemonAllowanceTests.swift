import Foundation
import Synchronization
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerTransport
@testable import KidLedgerDaemon

/// The daemon's allowance step on its injected clock: a week after the schedule was set, the
/// step (run by the gossip loop once a second) pays the new period once, and logs it.
@Suite("Daemon pays the allowance")
struct DaemonAllowanceTests {
    @Test func daemonPaysTheNewPeriodOnce() throws {
        try withLedger { l in
            l.ok("init", "Smiths")
            l.ok("child", "add", "Ava")
            l.ok("allowance", "set", "Ava", "5", "--every", "week")  // Wednesday 2026-11-18: paid at once
            let weekLater = TestLedger.startMillis + 7 * 86_400_000
            let ctx = Context(home: l.home, json: false, console: BufferConsole(), clock: FixedClock(millis: weekLater))
            let replica = try ctx.openReplicaForChanges()
            let environment = try #require(replica.store as? LMDBEnvironment)
            defer { environment.close() }
            let identity = try #require(try ctx.identity(creating: false))
            let listener = try TCPListener(address: PeerAddress(host: "127.0.0.1", port: 0))
            defer { listener.close() }
            let lines = Mutex<[String]>([])
            let daemon = Daemon(environment: environment, household: try #require(try replica.household()).id, identity: identity,
                                listener: listener, log: { line in lines.withLock { $0.append(line) } }, clock: FixedClock(millis: weekLater))
            let own = try daemon.makeReplica()
            daemon.payAllowances(own)
            daemon.payAllowances(own)  // nothing more is due
            #expect(lines.withLock { $0 } == ["paid Ava's allowance of $5.00 for the period from 2026-11-25 00:00 UTC"])
            #expect(try own.resolveChild("Ava").balanceCents == 1000)
        }
    }
}

import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity
@testable import KidLedgerSimulation
import Testing

@Suite("The determinism rerun of a fuzzed seed")
struct RerunTests {
    @Test("a rerun without the final checks ends at the same loop trace and digest", arguments: [3 as UInt64, 24])
    func skippedChecksRerun(seed: UInt64) {
        let full = SimulatorCLI.runSeed(seed)
        let replay = SimulatorCLI.runSeed(seed, finalChecks: .skipped)
        #expect(full.passed && replay.passed)
        #expect(full.loopTraceHash == replay.loopTraceHash && full.digest == replay.digest)
        #expect(full.events == replay.events && full.virtualMillis == replay.virtualMillis)
        // The final checks ran in the full run only: they add trace lines and equivalent ways.
        #expect(full.traceHash != full.loopTraceHash && replay.traceHash == replay.loopTraceHash)
        #expect(full.equivalentWays >= 2 && replay.equivalentWays == 0)
        #expect(SimulatorCLI.sameRun(full, replay))
    }

    @Test("a rerun that differs anywhere is told apart")
    func differences() {
        let full = SimulatorCLI.runSeed(3)
        let replay = SimulatorCLI.runSeed(3, finalChecks: .skipped)
        var otherLoop = replay
        otherLoop.loopTraceHash = "0"
        otherLoop.traceHash = "0"
        #expect(!SimulatorCLI.sameRun(full, otherLoop))
        var otherDigest = replay
        otherDigest.digest = "0"
        #expect(!SimulatorCLI.sameRun(full, otherDigest))
        var failed = replay
        failed.failures = ["r1 lost acknowledged transaction"]
        #expect(!SimulatorCLI.sameRun(full, failed))
        // A failing first run must be reproduced whole: the same loop alone is not enough.
        var failing = full
        failing.failures = ["digests differ"]
        #expect(!SimulatorCLI.sameRun(failing, replay))
        #expect(SimulatorCLI.sameRun(failing, failing))
    }

    @Test("the rerun derives, signs and prepares nothing afresh, and a share other runs filled changes no result",
          arguments: [false, true])
    func sharedWork(membership: Bool) {
        let adjust = SimulatorCLI.adjustment(membership)
        let share = SeedShare()
        let first = SimulatorCLI.runSeed(3, share: share, adjust: adjust)
        let misses = share.preparations.misses, answers = share.answerCount
        #expect(first.passed && misses > 0 && answers > 0)
        let rerun = SimulatorCLI.runSeed(3, finalChecks: .skipped, share: share, adjust: adjust)
        #expect(share.preparations.misses == misses && share.answerCount == answers)
        #expect(SimulatorCLI.sameRun(first, rerun))
        // Another seed, through the share seed 3 filled and through a fresh one: the same run.
        let shared = SimulatorCLI.runSeed(24, share: share, adjust: adjust)
        let alone = SimulatorCLI.runSeed(24, adjust: adjust)
        #expect(share.preparations.misses > misses && share.answerCount > answers)
        #expect(shared.traceHash == alone.traceHash && shared.digest == alone.digest && shared.failures == alone.failures)
    }

    @Test("a share answers as the functions it remembers, for every argument")
    func shareAnswers() throws {
        let share = SeedShare()
        let seeds = (1...3).map { [UInt8](repeating: $0, count: Identity.seedByteCount) }
        let household = RecordID(high: 1, low: 2)
        for _ in 0..<2 {
            for seed in seeds {
                let identity = try Identity(seed: seed)
                #expect(try share.identity(seed: seed).publicKey == identity.publicKey)
                for nonce in [UInt64(1), 2] {
                    #expect(share.signer(for: identity).claim(household: household, nonce: nonce)
                        == identity.signer.claim(household: household, nonce: nonce))
                }
                let member = try Identity(seed: seeds[0]).publicKey
                for (name, at) in [("r1", 5 as Int64), ("r2", 5), ("r1", 6)] {
                    #expect(share.grant(by: identity, member, name: name, household: household, atMillis: at)
                        == identity.grant(member, name: name, household: household, atMillis: at))
                }
                for seen in [[:], [ReplicaID(1): 3]] as [VersionVector] {
                    #expect(share.revocation(by: identity, of: member.bytes, seen: seen, household: household, atMillis: 7)
                        == identity.revocation(of: member.bytes, seen: seen, household: household, atMillis: 7))
                }
            }
        }
        #expect(share.answerCount == 3 * (1 + 2 + 3 + 2))
    }

    @Test("fuzzing a seed: a passing one reports nothing, a failing one reproduces its failure whole")
    func runTwice() {
        let passing = SimulatorCLI.runTwice(3, replicas: 2...5, lmdb: false, membership: false)
        #expect(passing.result.passed && passing.failures.isEmpty)
        let failing = SimulatorCLI.runTwice(7, replicas: 2...5, lmdb: false, membership: false, plantedBug: .crossReplicaUndo)
        #expect(!failing.result.passed)
        // The rerun checked everything again and found the same: no "not deterministic" added.
        #expect(failing.failures == failing.result.failures)
    }

    @Test("fuzz --no-rerun runs each seed once: the same seeds, events and verdict, one run per seed")
    func noRerun() {
        var twice: [String] = [], once: [String] = []
        // Three seeds may not inject every fault kind, so the exit status is not the point here.
        _ = SimulatorCLI.run(arguments: ["fuzz", "--seeds", "3", "--start", "5"], output: { twice.append($0) })
        _ = SimulatorCLI.run(arguments: ["fuzz", "--seeds", "3", "--start", "5", "--no-rerun"], output: { once.append($0) })
        func field(_ lines: [String], _ key: String) -> String? {
            lines.first { $0.hasPrefix("seeds=") }?.split(separator: " ").first { $0.hasPrefix(key + "=") }.map(String.init)
        }
        #expect(field(twice, "runsPerSeed") == "runsPerSeed=2")
        #expect(field(once, "runsPerSeed") == "runsPerSeed=1")
        #expect(field(twice, "failures") == "failures=0" && field(once, "failures") == "failures=0")
        #expect(field(twice, "events") != nil && field(twice, "events") == field(once, "events"))
        // A failing seed fails on its one run, with its first run's failures.
        let failing = SimulatorCLI.runOnce(7, replicas: 2...5, lmdb: false, membership: false, plantedBug: .crossReplicaUndo)
        #expect(!failing.result.passed)
        #expect(!failing.failures.isEmpty && failing.failures == failing.result.failures)
    }
}

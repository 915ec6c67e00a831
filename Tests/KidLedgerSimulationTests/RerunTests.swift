import KidLedgerReplica
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

    @Test("the rerun prepares no change afresh, and a cache other runs filled changes no result")
    func sharedPreparations() {
        let cache = PreparationCache()
        let first = SimulatorCLI.runSeed(3, preparations: cache)
        let misses = cache.misses
        #expect(first.passed && misses > 0)
        let rerun = SimulatorCLI.runSeed(3, finalChecks: .skipped, preparations: cache)
        #expect(cache.misses == misses && SimulatorCLI.sameRun(first, rerun))
        // Another seed, through the cache seed 3 filled and through a fresh one: the same run.
        let shared = SimulatorCLI.runSeed(24, preparations: cache)
        let alone = SimulatorCLI.runSeed(24)
        #expect(cache.misses > misses)
        #expect(shared.traceHash == alone.traceHash && shared.digest == alone.digest && shared.failures == alone.failures)
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
}

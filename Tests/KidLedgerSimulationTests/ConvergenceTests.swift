import KidLedgerDomain
import KidLedgerSimulation
import Testing

/// Fuzzed convergence: a fixed set of seeds, each drawing its own fault rates, operation mix and
/// replica count (2 to 5), runs the real replica and protocol code; every check must hold.
@Suite("Fuzzed convergence")
struct ConvergenceTests {
    /// The CI seed set. Every eighth seed keeps its replicas in LMDB.
    static let seeds: [UInt64] = Array(1...48)

    @Test("seed converges with every check holding", arguments: seeds)
    func seedConverges(seed: UInt64) {
        let result = SimulatorCLI.runSeed(seed, replicas: 2...5, lmdb: seed % 8 == 0)
        #expect(result.passed, "seed \(seed): \(result.failures.joined(separator: "; ")) — reproduce: swift run kidledger-sim seed \(seed)\(seed % 8 == 0 ? " --lmdb" : "") --trace")
        #expect(!result.digest.isEmpty)
    }

    @Test("the CI seeds inject every kind of fault")
    func everyFaultKindIsInjected() {
        var faults: [String: Int] = [:]
        for seed in Self.seeds {
            for (k, v) in SimulationParameters.draw(seed: seed).faultKinds() { faults[k, default: 0] += v }
        }
        for kind in ["loss", "duplication", "reorder", "partition", "crash", "staleRestore", "skew"] {
            #expect(faults[kind, default: 0] > 0, "no seed draws \(kind)")
        }
    }

    @Test("the same seed gives a byte-identical trace", arguments: [3 as UInt64, 11, 24])
    func deterministic(seed: UInt64) {
        let first = SimulatorCLI.runSeed(seed, keepTrace: true)
        let second = SimulatorCLI.runSeed(seed, keepTrace: true)
        #expect(first.traceHash == second.traceHash)
        #expect(first.trace == second.trace)
        #expect(first.trace.count > 10)
        #expect(first.events == second.events && first.digest == second.digest)
    }

    @Test("different seeds give different runs")
    func seedsDiffer() {
        #expect(SimulatorCLI.runSeed(1).traceHash != SimulatorCLI.runSeed(2).traceHash)
    }

    @Test("a stale restore in the CI set really exercises fork recovery")
    func staleRestoresHappen() {
        var restores = 0
        for seed in Self.seeds.prefix(24) {
            restores += SimulatorCLI.runSeed(seed).faults["staleRestore", default: 0]
        }
        #expect(restores > 0)
    }
}

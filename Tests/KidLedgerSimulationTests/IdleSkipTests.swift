import Foundation
import Testing
@testable import KidLedgerSimulation

/// Idle time is skipped (issue 21, point 8): a week apart with nothing to send is a few events,
/// and skipping changes no outcome.
@Suite("Idle time is skipped")
struct IdleSkipTests {
    /// Two laptops a week apart (the default gossip period), then healed.
    static let weekApart = """
    replicas 3
    at 0 r0 add-child Ava as kid
    at 0 sync all
    at 1000 partition r0 | r1 r2
    at 2000 r0 give @kid 1.00
    at 3000 r1 give @kid 2.00
    at 604800000 heal
    at 604810000 r2 take @kid 0.50
    expect converged
    expect balance @kid 2.50
    """

    /// An hour apart, short enough to play every gossip tick too.
    static let hourApart = """
    replicas 3
    gossip 100
    at 0 r0 add-child Ava as kid
    at 0 sync all
    at 500 r1 rename @kid Avery
    at 1000 partition r0 | r1 r2
    at 2000 r0 give @kid 1.00
    at 2500 r2 give @kid 0.25
    at 3600000 heal
    at 3600050 r1 take @kid 0.50
    at 3600100 r0 give @kid 0.10
    at 7200000 r2 give @kid 3.00
    expect converged
    expect balance @kid 3.85
    """

    static func run(_ scenario: Scenario, seed: UInt64?, skip: Bool) -> ScenarioResult {
        Simulator.runScenario(scenario, seed: seed, keepTrace: false, record: false, plantedBug: nil, verbose: false, skipIdle: skip)
    }

    @Test("a week-long partition with nothing to send takes a bounded number of events")
    func weekIsCheap() throws {
        let result = Simulator.runScenario(try Scenario.parse(Self.weekApart))
        #expect(result.passed, "\(result.timeline.joined(separator: "\n"))")
        // Played tick by tick it is about 6 million gossip events (3 replicas, 300 ms).
        #expect(result.simulation.events < 5_000, "\(result.simulation.events) events")
    }

    @Test("skipping idle time changes no outcome", arguments: [1, 2, 3, 7, 42] as [UInt64])
    func sameOutcome(seed: UInt64) throws {
        let scenario = try Scenario.parse(Self.hourApart)
        let skipped = Self.run(scenario, seed: seed, skip: true), played = Self.run(scenario, seed: seed, skip: false)
        #expect(skipped.passed && played.passed)
        #expect(skipped.simulation.digest == played.simulation.digest)
        #expect(skipped.outcomes.map(\.passed) == played.outcomes.map(\.passed))
        #expect(skipped.simulation.failures == played.simulation.failures)
        #expect(skipped.simulation.events * 20 < played.simulation.events,
                "\(skipped.simulation.events) vs \(played.simulation.events) events")
    }

    @Test("the hand-written scenarios end alike with and without skipping")
    func scenariosAlike() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Simulations")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".scenario") }.sorted()
        #expect(!files.isEmpty)
        for file in files {
            let scenario = try Scenario.parse(String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8))
            let a = Self.run(scenario, seed: nil, skip: true), b = Self.run(scenario, seed: nil, skip: false)
            #expect(a.passed == b.passed && a.simulation.digest == b.simulation.digest, "\(file)")
        }
    }

    @Test("skipping needs nothing to send between replicas that can reach each other")
    func onlyWhenNothingToSend() throws {
        // Reachable replicas that differ keep gossiping: the change reaches r1 before r2 posts.
        let result = Simulator.runScenario(try Scenario.parse("""
        replicas 2
        gossip 100
        at 0 r0 add-child Ava as kid
        at 60000 r1 give @kid 1.00
        expect converged
        expect balance @kid 1.00
        """))
        #expect(result.passed, "\(result.timeline.joined(separator: "\n"))")
    }
}

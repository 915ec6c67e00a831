#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerTestSupport
import Testing
@testable import KidLedgerSimulation

/// `kidledger-sim shrink`, the scenario format it writes, and the planted bug that makes a run fail.
@Suite("Shrinking")
struct ShrinkTests {
    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    @Test("a failing seed shrinks to a smaller scenario that still fails the same way when run")
    func shrinkPlantedBug() throws {
        let dir = KidLedgerTestSupport.TemporaryDirectory(prefix: "kidledger-shrink-test")
        defer { dir.remove() }
        let out = dir.sub("seed7.scenario"), svg = dir.sub("seed7.svg")
        let (code, output) = ScenarioTests.run(["shrink", "--seed", "7", "--plant-bug", "cross-replica-undo", "--out", out, "--svg", svg])
        #expect(code == 0, "\(output)")
        // The seed's own event list, as the command reports it.
        let listed = try #require(output.first { $0.hasPrefix("explicit event list: ") })
        let words = listed.split(separator: " ")
        let originalSteps = try #require(Int(words[3])), originalReplicas = try #require(Int(words[6]))
        let text = try #require(SimulatorCLI.readFile(out))
        let shrunk = try Scenario.parse(text)
        #expect(shrunk.steps.count < originalSteps && shrunk.replicas <= originalReplicas, "\(listed)\n\(text)")
        #expect(shrunk.steps.count <= 4 && shrunk.replicas == 2, "\(text)")
        #expect(shrunk.steps.contains { if case .undo = $0.action { true } else { false } }, "\(text)")
        #expect(text.contains("# Fails: planted bug cross-replica-undo"))

        // `run` of the written file fails with the planted bug, and passes without it.
        let failing = ScenarioTests.run(["run", out, "--plant-bug", "cross-replica-undo"])
        #expect(failing.code == 1)
        #expect(failing.output.contains { $0.hasPrefix("FAILED (engine check): planted bug cross-replica-undo: ") }, "\(failing.output)")
        #expect(failing.output.contains { $0.hasSuffix("--plant-bug cross-replica-undo") && $0.hasPrefix("reproduce: ") })
        #expect(ScenarioTests.run(["run", out]).code == 0)
        #expect(Self.exists(svg))
    }

    @Test("a passing seed: said so, exit 0, nothing written")
    func passingSeedWritesNothing() {
        let dir = KidLedgerTestSupport.TemporaryDirectory(prefix: "kidledger-shrink-test")
        defer { dir.remove() }
        let out = dir.sub("seed2.scenario")
        let (code, output) = ScenarioTests.run(["shrink", "--seed", "2", "--out", out])
        #expect(code == 0)
        #expect(output.last == "seed 2 passes every check: nothing to shrink (no file written)", "\(output)")
        #expect(!Self.exists(out))
    }

    @Test("the shrinker removes replicas and steps and keeps the failure's kind")
    func shrinkerOnAScenario() throws {
        // Five replicas, noise everywhere; the failure needs r3's transaction and r1's undo of it.
        let scenario = try Scenario.parse("""
            replicas 5
            gossip 200
            at 0    loss 1.5
            at 0    r0 add-child Ava as a
            at 10   r2 skew +5000
            at 20   r4 add-child Ben as b
            at 50   sync all
            at 400  r3 give @a 1.00 note "chore"
            at 450  r0 give @a 2.00
            at 500  r4 crash
            at 600  sync r3 r1
            at 900  r4 restart
            at 1000 r1 undo
            at 1100 r2 give @b 0.50
            """)
        let failure = try #require(Shrinker.failure(of: scenario, plantedBug: .crossReplicaUndo))
        #expect(failure.hasPrefix("planted bug cross-replica-undo: r1 undid"))
        #expect(Shrinker.failure(of: scenario, plantedBug: nil) == nil)
        let outcome = Shrinker.shrink(scenario, failure: failure, plantedBug: .crossReplicaUndo, maxRuns: 200)
        #expect(!outcome.budgetExhausted)
        #expect(outcome.scenario.replicas == 2, "\(outcome.scenario.text())")
        #expect(outcome.scenario.steps.count <= 4, "\(outcome.scenario.text())")
        #expect(Shrinker.kind(outcome.failure) == Shrinker.kind(failure))
        #expect(Shrinker.failure(of: outcome.scenario, plantedBug: .crossReplicaUndo) != nil)
        // A budget of a few runs is respected.
        #expect(Shrinker.shrink(scenario, failure: failure, plantedBug: .crossReplicaUndo, maxRuns: 3).runs == 3)
    }

    @Test("failure kinds ignore replica names, ids and counts")
    func failureKinds() {
        #expect(Shrinker.kind("planted bug cross-replica-undo: r1 undid transaction ab12 made on r0")
                == Shrinker.kind("planted bug cross-replica-undo: r0 undid transaction ff00 made on r3"))
        #expect(Shrinker.kind("r2 lost acknowledged transaction 1f (made on r1)") == "# lost acknowledged transaction # (made on #")
        #expect(Shrinker.kind("digests differ: r0=aa r1=bb") != Shrinker.kind("r0 verify: bad"))
    }

    @Test("removing a replica renumbers the others and drops what involved it")
    func removingReplica() throws {
        let s = try Scenario.parse("""
            replicas 4
            at 0 r0 add-child Ava as a
            at 1 partition r1,r3 | r0,r2
            at 2 partition r1 | r0,r2,r3
            at 3 sync r1 r3
            at 4 r0 revoke r3
            at 5 r0 revoke r1
            at 6 r3 give @a 1
            expect attention r3
            expect attention r1
            """)
        let t = s.removingReplica(1)
        #expect(t.replicas == 3)
        #expect(t.steps.map(\.action) == [.addChild("Ava", label: "a"), .partition([2]), .revoke(2), .post(child: "@a", cents: 100, note: "")])
        #expect(t.steps.last?.replica == 2)
        #expect(t.expectations.map(\.check) == [.attention(2, true)])
    }

    @Test("unknown planted bugs are a usage error")
    func unknownPlantedBug() {
        let (code, output) = ScenarioTests.run(["seed", "1", "--plant-bug", "nonsense"])
        #expect(code == 64)
        #expect(output.first?.contains("cross-replica-undo") == true)
    }
}

/// The scenario format's new directives, and writing scenarios back as text.
@Suite("Scenario text")
struct ScenarioTextTests {
    @Test("percentages are exact, with one decimal at most")
    func percentages() {
        #expect(Scenario.perMille("2.5") == 25 && Scenario.perMille("0.3") == 3 && Scenario.perMille("100") == 1000)
        #expect(Scenario.perMille("7%") == 70 && Scenario.perMille("0") == 0)
        #expect(Scenario.perMille("100.1") == nil && Scenario.perMille("1.25") == nil && Scenario.perMille("-1") == nil && Scenario.perMille("x") == nil)
    }

    @Test("every shipped scenario reads back from its own text")
    func roundTripShipped() throws {
        for file in ScenarioTests.files {
            let text = try #require(SimulatorCLI.readFile("\(ScenarioTests.directory)/\(file)"))
            let s = try Scenario.parse(text)
            let again = try Scenario.parse(s.text())
            #expect(again.text() == s.text(), "\(file)")
            #expect(again.steps.map(\.action) == s.steps.map(\.action) && again.steps.map(\.at) == s.steps.map(\.at), "\(file)")
            #expect(again.expectations.map(\.check) == s.expectations.map(\.check), "\(file)")
        }
    }

    @Test("a recorded seed's event list reads back from its text", arguments: [20 as UInt64, 1010])
    func roundTripEventList(seed: UInt64) throws {
        let result = SimulatorCLI.runSeed(seed, record: true, adjust: seed > 1000 ? SimulatorCLI.forceMembership : { _ in })
        let events = Scenario.eventList(result)
        #expect(events.steps.count > 20)
        let again = try Scenario.parse(events.text())
        #expect(again.steps.map(\.action) == events.steps.map(\.action))
        #expect(again.steps.map(\.at) == events.steps.map(\.at))
        #expect((again.replicas, again.seed, again.gossipMillis, again.lineTopology) ==
                (events.replicas, events.seed, events.gossipMillis, events.lineTopology))
        // Every kind of drawn event the run had is in the list.
        let text = events.text()
        if result.faults["crash", default: 0] > 0 { #expect(text.contains(" crash")) }
        if result.faults["partition", default: 0] > 0 { #expect(text.contains("partition ")) }
        if result.faults["staleRestore", default: 0] > 0 { #expect(text.contains("restart stale")) }
        if result.faults["revocation", default: 0] > 0 { #expect(text.contains(" revoke ")) }
        if result.faults["accountChange", default: 0] > 0 { #expect(text.contains("account-switch")) }
        if result.parameters.lossPerMille > 0 { #expect(text.contains("at 0 loss ")) }
        #expect(text.contains(" as c1"))
    }

    @Test("new directives: settings, labels, file copies and stale restarts")
    func newDirectives() throws {
        let result = try SimulatorCLI.runScenario(text: """
            replicas 2
            gossip 5000
            topology line
            at 0    duplicate 2.5
            at 0    reorder 1
            at 0    r0 add-child Ava as first
            at 0    r0 add-child Ben as second
            at 5    sync r0 r1
            at 300  r1 give @second 1.00 note "kept"
            at 310  sync r1 r0
            at 600  r0 copy-files
            at 601  r0 give @first 2.00 note "lost"
            at 602  r0 crash
            at 603  r0 restart stale
            expect converged
            expect absent lost
            expect present kept
            expect transaction-count 1
            """).get()
        #expect(result.passed, "\(result.timeline.joined(separator: "\n"))\n\(result.simulation.failures)")
        #expect(result.timeline.contains { $0.contains("r0 restart stale  → up from the copy of its files") }, "\(result.timeline)")
        // A label no step defines is a parse error now (issue 21), not a refusal at run time.
        #expect(throws: Scenario.ParseError.self) { try Scenario.parse("replicas 2\nat 700 r1 give @nobody 1.00\n") }
        #expect(result.simulation.parameters.gossipIntervalMillis == 5000 && result.simulation.parameters.lineTopology)
    }
}

import KidLedgerSimulation
import Testing

/// The simulated relay (issue 44; docs/SIMULATOR.md, "Relays"): the real relay store and sessions
/// over the simulated network, honest or hostile.
@Suite("Relay in the simulator")
struct RelaySimulationTests {
    /// Two parents who never meet directly, through a relay in `mode` from 2 s to 8 s.
    static func separated(mode: String) -> String {
        """
        replicas 3
        relay
        at 0     r0 add-child Ava
        at 10    sync all
        at 20    r0 add-relay
        at 30    sync all
        at 1s    sync all
        at 1100  isolate r0 r1
        at 2s    relay \(mode)
        at 2100  r0 give Ava 2.00 note "from r0"
        at 3s    r1 give Ava 1.00 note "from r1"
        at 4s    r2 give Ava 0.50 note "from r2"
        at 5s    r0 give Ava 0.25 note "again r0"
        at 8s    relay honest
        expect converged
        expect present "from r0" on r1
        expect present "from r1" on r0
        expect balance Ava 3.75
        """
    }

    @Test("scenario 15 (separated parents) with a relay converges, the parents meeting only through it")
    func scenarioFifteen() throws {
        let text = try String(contentsOfFile: "\(ScenarioTests.directory)/15-separated-parents.scenario", encoding: .utf8)
        #expect(text.contains("\nrelay\n") && text.contains("isolate r0 r1"))
        let result = Simulator.runScenario(try Scenario.parse(text), keepTrace: true)
        #expect(result.passed, "\(result.outcomes.filter { !$0.passed }) \(result.simulation.failures)")
        #expect(result.simulation.faults["relay.session", default: 0] > 0)
        #expect(result.simulation.trace.contains { $0.contains("installed") })
    }

    @Test("each hostile mode delays but never diverges (fixed seed)",
          arguments: ["drop", "delay", "replay", "reorder", "withhold r1", "stale", "crash", "wipe"])
    func hostileMode(mode: String) throws {
        var text = Self.separated(mode: mode)
        if mode == "crash" { text = text.replacingOccurrences(of: "at 8s    relay honest", with: "at 8s    relay restart") }
        let result = Simulator.runScenario(try Scenario.parse(text), seed: 7)
        #expect(result.passed, "\(mode): \(result.outcomes.filter { !$0.passed }) \(result.simulation.failures)")
        let key = mode.hasPrefix("withhold") ? "relay.withhold" : "relay.\(mode)"
        #expect(result.simulation.faults[key, default: 0] == 1, "\(result.simulation.faults)")
    }

    @Test("same seed, same trace with a relay (scenario and --relays seed)")
    func deterministic() throws {
        let scenario = try Scenario.parse(Self.separated(mode: "reorder"))
        let a = Simulator.runScenario(scenario, seed: 3, keepTrace: true), b = Simulator.runScenario(scenario, seed: 3, keepTrace: true)
        #expect(a.simulation.traceHash == b.simulation.traceHash)
        #expect(a.simulation.trace == b.simulation.trace)
        let s1 = SimulatorCLI.runSeed(11, adjust: { $0.addRelay() }), s2 = SimulatorCLI.runSeed(11, adjust: { $0.addRelay() })
        #expect(s1.passed, "\(s1.failures)")
        #expect(s1.traceHash == s2.traceHash)
        #expect(s1.faults["relay.session", default: 0] > 0)
    }

    @Test("a run without a relay draws nothing for one: --relays off keeps the seed's trace")
    func withoutRelayUnchanged() {
        let plain = SimulatorCLI.runSeed(5), relayed = SimulatorCLI.runSeed(5, adjust: { $0.addRelay() })
        #expect(plain.faults.keys.allSatisfy { !$0.hasPrefix("relay.") })
        #expect(plain.parameters.relays == false && relayed.parameters.relays)
        #expect(plain.traceHash != relayed.traceHash)
    }

    @Test("the scenario language: relay steps need a relay line, and misspellings are suggested")
    func language() {
        #expect(throws: Scenario.ParseError.self) { try Scenario.parse("replicas 2\nat 0 relay drop\n") }
        do {
            _ = try Scenario.parse("replicas 2\nrelay\nat 0 relay withold r1\n")
            Issue.record("parsed a misspelt relay step")
        } catch {
            #expect(error.message.contains("did you mean withhold?"), "\(error)")
        }
        do {
            _ = try Scenario.parse("replicas 2\nrelay\nat 0 isolat r0 r1\n")
            Issue.record("parsed a misspelt isolate")
        } catch {
            #expect(error.message.contains("did you mean isolate?"), "\(error)")
        }
        let s = try? Scenario.parse("replicas 2\nrelay\nat 0 r0 add-relay\nat 1 isolate r0 r1\nat 2 relay withhold r1\nexpect converged\n")
        #expect(s?.hasRelay == true)
        let back = s.flatMap { try? Scenario.parse($0.text()) }
        #expect(back?.hasRelay == true && back?.steps.map(\.action) == s?.steps.map(\.action), "the text form reads back")
    }
}

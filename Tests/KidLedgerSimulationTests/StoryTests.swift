#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerTestSupport
import Testing
@testable import KidLedgerSimulation

/// The simulator as the people who write scenarios read it (issue 21, point 8): quiet timelines, labels in expectations, a readable diagram, reproduction lines as the
/// user ran the command, readable amounts and ids in traces, empty files refused.
@Suite("Simulator reads like a story")
struct StoryTests {
    static let story = """
    replicas 3
    at 0 r0 add-child Ava as kid
    at 0 sync all
    at 2000 r1 give @kid 1.26 note "later"
    at 4000 r2 give @kid 1.00
    expect converged
    expect balance @kid 2.26
    """

    static let noOpSessions = """
    replicas 3
    gossip 50
    at 0 r0 add-child Ava
    at 0 sync all
    at 100 partition r0 | r1 r2
    at 200 r0 give Ava 1.00
    at 5000 heal
    expect converged
    """

    @Test("the timeline hides sessions that moved nothing unless --verbose")
    func quietTimeline() throws {
        let quiet = try SimulatorCLI.runScenario(text: Self.noOpSessions).get()
        let verbose = try SimulatorCLI.runScenario(text: Self.noOpSessions, verbose: true).get()
        #expect(quiet.passed && verbose.passed)
        let noOp = { (line: String) in line.contains("finished: sent 0 applied 0 upToDate=true") }
        #expect(!quiet.timeline.contains(where: noOp))
        #expect(verbose.timeline.filter(noOp).count > 10, "\(verbose.timeline.joined(separator: "\n"))")
        // The sessions that moved something are in both.
        let moved = { (line: String) in line.contains("finished:") && !noOp(line) }
        #expect(quiet.timeline.filter(moved) == verbose.timeline.filter(moved))
        #expect(!quiet.timeline.filter(moved).isEmpty)
        // Same run either way: the flag only filters what is printed.
        #expect(quiet.simulation.traceHash == verbose.simulation.traceHash)

        let dir = KidLedgerTestSupport.TemporaryDirectory(prefix: "kidledger-story-test")
        let path = ScenarioTests.write(Self.noOpSessions, name: "noop", in: dir)
        let plain = ScenarioTests.run(["run", path]), loud = ScenarioTests.run(["run", path, "--verbose"])
        #expect(plain.code == 0 && loud.code == 0)
        #expect(!plain.output.contains(where: noOp) && loud.output.contains(where: noOp))
        let help = ScenarioTests.run(["--help"])
        #expect(help.code == 0 && help.output.joined().contains("[--verbose]") && help.output.joined().contains("--verbose also shows"))
        #expect(ScenarioTests.run(["run", "--help"]).output.joined().contains("--verbose"))
    }

    @Test("expectations accept @LABEL; an undefined label is a parse error")
    func labelsInExpectations() throws {
        let text = """
        replicas 2
        at 0 r0 add-child Ava as kid
        at 0 r0 add-child Bo as twin
        at 10 r0 rename @kid Bea
        at 2000 r1 give @kid 2.00
        at 2000 r1 archive @twin
        expect balance @kid 2.00
        expect balance @twin 0
        expect child @twin archived true
        expect child @kid archived false
        expect balance @kid 2.00 on r1
        """
        let result = try SimulatorCLI.runScenario(text: text).get()
        #expect(result.passed, "\(result.outcomes.filter { !$0.passed }.map(\.detail))")
        #expect(result.outcomes.count == 5)
        // A wrong expectation on a label fails with what was found.
        let wrong = try SimulatorCLI.runScenario(text: "replicas 1\nat 0 r0 add-child Ava as kid\nexpect balance @kid 1.00\n").get()
        #expect(!wrong.passed && wrong.outcomes[0].detail.contains("balance $0.00"))

        func parseError(_ text: String) -> Scenario.ParseError? {
            do { _ = try Scenario.parse(text); return nil } catch { return error }
        }
        let undefinedInExpect = parseError("replicas 1\nat 0 r0 add-child Ava as kid\nexpect balance @kiddo 1.00\n")
        #expect(undefinedInExpect?.line == 3 && undefinedInExpect?.message.contains("undefined label @kiddo") == true)
        let undefinedOnReplica = parseError("replicas 2\nat 0 r0 add-child Ava as kid\nexpect balance @nope 0 on r1\n")
        #expect(undefinedOnReplica?.line == 3)
        let undefinedInStep = parseError("replicas 1\nat 0 r0 give @kid 1.00\nat 5 r0 add-child Ava as kid\n")
        #expect(undefinedInStep?.line == 2 && undefinedInStep?.message.contains("undefined label @kid") == true)
        #expect(parseError("replicas 1\nat 0 r0 add-child Ava\nat 5 r0 archive @Ava\n")?.line == 3)
    }

    @Test("an empty scenario file is an error")
    func emptyScenario() throws {
        for text in ["", "\n\n", "# just a comment\n", "replicas 2\nseed 3\n"] {
            #expect(throws: Scenario.ParseError.self) { try Scenario.parse(text) }
        }
        let dir = KidLedgerTestSupport.TemporaryDirectory(prefix: "kidledger-story-test")
        let (code, output) = ScenarioTests.run(["run", ScenarioTests.write("", name: "empty", in: dir)])
        #expect(code == 65)
        #expect(output.joined().contains("the scenario is empty"), "\(output)")
    }

    @Test("the diagram labels each mark and session and shows time in human units")
    func readableDiagram() throws {
        #expect(SpaceTimeDiagram.duration(250) == "250 ms")
        #expect(SpaceTimeDiagram.duration(1_500) == "1.5 s")
        #expect(SpaceTimeDiagram.duration(150_000) == "2 min 30 s")
        #expect(SpaceTimeDiagram.duration(7_500_000) == "2 h 5 min")
        #expect(SpaceTimeDiagram.duration(3 * 86_400_000) == "3 d")
        #expect(SpaceTimeDiagram.duration(86_400_000 + 4 * 3_600_000) == "1 d 4 h")

        let result = try SimulatorCLI.runScenario(text: Self.story, record: true).get()
        let log = try #require(result.simulation.diagram)
        let svg = SpaceTimeDiagram.svg(log, title: "a story")
        #expect(DiagramTests.parse(svg).ok)
        // Every mark carries a tooltip; operations say what the step was and what it did.
        let marks = svg.components(separatedBy: "<g class=\"mark\"><title>").count - 1
        #expect(marks == log.points.count && marks >= 3, "\(marks) marks for \(log.points.count) points")
        #expect(svg.contains("r1 at 2 s: r1 give @kid 1.26 note later → Ava balance $1.26"), "\(svg)")
        // Arrows name their session; the session is labelled on the diagram.
        #expect(svg.contains("<title>c0 r"))
        #expect(svg.contains("class=\"session-label\""))
        // The axis in human units (seconds here), and a long run's ticks in days.
        #expect(svg.contains(">2 s</text>") && !svg.contains("000 ms"))
        #expect(SpaceTimeDiagram.tickStep(14 * 86_400_000) == 2 * 86_400_000)
        #expect(SpaceTimeDiagram.timeLabel(7 * 86_400_000, 86_400_000) == "7 d")
    }

    @Test("reproduction lines name the command as the user ran it")
    func reproductionNamesTheCommand() {
        let dir = KidLedgerTestSupport.TemporaryDirectory(prefix: "kidledger-story-test")
        let path = ScenarioTests.write("replicas 2\nat 0 r0 add-child Ava\nexpect balance Ava 5.00\n", name: "wrong", in: dir)
        for program in [".build/release/kidledger-sim", "/usr/local/bin/kidledger-sim", "swift run kidledger-sim"] {
            var lines: [String] = []
            let code = SimulatorCLI.run(arguments: ["run", path], program: program, output: { lines.append($0) })
            #expect(code == 1)
            #expect(lines.contains("reproduce: \(program) run \(path) --seed 1 --trace /tmp/kidledger-scenario.trace"), "\(lines)")
        }
        var lines: [String] = []
        _ = SimulatorCLI.run(arguments: ["seed", "7", "--plant-bug", "cross-replica-undo"], program: "./kidledger-sim", output: { lines.append($0) })
        #expect(lines.contains { $0.hasPrefix("reproduce: ./kidledger-sim seed 7 ") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("shrink:    ./kidledger-sim shrink --seed 7 ") })
    }

    @Test("shrink creates its output folder, or names why it cannot write")
    func shrinkOutputFolder() throws {
        let dir = KidLedgerTestSupport.TemporaryDirectory(prefix: "kidledger-story-test")
        let out = dir.sub("new/deeper/shrunk.scenario")
        let made = ScenarioTests.run(["shrink", "--seed", "7", "--plant-bug", "cross-replica-undo", "--max-runs", "3", "--out", out])
        #expect(made.code == 0, "\(made.output)")
        #expect(SimulatorCLI.readFile(out)?.contains("replicas") == true)

        let file = ScenarioTests.write("replicas 1\nexpect converged\n", name: "a-file", in: dir)
        let blocked = ScenarioTests.run(["shrink", "--seed", "7", "--plant-bug", "cross-replica-undo", "--max-runs", "3",
                                         "--out", "\(file)/shrunk.scenario"])
        #expect(blocked.code == 73)
        #expect(blocked.output.contains { $0.hasPrefix("kidledger-sim: cannot create the folder \(file)") && $0.count > "kidledger-sim: cannot create the folder \(file) for \(file)/shrunk.scenario: ".count },
                "\(blocked.output)")
    }

    @Test("traces show amounts like the timeline and transaction ids by their random tail")
    func readableTraces() throws {
        let result = Simulator(parameters: SimulationParameters.draw(seed: 3), keepTrace: true).run()
        let posts = result.trace.filter { $0.contains(" give $") || $0.contains(" take $") }
        #expect(!posts.isEmpty, "\(result.trace.prefix(40))")
        // No amount in bare cents (`give 126`): after give/take comes a `$`.
        let bare = result.trace.filter { line in
            let words = line.split(separator: " ")
            return zip(words, words.dropFirst()).contains { ($0 == "give" || $0 == "take") && $1.first?.isNumber == true }
        }
        #expect(bare.isEmpty, "\(bare.prefix(3))")
        let scenario = try SimulatorCLI.runScenario(text: "replicas 1\nat 0 r0 add-child Ava\nat 0 r0 give Ava 1.26\nexpect balance Ava 1.26\n").get()
        let line = try #require(scenario.timeline.first { $0.contains("give Ava") })
        #expect(line.contains("Ava balance $1.26 ("), "\(line)")
        let id = RecordID(high: 0x0123_4567_89AB_CDEF, low: 0x0011_2233_4455_6677)
        #expect(id.tail == String(id.hex.suffix(8)) && id.tail == "44556677")
        #expect(RecordID(high: 0, low: 5).tail == "00000005")
    }
}

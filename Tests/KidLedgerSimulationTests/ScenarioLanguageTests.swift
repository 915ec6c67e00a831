import KidLedgerDomain
import KidLedgerTestSupport
import Testing
@testable import KidLedgerSimulation

/// The simulator in its users' words (issue 42, point 6): durations in scenario files, times of
/// the run in the timeline, "did you mean", `undo @LABEL`, unknown options named, failures naming
/// transactions by the timeline's short id.
@Suite("Simulator speaks its users' language")
struct ScenarioLanguageTests {
    static func parseError(_ text: String) -> Scenario.ParseError? {
        do { _ = try Scenario.parse(text); return nil } catch { return error }
    }

    @Test("`at` takes milliseconds or a duration: 1d, 2h30m, 90s, 1m30s, 250ms")
    func durations() throws {
        let cases: [(String, Int64)] = [("0", 0), ("1500", 1_500), ("250ms", 250), ("90s", 90_000), ("1m30s", 90_000),
                                        ("2h30m", 9_000_000), ("1d", 86_400_000), ("1d14h30m", 138_600_000), ("1s500ms", 1_500),
                                        ("3d4h5m6s7ms", 3 * 86_400_000 + 4 * 3_600_000 + 5 * 60_000 + 6_007)]
        for (word, millis) in cases {
            #expect(Scenario.time(word) == millis, "\(word)")
            #expect(Scenario.time(Scenario.durationText(millis)) == millis, "\(word)")
        }
        #expect(Scenario.durationText(138_600_000) == "1d14h30m" && Scenario.durationText(250) == "250ms" && Scenario.durationText(0) == "0")
        for bad in ["2x", "30m2h", "1h1h", "h", "-5", "1.5h", "5 s", "s5", "1d2", "999999999999d", "367d", "1ms1s", ""] {
            #expect(Scenario.time(bad) == nil, "\(bad)")
        }
        let s = try Scenario.parse("replicas 2\nat 0 r0 add-child Ava\nat 1500 r0 give Ava 1.00\nat 2h30m sync all\nat 1d heal\n")
        #expect(s.steps.map(\.at) == [0, 1_500, 9_000_000, 86_400_000])
        // A bad duration names its line and says what a time is.
        let error = try #require(Self.parseError("replicas 2\nat 0 r0 add-child Ava\nat 2x r0 undo\n"))
        #expect(error.line == 3 && error.message.contains("bad time \"2x\"") && error.message.contains("2h30m"), "\(error)")
        let order = try #require(Self.parseError("replicas 2\nat 1h r0 add-child Ava\nat 30m r0 undo\n"))
        #expect(order.line == 3 && order.message.contains("time order (30m < 1h)"), "\(order)")
        // Written back (the shrinker's output) in the largest units that fit, and read back the same.
        let text = try Scenario.parse("replicas 2\nat 0 r0 add-child Ava\nat 90500 r0 give Ava 1.00\n").text()
        #expect(text.contains("at 1m30s500ms r0 give Ava 1.00"), "\(text)")
        #expect(try Scenario.parse(text).steps.map(\.at) == [0, 90_500])
    }

    @Test("the timeline shows times of the run: day 2 14:30; --millis shows t=MILLIS as the trace does")
    func timelineTimes() throws {
        #expect(Scenario.clockText(0) == "day 1 00:00")
        #expect(Scenario.clockText(310) == "day 1 00:00:00.310")
        #expect(Scenario.clockText(90_000) == "day 1 00:01:30")
        #expect(Scenario.clockText(138_600_000) == "day 2 14:30")
        #expect(Scenario.clockText(7 * 86_400_000 + 5) == "day 8 00:00:00.005")
        #expect(Scenario.readable("t=138600000 r0 undo  → x") == "day 2 14:30 r0 undo  → x")
        #expect(Scenario.readable("no time here") == "no time here")

        let text = "replicas 2\nat 0 r0 add-child Ava\nat 1d14h30m r1 give Ava 1.00\nexpect balance Ava 1.00\n"
        let result = try SimulatorCLI.runScenario(text: text).get()
        #expect(result.passed)
        #expect(result.timeline.contains { $0.hasPrefix("t=138600000 r1 give Ava 1.00") }, "\(result.timeline)")
        #expect(result.readableTimeline.contains { $0.hasPrefix("day 2 14:30 r1 give Ava 1.00") }, "\(result.readableTimeline)")
        // Only the times differ: the same lines after them.
        func rest(_ line: String, after words: Int) -> String {
            line.split(separator: " ", maxSplits: words, omittingEmptySubsequences: false).last.map(String.init) ?? ""
        }
        #expect(result.readableTimeline.allSatisfy { $0.hasPrefix("day ") })
        #expect(result.timeline.map { rest($0, after: 1) } == result.readableTimeline.map { rest($0, after: 3) })

        let dir = KidLedgerTestSupport.TemporaryDirectory(prefix: "kidledger-language-test")
        defer { dir.remove() }
        let path = ScenarioTests.write(text, name: "days", in: dir)
        let plain = ScenarioTests.run(["run", path]), millis = ScenarioTests.run(["run", path, "--millis"])
        #expect(plain.code == 0 && millis.code == 0)
        #expect(plain.output.contains { $0.hasPrefix("day 2 14:30 r1 give Ava 1.00") }, "\(plain.output)")
        #expect(plain.output.contains { $0.hasPrefix("quiet at day 2 14:30:") }, "\(plain.output)")
        #expect(millis.output.contains { $0.hasPrefix("t=138600000 r1 give Ava 1.00") }, "\(millis.output)")
        #expect(millis.output.contains { $0.hasPrefix("quiet at t=") } && !millis.output.contains { $0.hasPrefix("day ") })
        #expect(plain.output.count == millis.output.count)
    }

    @Test("a misspelt directive, operation, network step or expectation gets \"did you mean\"", arguments: [
        ("replicas 2\nexpcet converged\n", 2, "unknown directive \"expcet\" (did you mean expect?"),
        ("replicas 2\nat 0 r0 giv Ava 1.00\n", 2, "unknown operation \"giv\" (did you mean give?)"),
        ("replicas 2\nat 0 r0 add-chlid Ava\n", 2, "unknown operation \"add-chlid\" (did you mean add-child?)"),
        ("replicas 2\nat 0 r0 undoo\n", 2, "(did you mean undo?)"),
        ("replicas 2\nat 0 snyc all\n", 2, "or a network step, got \"snyc\" (did you mean sync?)"),
        ("replicas 2\nat 0 partiton r0 | r1\n", 2, "(did you mean partition?)"),
        ("replicas 2\nexpect balanse Ava 1.00\n", 2, "unknown expectation \"balanse\" (did you mean balance?)"),
        ("replicas 2\nexpect convergd\n", 2, "(did you mean converged?)"),
        ("replicas 2\nexpect transaction-cout 2 on r1\n", 2, "(did you mean transaction-count?)"),
    ])
    func didYouMean(text: String, line: Int, message: String) throws {
        let error = try #require(Self.parseError(text))
        #expect(error.line == line && error.message.contains(message), "\(error)")
    }

    @Test("nothing near: no suggestion")
    func noSuggestion() throws {
        let error = try #require(Self.parseError("replicas 2\nat 0 r0 fly-to-the-moon\n"))
        #expect(error.message == "unknown operation \"fly-to-the-moon\"")
    }

    static let labelled = """
    replicas 2
    at 0 r0 add-child Ava
    at 0 r0 add-child Bo
    at 10 r0 give Ava 5.00 note "pocket money" as pocket
    at 20 r0 give Ava 2.00 note "chores"
    at 40 sync all
    at 500 r1 give-all 1.00 as weekly
    at 600 sync all
    at 1s r1 undo @pocket
    at 1s100ms r0 undo @weekly
    expect converged
    expect balance Ava 2.00
    expect balance Bo 0
    expect transaction-count 7
    expect present "undo pocket money"
    """

    @Test("`undo @LABEL` undoes the transaction an earlier step labelled `as LABEL`, not the newest")
    func undoLabelled() throws {
        let s = try Scenario.parse(Self.labelled)
        #expect(s.steps[2].label == "pocket" && s.steps[2].action == .post(child: "Ava", cents: 500, note: "pocket money"))
        #expect(s.steps[5].label == "weekly" && s.steps[7].action == .undoLabelled("pocket") && s.steps[8].action == .undoLabelled("weekly"))
        // Written back with its labels, and read back the same.
        let text = s.text()
        #expect(text.contains("at 10ms r0 give Ava 5.00 note \"pocket money\" as pocket") && text.contains("at 1s r1 undo @pocket"), "\(text)")
        func meaning(_ steps: [Scenario.Step]) -> [String] { steps.map { "\($0.at) \($0.replica ?? -1) \($0.action) \($0.label ?? "-")" } }
        #expect(meaning(try Scenario.parse(text).steps) == meaning(s.steps))

        let result = try SimulatorCLI.runScenario(text: Self.labelled).get()
        #expect(result.passed, "\(result.outcomes.filter { !$0.passed }.map(\.detail)) \(result.simulation.failures)\n\(result.timeline.joined(separator: "\n"))")
        // The undo names the labelled give by the id its own line showed, not the newer chores.
        let give = try #require(result.timeline.first { $0.contains("give Ava 5.00") })
        let id = try #require(give.split(separator: "(").last?.prefix(8))
        let undo = try #require(result.timeline.first { $0.contains("r1 undo @pocket") })
        #expect(undo.contains("undid \(id) ($5.00); Ava balance"), "\(undo)")
        // A give-all's label undoes its whole batch in one change.
        let batch = try #require(result.timeline.first { $0.contains("r0 undo @weekly") })
        #expect(batch.contains("undid") && batch.contains("Ava balance") && batch.contains("Bo balance $0.00"), "\(batch)")
    }

    @Test("`undo @LABEL` on a replica that does not hold it yet, or of a refused step, is refused in the timeline")
    func undoLabelledRefused() throws {
        let text = """
        replicas 2
        at 0 r0 add-child Ava
        at 0 partition r0 | r1
        at 10 r0 give Ava 5.00 as pocket
        at 20 r1 undo @pocket
        at 30 r0 give Nobody 1.00 as nothing
        at 40 r0 undo @nothing
        expect balance Ava 5.00 on r0
        """
        let result = try SimulatorCLI.runScenario(text: text).get()
        #expect(result.passed, "\(result.timeline.joined(separator: "\n"))")
        let notHeld = try #require(result.timeline.first { $0.contains("r1 undo @pocket") })
        #expect(notHeld.contains("refused: can't undo: r1 does not hold @pocket ("), "\(notHeld)")
        let refused = try #require(result.timeline.first { $0.contains("r0 undo @nothing") })
        #expect(refused.contains("refused: can't undo: @nothing made no transaction"), "\(refused)")
    }

    @Test("a bad operation label is a parse error naming its line", arguments: [
        ("replicas 2\nat 0 r0 add-child Ava\nat 5 r0 undo @pocket\n", 3, "undefined label @pocket (label an earlier operation"),
        ("replicas 2\nat 0 r0 add-child Ava as kid\nat 5 r0 undo @kid\n", 3, "@kid labels a child, not an operation"),
        ("replicas 2\nat 0 r0 add-child Ava\nat 5 r0 give Ava 1.00 as x\nat 6 r0 give @x 1.00\n", 4, "@x labels an operation, not a child"),
        ("replicas 2\nat 0 r0 add-child Ava as x\nat 5 r0 give Ava 1.00 as x\n", 3, "label x is already defined"),
        ("replicas 2\nat 0 r0 add-child Ava\nat 5 r0 give Ava 1.00 as @x\n", 3, "a label is a word without @"),
        ("replicas 2\nat 0 r0 add-child Ava\nat 5 r0 give Ava 1.00\nat 6 r0 give Ava 1.00 as p\nat 5 r0 undo @p\n", 5, "time order"),
    ])
    func badLabels(text: String, line: Int, message: String) throws {
        let error = try #require(Self.parseError(text))
        #expect(error.line == line && error.message.contains(message), "\(error)")
    }

    @Test("an unknown option or command is named, with usage and exit 64")
    func unknownOptions() {
        let bogus = ScenarioTests.run(["--bogus"])
        #expect(bogus.code == 64)
        #expect(bogus.output.first?.hasPrefix("kidledger-sim: unknown option --bogus") == true, "\(bogus.output)")
        #expect(bogus.output.joined().contains("usage: kidledger-sim"))
        let seed = ScenarioTests.run(["seed", "3", "--bogus"])
        #expect(seed.code == 64 && seed.output.first == "kidledger-sim: unknown option --bogus for seed", "\(seed.output)")
        let typo = ScenarioTests.run(["run", "x.scenario", "--seeed", "3"])
        #expect(typo.code == 64 && typo.output.first == "kidledger-sim: unknown option --seeed for run (did you mean --seed?)", "\(typo.output)")
        let fuzz = ScenarioTests.run(["fuzz", "--seeds", "1", "--no-rerunn"])
        #expect(fuzz.code == 64 && fuzz.output.first == "kidledger-sim: unknown option --no-rerunn for fuzz (did you mean --no-rerun?)")
        let shrink = ScenarioTests.run(["shrink", "--seed", "1", "--outt", "f"])
        #expect(shrink.code == 64 && shrink.output.first == "kidledger-sim: unknown option --outt for shrink (did you mean --out?)")
        let missing = ScenarioTests.run(["run", "x.scenario", "--seed"])
        #expect(missing.code == 64 && missing.output.first == "kidledger-sim: --seed needs a value", "\(missing.output)")
        let command = ScenarioTests.run(["sed", "3"])
        #expect(command.code == 64 && command.output.first == "kidledger-sim: unknown command sed (did you mean seed?)", "\(command.output)")
        // A negative number is a value, not an option; an option another command takes is still unknown here.
        #expect(SimulatorCLI.optionProblem("run", ["f", "--seed", "-1"]) == nil)
        #expect(SimulatorCLI.optionProblem("run", ["f", "--lmdb"]) == "unknown option --lmdb for run")
    }

    @Test("the guide's first example (docs/SIMULATOR.md, \"Scenarios\") runs and holds")
    func guideExample() throws {
        let docs = ScenarioTests.directory.replacingOccurrences(of: "/Simulations", with: "/docs/SIMULATOR.md")
        let guide = try #require(SimulatorCLI.readFile(docs))
        let section = try #require(guide.range(of: "\n## Scenarios\n"))
        let blocks = guide[section.upperBound...].components(separatedBy: "```")
        #expect(blocks.count > 2)
        let example = blocks[1]
        #expect(example.contains("at 2h30m  r0 undo @mom"))
        let result = try SimulatorCLI.runScenario(text: example).get()
        #expect(result.passed, "\(result.outcomes.filter { !$0.passed }.map(\.detail))\n\(result.readableTimeline.joined(separator: "\n"))")
        #expect(result.readableTimeline.contains { $0.hasPrefix("day 1 02:30 r0 undo @mom  → undid ") }, "\(result.readableTimeline)")
    }

    @Test("a failure names a transaction by the short id the timeline and trace show")
    func failureNamesTheTimelinesId() throws {
        let text = """
        replicas 2
        at 0 r0 add-child Ava
        at 10 r0 give Ava 1.00
        at 20 sync all
        at 1s r1 undo
        """
        let scenario = try Scenario.parse(text)
        let result = Simulator.runScenario(scenario, keepTrace: true, plantedBug: .crossReplicaUndo)
        #expect(!result.passed)
        let failure = try #require(result.simulation.failures.first { $0.hasPrefix("planted bug") })
        let id = String(try #require(failure.split(separator: " ").first { $0.count == 8 && $0.allSatisfy(\.isHexDigit) }))
        #expect(failure == "planted bug cross-replica-undo: r1 undid transaction \(id) made on r0")
        #expect(result.timeline.contains { $0.contains("r0 give Ava 1.00") && $0.hasSuffix("(\(id))") }, "\(result.timeline)")
        #expect(result.timeline.contains { $0.contains("r1 undo") && $0.contains("undid \(id)") })
        // The fuzz trace names it the same way.
        let seed = SimulatorCLI.runSeed(7, keepTrace: true, plantedBug: .crossReplicaUndo)
        let seedFailure = try #require(seed.failures.first { $0.hasPrefix("planted bug") })
        let seedID = String(try #require(seedFailure.split(separator: " ").first { $0.count == 8 && $0.allSatisfy(\.isHexDigit) }))
        #expect(seed.trace.contains { $0.contains(" undo") && $0.contains("\(seedID) by ") }, "\(seedFailure)")
        // The shrinker takes any short id for a blank, digits or none.
        #expect(Shrinker.kind("r1 shows 1 of 2 transactions of the batch of transaction abcdefab")
                == Shrinker.kind("r0 shows 1 of 3 transactions of the batch of transaction 0a1b2c3d"))
    }
}

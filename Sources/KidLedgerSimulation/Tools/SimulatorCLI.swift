import Foundation
import Synchronization
import KidLedgerDomain

/// The `kidledger-sim` command line (the executable only adds a wall clock for rates).
public enum SimulatorCLI {
    static let usage = """
    usage: kidledger-sim seed N [--replicas A..B] [--lmdb] [--membership] [--hostile] [--relays] [--trace] [--svg OUT]
           kidledger-sim fuzz --seeds N [--start S] [--replicas A..B] [--lmdb-every K] [--jobs J] [--membership] [--hostile] [--relays] [--no-rerun]
           kidledger-sim run FILE [--seed N] [--trace OUT] [--svg OUT] [--verbose] [--millis]
           kidledger-sim shrink --seed N [--replicas A..B] [--lmdb] [--membership] [--hostile] [--relays] [--out FILE] [--max-runs K] [--svg OUT]

    seed   runs one seed: prints the drawn parameters, the checks' results and the trace hash
           (--trace prints the whole timeline). Exit 0 when every check holds, 1 otherwise.
    fuzz   runs seeds S, S+1, … S+N-1 (S defaults to 1), each twice to check determinism; every
           K-th seed (default 10; 0 for none) keeps its replicas in LMDB. Prints a summary and, for
           every failing seed, a one-line reproduction. Exit 0 when all pass, 1 otherwise.
           --no-rerun runs each seed once, without the determinism check (about 40% faster: for
           exploring many seeds, and for measuring the simulator's own speed; CI keeps the rerun).
    run    runs a hand-written scenario file (docs/SIMULATOR.md): prints its timeline and each
           expectation's result, at times of the run ("day 1 00:00:00.310", "day 2 14:30"; --millis:
           milliseconds from the start, "t=310", as the engine trace has them); --trace writes the
           whole engine trace to OUT; --verbose also shows sessions that moved nothing (hidden by
           default). Exit 0 when every
           expectation and engine check holds, 1 otherwise (with a reproduction line), 65 on a
           scenario syntax error (FILE:LINE: message).
    shrink turns a failing seed into an explicit scenario (every operation and fault it drew, at its
           virtual time), removes replicas and steps while the run still fails the same way (at most
           K runs, default 400), and writes the smallest as a scenario file (default
           Simulations/shrunk-seed-N.scenario). Exit 0 when written, or when the seed passes (nothing
           is written); 1 when the event list does not reproduce the failure; 73 when FILE can't be written.
    --svg OUT  writes the run as a space-time diagram (SVG): a lane per replica, deliveries as
           arrows, partitions shaded, crashes and restarts marked, the failing check in red.
    --hostile     makes one member replica (not the owner) hostile, with a strategy mix drawn from
                  the seed (docs/SIMULATOR.md, "Hostile member")
    --relays      gives the run a relay the owner adds at the start: pairs of replicas meet only
                  through it until the faults heal, and it turns hostile at drawn times
                  (docs/SIMULATOR.md, "Relays"); runs without it draw exactly as before
    --membership  forces revocations (both slots) and account changes (30 per mille) on, whatever
           the seed draws.
    --lmdb, --lmdb-every  keep replicas in LMDB files, in a temporary directory under $TMPDIR
           (default /tmp) that the run removes.
    """

    /// How reproduction lines name the simulator when the caller does not say (`swift run`).
    public static let defaultProgram = "swift run kidledger-sim"

    // long-function: one case per subcommand of kidledger-sim: a table.
    /// Runs the command line; `elapsedSeconds` reads a wall clock (injected by the executable, so
    /// nothing in the simulator itself reads one). `program` is the command as the user ran it
    /// (the executable's own path as invoked): reproduction lines start with it.
    public static func run(arguments: [String], program: String = defaultProgram, elapsedSeconds: () -> Double = { 0 },
                           output: (String) -> Void = { print($0) }) -> Int32 {
        var args = arguments
        guard let command = args.first else { output(usage); return 64 }
        args.removeFirst()
        if args.contains("--help") || args.contains("-h") || command == "--help" || command == "help" { output(usage); return 0 }
        if let problem = optionProblem(command, args) { output("kidledger-sim: \(problem)"); output(usage); return 64 }
        var replicas = 2...5
        if let r = value("--replicas", &args) {
            let parts = r.split(separator: ".", omittingEmptySubsequences: true).compactMap { Int($0) }
            guard parts.count == 2, parts[0] >= 2, parts[0] <= parts[1], parts[1] <= 16 else {
                output("kidledger-sim: --replicas takes A..B with 2 <= A <= B <= 16"); return 64
            }
            replicas = parts[0]...parts[1]
        }
        // For testing the shrinker only (docs/SIMULATOR.md); not in the usage text.
        var plantedBug: PlantedBug?
        if let name = value("--plant-bug", &args) {
            guard let bug = PlantedBug(rawValue: name) else {
                output("kidledger-sim: --plant-bug takes one of: \(PlantedBug.allCases.map(\.rawValue).joined(separator: ", "))"); return 64
            }
            plantedBug = bug
        }
        let svg = value("--svg", &args)
        switch command {
        case "run":
            return runScenarioCommand(args, program: program, svg: svg, plantedBug: plantedBug, output: output)
        case "shrink":
            return shrinkCommand(args, program: program, replicas: replicas, svg: svg, plantedBug: plantedBug, output: output)
        case "seed":
            let lmdb = flag("--lmdb", &args), trace = flag("--trace", &args), membership = flag("--membership", &args)
            let hostile = flag("--hostile", &args), relays = flag("--relays", &args)
            guard args.count == 1, let seed = UInt64(args[0]) else { output(usage); return 64 }
            let result = runSeed(seed, replicas: replicas, lmdb: lmdb, keepTrace: trace, record: svg != nil,
                                 plantedBug: plantedBug, adjust: adjustment(membership, hostile, relays))
            if trace { result.trace.forEach(output) } else { output("params \(result.parameters)") }
            output("events=\(result.events) virtualMillis=\(result.virtualMillis) trace=\(result.traceHash.prefix(16)) digest=\(result.digest.prefix(16))")
            for f in result.failures { output("FAILED: \(f)") }
            if let svg, let code = writeDiagram(result, to: svg, title: "kidledger-sim seed \(seed)", output: output) { return code }
            if !result.passed {
                output("reproduce: " + reproduction(program, seed, replicas, lmdb, membership, plantedBug, hostile: hostile, relays: relays))
                output("shrink:    " + shrinkLine(program, seed, replicas, lmdb, membership, plantedBug, hostile: hostile, relays: relays))
            }
            return result.passed ? 0 : 1
        case "fuzz":
            guard let n = value("--seeds", &args).flatMap({ Int($0) }), n > 0 else { output("kidledger-sim: fuzz needs --seeds N"); return 64 }
            let start = value("--start", &args).flatMap { UInt64($0) } ?? 1
            let every = value("--lmdb-every", &args).flatMap { Int($0) } ?? 10
            let membership = flag("--membership", &args)
            let hostile = flag("--hostile", &args), relays = flag("--relays", &args)
            let jobs = value("--jobs", &args).flatMap { Int($0) } ?? 1
            let rerun = !flag("--no-rerun", &args)
            guard jobs >= 1, jobs <= 64 else { output("kidledger-sim: --jobs takes 1 to 64"); return 64 }
            guard args.isEmpty else { output("kidledger-sim: unexpected \(args.joined(separator: " "))"); return 64 }
            let summary = fuzz(seeds: start..<(start + UInt64(n)), replicas: replicas, lmdbEvery: every, membership: membership,
                               hostile: hostile, relays: relays, jobs: jobs, rerun: rerun, program: program, output: output)
            let seconds = max(elapsedSeconds(), 1e-9)
            output("seeds=\(n) failures=\(summary.failed.count) events=\(summary.events) eventsPerSecond=\(Int(Double(summary.events) / seconds)) virtualToWall=\(Int(Double(summary.virtualMillis) / 1000 / seconds))x runsPerSeed=\(rerun ? 2 : 1)")
            output("faults injected: " + summary.faults.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
            // Swarm testing is only as good as what it injects: a kind never drawn is a failure.
            var kinds = ["loss", "duplication", "reorder", "partition", "crash", "staleRestore", "skew", "timeout"]
            if membership { kinds += ["revocation", "accountChange"] }
            // With a hostile member, every strategy must have been used (drawn and applied) too,
            // once the batch is large enough to draw them all (each is drawn at even chance).
            if hostile && n >= Self.hostileBatchMin { kinds += HostileStrategy.allCases.map(\.countKey) }
            // With relays, every relay mode and fault must have been drawn too.
            if relays && n >= Self.hostileBatchMin { kinds += Self.relayKinds }
            let missing = kinds.filter { summary.faults[$0, default: 0] == 0 }
            if !missing.isEmpty { output("FAILED: fault kinds never injected in this batch: \(missing.joined(separator: ", ")) (run more seeds)") }
            return summary.failed.isEmpty && missing.isEmpty ? 0 : 1
        default:
            output(usage)
            return 64
        }
    }

    /// The options each command takes, those that take a value first (`--plant-bug` is for
    /// testing the shrinker only, and not in the usage text).
    static let commandOptions: [String: (values: [String], flags: [String])] = [
        "seed": (["--replicas", "--svg", "--plant-bug"], ["--lmdb", "--membership", "--hostile", "--relays", "--trace"]),
        "fuzz": (["--seeds", "--start", "--replicas", "--lmdb-every", "--jobs", "--plant-bug"], ["--membership", "--hostile", "--relays", "--no-rerun"]),
        "run": (["--seed", "--trace", "--svg", "--plant-bug"], ["--verbose", "--millis"]),
        "shrink": (["--seed", "--replicas", "--out", "--max-runs", "--svg", "--plant-bug"], ["--lmdb", "--membership", "--hostile", "--relays"]),
    ]

    /// What is wrong with the command word or the options of `args`, if anything: an unknown
    /// command or option (named, with the nearest known one), or an option missing its value.
    static func optionProblem(_ command: String, _ args: [String]) -> String? {
        guard let options = commandOptions[command] else {
            let commands = commandOptions.keys.sorted()
            let near = Suggestions.nearest(command, in: command.hasPrefix("-") ? [] : commands).map { " (did you mean \($0)?)" } ?? ""
            return command.hasPrefix("-") ? "unknown option \(command) (a command comes first: \(commands.joined(separator: ", ")))"
                : "unknown command \(command)\(near)"
        }
        var i = 0
        while i < args.count {
            let arg = args[i]
            i += 1
            if options.values.contains(arg) {
                guard i < args.count else { return "\(arg) needs a value" }
                i += 1
            } else if arg.hasPrefix("-"), arg.count > 1, Int(arg) == nil, !options.flags.contains(arg) {
                let near = Suggestions.nearest(arg, in: options.values + options.flags).map { " (did you mean \($0)?)" } ?? ""
                return "unknown option \(arg) for \(command)\(near)"
            }
        }
        return nil
    }

    /// Forces revocations (both slots fire) and account changes on.
    public static func forceMembership(_ parameters: inout SimulationParameters) {
        parameters.revocationPerMille = 1000
        parameters.accountChangePerMille = 30
    }

    static func adjustment(_ membership: Bool, _ hostile: Bool = false, _ relays: Bool = false) -> (inout SimulationParameters) -> Void {
        guard relays else { return adjustment(membership, hostile) }
        let inner = adjustment(membership, hostile)
        return { inner(&$0); $0.addRelay() }
    }

    static func adjustment(_ membership: Bool, _ hostile: Bool) -> (inout SimulationParameters) -> Void {
        switch (membership, hostile) {
        case (true, true): return { forceMembership(&$0); $0.makeHostile() }
        case (true, false): return forceMembership
        case (false, true): return { $0.makeHostile() }
        case (false, false): return { _ in }
        }
    }

    /// What a `fuzz --relays` batch must have injected.
    static let relayKinds = ["relay.session", "relay.drop", "relay.delay", "relay.replay", "relay.reorder", "relay.withhold", "relay.stale",
                             "relay.honest", "relay.crash", "relay.restart", "relay.wipe", "relay.isolated"]

    /// The smallest `fuzz --hostile` batch that fails when a strategy was never used.
    public static let hostileBatchMin = 20

    /// Runs one seed; `adjust` may override what the seed drew (scenario tests).
    /// `record` keeps the drawn events and the diagram; `plantedBug` is for testing the shrinker only.
    /// `share` may be another run's of the same seed (``runTwice(_:replicas:lmdb:membership:plantedBug:)``).
    public static func runSeed(_ seed: UInt64, replicas: ClosedRange<Int> = 2...5, lmdb: Bool = false,
                               keepTrace: Bool = false, record: Bool = false, plantedBug: PlantedBug? = nil,
                               finalChecks: Simulator.FinalChecks = .all, share: SeedShare = SeedShare(),
                               adjust: (inout SimulationParameters) -> Void = { _ in }) -> SimulationResult {
        var parameters = SimulationParameters.draw(seed: seed, replicas: replicas)
        parameters.usesLMDB = lmdb
        adjust(&parameters)
        var base: String?
        if lmdb { base = TemporaryDirectory.make() }
        defer { if let base { TemporaryDirectory.remove(base) } }
        return Simulator(parameters: parameters, keepTrace: keepTrace, lmdbBase: base, record: record, plantedBug: plantedBug,
                         finalChecks: finalChecks, share: share).run()
    }

    /// What a batch of seeds did.
    public struct FuzzSummary: Sendable {
        /// Failing seeds.
        public var failed: [UInt64] = []
        /// Events over all runs (first runs only).
        public var events = 0
        /// Virtual milliseconds over all runs.
        public var virtualMillis: Int64 = 0
        /// Faults injected, by kind.
        public var faults: [String: Int] = [:]
    }

    /// Runs `seeds`, each twice (determinism self-check, ``runTwice(_:replicas:lmdb:membership:plantedBug:)``),
    /// or once when `rerun` is false.
    public static func fuzz(seeds: Range<UInt64>, replicas: ClosedRange<Int>, lmdbEvery: Int, membership: Bool = false,
                            hostile: Bool = false, relays: Bool = false, jobs: Int = 1, rerun: Bool = true, program: String = defaultProgram,
                            output: (String) -> Void) -> FuzzSummary {
        // Each simulation is single-threaded and deterministic; with `jobs` > 1, independent
        // seeds run side by side and their reports are printed in seed order.
        let list = Array(seeds)
        let results = SeedResults(count: list.count)
        // Each worker takes the next seed not taken yet, so a worker that drew cheap seeds does not
        // sit idle while another finishes a long stripe.
        DispatchQueue.concurrentPerform(iterations: max(1, min(jobs, list.count))) { _ in
            while let index = results.take() {
                let seed = list[index]
                let lmdb = lmdbEvery > 0 && seed % UInt64(lmdbEvery) == 0
                let (first, failures) = rerun ? runTwice(seed, replicas: replicas, lmdb: lmdb, membership: membership, hostile: hostile, relays: relays)
                    : runOnce(seed, replicas: replicas, lmdb: lmdb, membership: membership, hostile: hostile, relays: relays)
                results.set(index, SeedReport(seed: seed, lmdb: lmdb, result: first, failures: failures))
            }
        }
        var summary = FuzzSummary()
        for report in results.all() {
            summary.events += report.result.events
            summary.virtualMillis += report.result.virtualMillis
            for (k, v) in report.result.faults { summary.faults[k, default: 0] += v }
            if let failure = report.failures.first {
                summary.failed.append(report.seed)
                output("seed \(report.seed) FAILED: \(failure)")
                output("  reproduce: " + reproduction(program, report.seed, replicas, report.lmdb, membership, hostile: hostile, relays: relays))
                output("  shrink:    " + shrinkLine(program, report.seed, replicas, report.lmdb, membership, nil, hostile: hostile, relays: relays))
            }
        }
        return summary
    }

    /// Runs a seed, then again to check determinism: the first run's result, and its failures
    /// plus one when the rerun differs. A passing first run is replayed without the final checks
    /// (pure functions of the final state): the same loop trace, digest and failures mean the
    /// same outcome. A failing one is replayed whole, so its failure is shown to reproduce.
    static func runTwice(_ seed: UInt64, replicas: ClosedRange<Int>, lmdb: Bool, membership: Bool,
                         plantedBug: PlantedBug? = nil, hostile: Bool = false, relays: Bool = false) -> (result: SimulationResult, failures: [String]) {
        let adjust = adjustment(membership, hostile, relays)
        // Both runs derive, sign and prepare the same: the rerun finds it in the first run's share.
        let share = SeedShare()
        let first = runSeed(seed, replicas: replicas, lmdb: lmdb, plantedBug: plantedBug, share: share, adjust: adjust)
        let second = runSeed(seed, replicas: replicas, lmdb: lmdb, plantedBug: plantedBug,
                             finalChecks: first.passed ? .skipped : .all, share: share, adjust: adjust)
        var failures = first.failures
        if !sameRun(first, second) {
            failures.append("not deterministic: " + firstDifference(seed, replicas: replicas, lmdb: lmdb, membership: membership,
                                                                   plantedBug: plantedBug, hostile: hostile, relays: relays))
        }
        return (first, failures)
    }

    /// Runs a seed once, without the determinism check: its result and failures.
    static func runOnce(_ seed: UInt64, replicas: ClosedRange<Int>, lmdb: Bool, membership: Bool,
                        plantedBug: PlantedBug? = nil, hostile: Bool = false, relays: Bool = false) -> (result: SimulationResult, failures: [String]) {
        let result = runSeed(seed, replicas: replicas, lmdb: lmdb, plantedBug: plantedBug, adjust: adjustment(membership, hostile, relays))
        return (result, result.failures)
    }

    /// Whether a rerun of a seed reproduced its first run: the whole trace when both ran every
    /// final check, else the trace up to the end of the event loop, the final digest and the
    /// failures found by then.
    static func sameRun(_ first: SimulationResult, _ second: SimulationResult) -> Bool {
        if first.traceHash == second.traceHash { return true }
        return first.passed && first.loopTraceHash == second.loopTraceHash && first.digest == second.digest
            && second.failures.isEmpty
    }

    /// Runs a seed twice more with traces kept and names the first event where they differ.
    static func firstDifference(_ seed: UInt64, replicas: ClosedRange<Int>, lmdb: Bool, membership: Bool,
                                plantedBug: PlantedBug? = nil, hostile: Bool = false, relays: Bool = false) -> String {
        let adjust = adjustment(membership, hostile, relays)
        let a = runSeed(seed, replicas: replicas, lmdb: lmdb, keepTrace: true, plantedBug: plantedBug, adjust: adjust).trace
        let b = runSeed(seed, replicas: replicas, lmdb: lmdb, keepTrace: true, plantedBug: plantedBug, adjust: adjust).trace
        for i in 0..<min(a.count, b.count) where a[i] != b[i] {
            return "traces differ first at event \(i + 1): \"\(a[i])\" vs \"\(b[i])\""
        }
        return a.count == b.count ? "trace hashes differ" : "one trace is longer (\(a.count) vs \(b.count) lines)"
    }

    struct SeedReport: Sendable {
        var seed: UInt64
        var lmdb: Bool
        var result: SimulationResult
        var failures: [String]
    }

    /// Results filled in by worker threads, read in seed order.
    final class SeedResults: Sendable {
        private let state: Mutex<(slots: [SeedReport?], next: Int)>
        init(count: Int) { state = Mutex((Array(repeating: nil, count: count), 0)) }
        /// The next index nobody has taken, or nil when all are.
        func take() -> Int? {
            state.withLock { state in
                guard state.next < state.slots.count else { return nil }
                state.next += 1
                return state.next - 1
            }
        }
        func set(_ i: Int, _ r: sending SeedReport) { state.withLock { $0.slots[i] = r } }
        func all() -> [SeedReport] { state.withLock { $0.slots.compactMap { $0 } } }
    }

    static func reproduction(_ program: String, _ seed: UInt64, _ replicas: ClosedRange<Int>, _ lmdb: Bool, _ membership: Bool = false,
                             _ plantedBug: PlantedBug? = nil, hostile: Bool = false, relays: Bool = false) -> String {
        "\(program) seed \(seed)" + options(replicas, lmdb, membership, plantedBug, hostile: hostile, relays: relays) + " --trace"
    }

    /// The command that shrinks a failing seed to a scenario.
    static func shrinkLine(_ program: String, _ seed: UInt64, _ replicas: ClosedRange<Int>, _ lmdb: Bool, _ membership: Bool,
                           _ plantedBug: PlantedBug?, hostile: Bool = false, relays: Bool = false) -> String {
        "\(program) shrink --seed \(seed)" + options(replicas, lmdb, membership, plantedBug, hostile: hostile, relays: relays)
    }

    static func options(_ replicas: ClosedRange<Int>, _ lmdb: Bool, _ membership: Bool, _ plantedBug: PlantedBug?,
                        hostile: Bool = false, relays: Bool = false) -> String {
        " --replicas \(replicas.lowerBound)..\(replicas.upperBound)" + (lmdb ? " --lmdb" : "") + (membership ? " --membership" : "")
            + (hostile ? " --hostile" : "") + (relays ? " --relays" : "")
            + (plantedBug.map { " --plant-bug \($0.rawValue)" } ?? "")
    }

    static func value(_ name: String, _ args: inout [String]) -> String? {
        guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
        let v = args[i + 1]
        args.removeSubrange(i...(i + 1))
        return v
    }

    static func flag(_ name: String, _ args: inout [String]) -> Bool {
        guard let i = args.firstIndex(of: name) else { return false }
        args.remove(at: i)
        return true
    }
}

import Foundation

/// `kidledger-sim shrink --seed N [--replicas A..B] [--lmdb] [--membership] [--hostile] [--relays] [--out FILE] [--max-runs K] [--svg OUT]`.
extension SimulatorCLI {
    /// Other engine seeds tried when the explicit event list, replayed with the run's own seed,
    /// does not fail: the replay draws network delays and gossip partners afresh.
    static let replaySeedsTried: UInt64 = 8

    static func shrinkCommand(_ arguments: [String], program: String = defaultProgram, replicas: ClosedRange<Int>, svg: String?, plantedBug: PlantedBug?,
                              output: (String) -> Void) -> Int32 {
        var args = arguments
        let lmdb = flag("--lmdb", &args), membership = flag("--membership", &args), hostile = flag("--hostile", &args)
        let relays = flag("--relays", &args)
        let out = value("--out", &args)
        let maxRunsText = value("--max-runs", &args)
        guard let seed = value("--seed", &args).flatMap({ UInt64($0) }), args.isEmpty else {
            output("kidledger-sim: shrink needs --seed N (and takes --replicas A..B, --lmdb, --membership, --hostile, --out FILE, --max-runs K, --svg OUT)")
            return 64
        }
        let maxRuns = maxRunsText.flatMap { Int($0) } ?? 400
        guard maxRuns >= 1 else { output("kidledger-sim: --max-runs takes a positive number"); return 64 }
        let path = out ?? "Simulations/shrunk-seed-\(seed).scenario"

        let result = runSeed(seed, replicas: replicas, lmdb: lmdb, record: true, plantedBug: plantedBug, adjust: adjustment(membership, hostile, relays))
        guard let failure = result.failures.first else {
            output("seed \(seed) passes every check: nothing to shrink (no file written)")
            return 0
        }
        output("seed \(seed) fails at t=\(result.failureMillis ?? result.virtualMillis) ms: \(failure)")
        var events = Scenario.eventList(result)
        output("explicit event list: \(events.steps.count) steps on \(events.replicas) replicas")

        // Replay the list as a scenario; the engine seed draws delays and gossip partners anew.
        var replayed: String?
        for engineSeed in seed..<(seed + replaySeedsTried) {
            events.seed = engineSeed
            if let f = Shrinker.failure(of: events, plantedBug: plantedBug), Shrinker.kind(f) == Shrinker.kind(failure) {
                replayed = f
                break
            }
        }
        guard let replayed else {
            output("FAILED to reproduce: the explicit event list passes (or fails otherwise) when replayed with engine seeds \(seed)…\(seed + replaySeedsTried - 1); nothing written. Reproduce the seed itself: " + reproduction(program, seed, replicas, lmdb, membership, plantedBug, hostile: hostile, relays: relays))
            return 1
        }
        if events.seed != seed { output("the event list fails the same way when replayed with engine seed \(events.seed)") }

        let shrunk = Shrinker.shrink(events, failure: replayed, plantedBug: plantedBug, maxRuns: maxRuns)
        let s = shrunk.scenario
        let bug = plantedBug.map { " --plant-bug \($0.rawValue)" } ?? ""
        let text = s.text(comments: [
            "Shrunk by `kidledger-sim shrink --seed \(seed)\(options(replicas, lmdb, membership, plantedBug, hostile: hostile, relays: relays))`:",
            "\(events.steps.count) steps on \(events.replicas) replicas down to \(s.steps.count) on \(s.replicas), in \(shrunk.runs) runs\(shrunk.budgetExhausted ? " (run budget used up: maybe not minimal)" : "").",
            "Fails: \(shrunk.failure)",
            "Reproduce: \(program) run \(path)\(bug) --svg /tmp/shrunk.svg",
        ])
        // The output folder is created when missing (with its parents); what stops the write is named.
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            } catch {
                output("kidledger-sim: cannot create the folder \(folder) for \(path): \((error as NSError).localizedDescription)")
                return 73
            }
        }
        if let reason = writeFailure(path, text) { output("kidledger-sim: cannot write \(path): \(reason)"); return 73 }
        output("shrunk to \(s.steps.count) steps on \(s.replicas) replicas in \(shrunk.runs) runs\(shrunk.budgetExhausted ? " (run budget used up)" : ""): \(path)")
        output("it fails with: \(shrunk.failure)")
        output("reproduce: \(program) run \(path)\(bug)")
        if let svg {
            let diagram = Simulator.runScenario(s, record: true, plantedBug: plantedBug).simulation
            if let code = writeDiagram(diagram, to: svg, title: "kidledger-sim run \(path) (shrunk from seed \(seed))", output: output) { return code }
        }
        return 0
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// `kidledger-sim run FILE [--seed N] [--trace OUT] [--svg OUT] [--verbose] [--millis]`.
extension SimulatorCLI {
    static func runScenarioCommand(_ arguments: [String], program: String = defaultProgram, svg: String? = nil, plantedBug: PlantedBug? = nil,
                                   output: (String) -> Void) -> Int32 {
        var args = arguments
        let seedText = value("--seed", &args)
        let traceFile = value("--trace", &args)
        let verbose = flag("--verbose", &args)
        let millis = flag("--millis", &args)
        guard args.count == 1, !args[0].hasPrefix("-") else { output(usage); return 64 }
        var seed: UInt64?
        if let seedText {
            guard let s = UInt64(seedText) else { output("kidledger-sim: --seed takes a non-negative number"); return 64 }
            seed = s
        }
        let path = args[0]
        guard let text = readFile(path) else { output("kidledger-sim: cannot read \(path)"); return 66 }
        let result: ScenarioResult
        switch runScenario(text: text, seed: seed, keepTrace: traceFile != nil, record: svg != nil, plantedBug: plantedBug,
                                verbose: verbose) {
        case .failure(let error):
            output("\(path):\(error.line): \(error.message)")
            return 65
        case .success(let r):
            result = r
        }
        if let traceFile, !writeFile(traceFile, result.simulation.trace.joined(separator: "\n") + "\n") {
            output("kidledger-sim: cannot write \(traceFile)")
            return 73
        }
        let seedUsed = result.simulation.parameters.seed
        output("scenario \(path) seed \(seedUsed), \(result.simulation.parameters.replicaCount) replicas")
        (millis ? result.timeline : result.readableTimeline).forEach(output)
        let quiet = millis ? "t=\(result.simulation.virtualMillis)" : Scenario.clockText(result.simulation.virtualMillis)
        output("quiet at \(quiet) after \(result.simulation.events) events; trace=\(result.simulation.traceHash.prefix(16)) digest=\(result.simulation.digest.prefix(16))")
        for outcome in result.outcomes {
            let e = outcome.expectation
            output("\(outcome.passed ? "ok  " : "FAIL") line \(e.line): \(e.text)\(outcome.passed ? "" : " — found \(outcome.detail)")")
        }
        for f in result.simulation.failures { output("FAILED (engine check): \(f)") }
        if let svg, let code = writeDiagram(result.simulation, to: svg, title: "kidledger-sim run \(path) --seed \(seedUsed)", output: output) {
            return code
        }
        if !result.passed {
            if let first = result.outcomes.first(where: { !$0.passed }) {
                output("FAILED: line \(first.expectation.line): \(first.expectation.text) — found \(first.detail)")
            }
            output("reproduce: " + scenarioReproduction(program, path, seedUsed) + (plantedBug.map { " --plant-bug \($0.rawValue)" } ?? ""))
            return 1
        }
        output("all \(result.outcomes.count) expectations hold")
        return 0
    }

    /// Parses and runs scenario text.
    public static func runScenario(text: String, seed: UInt64? = nil, keepTrace: Bool = false, record: Bool = false,
                                   plantedBug: PlantedBug? = nil, verbose: Bool = false) -> Result<ScenarioResult, Scenario.ParseError> {
        do {
            let scenario = try Scenario.parse(text)
            return .success(Simulator.runScenario(scenario, seed: seed, keepTrace: keepTrace, record: record, plantedBug: plantedBug,
                                                  verbose: verbose))
        } catch {
            return .failure(error)
        }
    }

    static func scenarioReproduction(_ program: String, _ path: String, _ seed: UInt64) -> String {
        "\(program) run \(path) --seed \(seed) --trace /tmp/kidledger-scenario.trace"
    }

    /// Writes the run's diagram to `path`; returns an exit code only when that fails.
    static func writeDiagram(_ result: SimulationResult, to path: String, title: String, output: (String) -> Void) -> Int32? {
        guard let log = result.diagram else { output("kidledger-sim: the run kept no diagram"); return 70 }
        guard writeFile(path, SpaceTimeDiagram.svg(log, title: title)) else { output("kidledger-sim: cannot write \(path)"); return 73 }
        output("diagram: \(path) (\(log.replicas) lanes, \(log.messages.count) deliveries\(log.failureMillis.map { ", failure at t=\($0) ms" } ?? ""))")
        return nil
    }

    static func readFile(_ path: String) -> String? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = fread(&buffer, 1, buffer.count, f)
            if n > 0 { bytes += buffer[0..<n] }
            if n < buffer.count { break }
        }
        if ferror(f) != 0 { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func writeFile(_ path: String, _ text: String) -> Bool { writeFailure(path, text) == nil }

    /// Writes `text` to `path`; nil when written, else why not (the system's reason).
    static func writeFailure(_ path: String, _ text: String) -> String? {
        guard let f = fopen(path, "wb") else { return String(cString: strerror(errno)) }
        let bytes = Array(text.utf8)
        let n = fwrite(bytes, 1, bytes.count, f)
        let reason = n == bytes.count ? nil : String(cString: strerror(errno))
        if fclose(f) != 0 { return reason ?? String(cString: strerror(errno)) }
        return reason
    }
}

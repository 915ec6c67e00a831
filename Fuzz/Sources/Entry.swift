// The libFuzzer entry points of `kidledger-fuzz`: one binary, many targets; the target is chosen
// with the environment variable KIDLEDGER_FUZZ_TARGET. Built only by Scripts/fuzz.sh (with
// `-sanitize=fuzzer,address`), never by `swift build`: libFuzzer supplies `main`.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One fuzz target: what it does with an input, and the seed inputs it starts from.
struct FuzzTarget: Sendable {
    /// The name used by KIDLEDGER_FUZZ_TARGET, Scripts/fuzz.sh and Fuzz/corpus/NAME.
    let name: String
    /// Runs one input; a broken property calls ``violated(_:)``.
    let run: @Sendable ([UInt8]) -> Void
    /// Seed inputs made from real encodings (written to Fuzz/corpus/NAME by `Scripts/fuzz.sh seeds`).
    let seeds: @Sendable () -> [[UInt8]]
}

/// Every target, in the order `Scripts/fuzz.sh all` runs them.
let allTargets: [FuzzTarget] = [
    FuzzTarget(name: "frame", run: fuzzFrame, seeds: frameSeeds),
    FuzzTarget(name: "message", run: fuzzMessage, seeds: messageSeeds),
    FuzzTarget(name: "record", run: fuzzRecord, seeds: recordSeeds),
    FuzzTarget(name: "handshake", run: fuzzHandshake, seeds: handshakeSeeds),
    FuzzTarget(name: "csv", run: fuzzCSV, seeds: csvSeeds),
    FuzzTarget(name: "invite", run: fuzzInvite, seeds: inviteSeeds),
    FuzzTarget(name: "announcement", run: fuzzAnnouncement, seeds: announcementSeeds),
    FuzzTarget(name: "amount", run: fuzzAmount, seeds: amountSeeds),
    FuzzTarget(name: "http", run: fuzzHTTP, seeds: httpSeeds),
    FuzzTarget(name: "session", run: fuzzSession, seeds: sessionSeeds),
    FuzzTarget(name: "relay", run: fuzzRelay, seeds: relaySeeds),
    FuzzTarget(name: "relaymessage", run: fuzzRelayMessage, seeds: relayMessageSeeds),
]

/// Writes a line to standard error.
func printError(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count) }
}

/// A property failed: print what and abort, so libFuzzer saves the input as a crash.
func violated(_ what: String) -> Never {
    printError("kidledger-fuzz: property violated: \(what)")
    abort()
}

/// Checks a property of the code under test.
func check(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition { violated(what()) }
}

private func environment(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
}

/// The target named by KIDLEDGER_FUZZ_TARGET (read once).
let selectedTarget: FuzzTarget = {
    let name = environment("KIDLEDGER_FUZZ_TARGET") ?? ""
    guard let target = allTargets.first(where: { $0.name == name }) else {
        printError("kidledger-fuzz: set KIDLEDGER_FUZZ_TARGET to one of: \(allTargets.map(\.name).joined(separator: " "))")
        exit(64)
    }
    return target
}()

/// Called by libFuzzer once before fuzzing. With KIDLEDGER_FUZZ_WRITE_SEEDS=DIR it instead writes
/// the selected target's seeds to DIR/seed-NN and exits.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>,
                           _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    let target = selectedTarget
    if let directory = environment("KIDLEDGER_FUZZ_WRITE_SEEDS") {
        for (i, seed) in target.seeds().enumerated() {
            target.run(seed)  // every seed must itself pass the target's checks
            let path = directory + "/seed-" + (i < 10 ? "0" : "") + String(i)
            guard let file = fopen(path, "wb") else {
                printError("kidledger-fuzz: cannot write \(path)")
                exit(74)
            }
            _ = seed.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
        }
        exit(0)
    }
    return 0
}

/// Called by libFuzzer for every input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    selectedTarget.run(bytes)
    return 0
}

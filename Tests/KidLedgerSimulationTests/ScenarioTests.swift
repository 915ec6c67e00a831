#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerSimulation
import KidLedgerTestSupport
import Testing

/// Hand-written scenarios (Simulations/*.scenario) run through `kidledger-sim run`.
@Suite("Scenarios")
struct ScenarioTests {
    /// The package's Simulations directory, found from this file's path.
    static let directory: String = {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // Tests/KidLedgerSimulationTests/ScenarioTests.swift
        return parts.joined(separator: "/") + "/Simulations"
    }()

    static let files: [String] = {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasSuffix(".scenario") { names.append(name) }
        }
        return names.sorted()
    }()

    static func run(_ arguments: [String]) -> (code: Int32, output: [String]) {
        var lines: [String] = []
        let code = SimulatorCLI.run(arguments: arguments, output: { lines.append($0) })
        return (code, lines)
    }

    /// Writes `text` to `name`.scenario in `dir`; returns the path.
    static func write(_ text: String, name: String, in dir: KidLedgerTestSupport.TemporaryDirectory) -> String {
        let path = dir.sub("\(name).scenario")
        let f = fopen(path, "wb")!
        let bytes = Array(text.utf8)
        _ = fwrite(bytes, 1, bytes.count, f)
        fclose(f)
        return path
    }

    @Test("the shipped scenarios tell at least ten stories")
    func atLeastTenScenarios() {
        #expect(Self.files.count >= 10, "found \(Self.files) in \(Self.directory)")
    }

    @Test("every scenario holds all its expectations", arguments: files)
    func scenarioPasses(file: String) {
        let (code, output) = Self.run(["run", "\(Self.directory)/\(file)"])
        #expect(code == 0, "\(file):\n\(output.joined(separator: "\n"))")
        #expect(output.last?.hasPrefix("all ") == true)
        #expect(!output.contains { $0.hasPrefix("FAIL") })
    }

    @Test("a scenario run is deterministic: same seed, same trace")
    func deterministic() throws {
        let path = "\(Self.directory)/06-crash-mid-sync.scenario"
        let first = Self.run(["run", path, "--seed", "7"]).output.first { $0.hasPrefix("quiet at") }
        let second = Self.run(["run", path, "--seed", "7"]).output.first { $0.hasPrefix("quiet at") }
        #expect(first != nil && first == second)
    }

    @Test("a wrong expectation fails with exit 1, names the line and prints a reproduction")
    func wrongExpectationFails() {
        let dir = KidLedgerTestSupport.TemporaryDirectory(prefix: "kidledger-scenario-test")
        defer { dir.remove() }
        let path = Self.write("""
            replicas 2
            at 0   r0 add-child Ava
            at 10  r1 give Ava 1.00
            at 20  r0 give Ava 2.00
            expect converged
            expect balance Ava 99.00
            """, name: "wrong", in: dir)
        let (code, output) = Self.run(["run", path, "--seed", "5"])
        #expect(code == 1)
        #expect(output.contains("ok   line 5: expect converged"), "\(output)")
        #expect(output.contains { $0.hasPrefix("FAILED: line 6: expect balance Ava 99.00") }, "\(output)")
        #expect(output.contains("reproduce: swift run kidledger-sim run \(path) --seed 5 --trace /tmp/kidledger-scenario.trace"), "\(output)")
    }

    @Test("a refused operation is part of the story, not a failure")
    func refusalsAreOutcomes() throws {
        let result = try SimulatorCLI.runScenario(text: """
            replicas 2
            at 0   r1 give Nobody 1.00
            expect transaction-count 0
            """).get()
        #expect(result.passed)
        #expect(result.timeline.contains { $0.contains("refused: ") })
    }

    @Test("syntax errors name the line", arguments: [
        ("replicas 2\nat 0 r0 add-child Ava\nat 5 r9 undo\n", 3, "r9 does not exist"),
        ("replicas 2\n\n# comment\nat 0 r0 fly\n", 4, "unknown operation"),
        ("replicas 2\nat 10 r0 undo\nat 5 r0 undo\n", 3, "time order"),
        ("replicas 2\nexpect balance Ava lots\n", 2, "bad amount"),
        ("replicas 2\nat 0 r0 give Ava 1.00 note \"open\n", 2, "unterminated quote"),
        ("replicas 2\nat 0 r1 revoke r1\n", 2, "cannot revoke itself"),
        ("replicas 2\nexpect converged on r1\n", 2, "only ledger checks"),
        ("hello\n", 1, "unknown directive"),
        ("replicas 2\ngossip 5\n", 2, "gossip takes"),
        ("replicas 2\ntopology ring\n", 2, "topology line|full"),
        ("replicas 2\nstore disk\n", 2, "store lmdb|memory"),
        ("replicas 2\nat 0 duplicate 1.25\n", 2, "at most one decimal"),
        ("replicas 2\nat 0 r0 restart later\n", 2, "rX restart [stale]"),
        ("replicas 2\nat 0 r0 add-child Ava as\n", 2, "add-child NAME [as LABEL]"),
    ])
    func syntaxErrors(text: String, line: Int, message: String) {
        #expect(throws: Scenario.ParseError.self) { try Scenario.parse(text) }
        do {
            _ = try Scenario.parse(text)
        } catch {
            #expect(error.line == line)
            #expect(error.message.contains(message), "\(error)")
        }
    }

    @Test("the command line reports a syntax error as FILE:LINE with exit 65")
    func syntaxErrorExit() {
        let dir = KidLedgerTestSupport.TemporaryDirectory(prefix: "kidledger-scenario-test")
        defer { dir.remove() }
        let path = Self.write("replicas 2\nat 0 r0 add-child Ava\nexpect nonsense\n", name: "syntax", in: dir)
        let (code, output) = Self.run(["run", path])
        #expect(code == 65)
        #expect(output.first?.hasPrefix("\(path):3: unknown expectation") == true, "\(output)")
    }
}

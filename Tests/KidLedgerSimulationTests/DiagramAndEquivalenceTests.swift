#if canImport(Glibc)
import Glibc
#endif
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerTestSupport
import Testing
@testable import KidLedgerSimulation

/// The three ways to reach a converged state, checked by the engine after every run.
@Suite("Equivalence of incremental sync, full sync and restart")
struct EquivalenceTests {
    @Test("an LMDB run compares all three ways, a memory run two; both agree")
    func waysCompared() {
        let lmdb = SimulatorCLI.runSeed(20, lmdb: true, keepTrace: true)
        expectPassed(lmdb, "seed 20 --lmdb")
        #expect(lmdb.equivalentWays == 3)
        #expect(lmdb.trace.contains { $0.contains("equivalence: incremental sync, full sync from empty (") && $0.contains("restart from the LMDB files (") && $0.contains(" agree on digest") })
        let memory = SimulatorCLI.runSeed(2, keepTrace: true)
        expectPassed(memory, "seed 2")
        #expect(memory.equivalentWays == 2)
    }

    @Test("an LMDB scenario with revocations and stale-free crashes: three ways agree")
    func lmdbScenario() throws {
        let result = try SimulatorCLI.runScenario(text: """
            replicas 3
            store lmdb
            at 0    r0 add-child Ava as a
            at 50   sync all
            at 100  partition r2 | r0,r1
            at 200  r2 give @a 1.00
            at 210  r0 revoke r2
            at 300  r2 give @a 2.00
            at 400  r1 crash
            at 500  r1 restart
            at 600  heal
            """).get()
        #expect(result.passed, "\(result.simulation.failures)")
        #expect(result.simulation.equivalentWays == 3)
    }

    @Test("a replica whose state is not what its changes give is caught")
    func divergenceIsCaught() throws {
        let simulator = Simulator(parameters: SimulationParameters.draw(seed: 2))
        let result = simulator.run()
        expectPassed(result, "seed 2")
        let replica = try #require(simulator.nodes[0].replica)
        // Corrupt r0's stored digest: its state is no longer what a full sync of its changes gives.
        try replica.store.write { try $0.put(Tables.meta, Array("digest".utf8), [UInt8](repeating: 0xAB, count: 32)) }
        let run = try simulator.finalRun(simulator.nodes)
        var failures: [String] = []
        #expect(try EquivalenceChecker().compare(run, digest: try replica.digest(), failures: &failures) == 2)
        #expect(failures.count == 1)
        #expect(failures.last?.hasPrefix("equivalence: a full sync from empty (from r") == true, "\(failures)")
    }
}

/// `--svg`: the space-time diagram.
@Suite("Space-time diagram")
struct DiagramTests {
    /// What the XML parser saw.
    final class Collector: NSObject, XMLParserDelegate {
        var root: String?
        var rootAttributes: [String: String] = [:]
        var classes: [String: Int] = [:]
        var text = ""
        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                    attributes: [String: String] = [:]) {
            if root == nil { root = name; rootAttributes = attributes }
            if let c = attributes["class"] { classes[c, default: 0] += 1 }
        }
        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }
    }

    static func parse(_ svg: String) -> (ok: Bool, collector: Collector, error: String) {
        let parser = XMLParser(data: Data(svg.utf8))
        let collector = Collector()
        parser.delegate = collector
        let ok = parser.parse()
        return (ok, collector, parser.parserError.map { "\($0)" } ?? "")
    }

    @Test("a failing run's diagram is well-formed XML with one lane per replica and the failure highlighted")
    func failingRun() throws {
        let result = SimulatorCLI.runSeed(7, record: true, plantedBug: .crossReplicaUndo)
        #expect(!result.passed)
        let log = try #require(result.diagram)
        let svg = SpaceTimeDiagram.svg(log, title: "seed 7 <planted & bug>")
        let (ok, c, error) = Self.parse(svg)
        #expect(ok, "\(error)")
        #expect(c.root == "svg")
        #expect(c.classes["lane"] == result.parameters.replicaCount)
        #expect(c.classes["failure"] == 1)
        // The time as the diagram writes it: "850 ms" below a second, "1.1 s" from one on.
        let millis = result.failureMillis!
        let at = millis < 1_000 ? "\(millis) ms" : "\(millis / 1_000).\(millis % 1_000 / 100) s"
        #expect(c.text.contains("FAILED at t=\(at): planted bug cross-replica-undo"), "\(c.text)")
        #expect(c.text.contains("seed 7 <planted & bug>"))
        #expect(Int(c.rootAttributes["width"] ?? "") == 1_200 && Int(c.rootAttributes["height"] ?? "") != nil)
        #expect(log.messages.count > 0 && svg.contains("marker-end"))
        // Deterministic: the same seed draws the same picture.
        let again = SimulatorCLI.runSeed(7, record: true, plantedBug: .crossReplicaUndo)
        #expect(SpaceTimeDiagram.svg(try #require(again.diagram), title: "seed 7 <planted & bug>") == svg)
    }

    @Test("a passing scenario's diagram has its lanes, partitions and crashes, and no failure")
    func passingScenario() throws {
        let path = "\(ScenarioTests.directory)/06-crash-mid-sync.scenario"
        let dir = KidLedgerTestSupport.TemporaryDirectory(prefix: "kidledger-diagram-test")
        defer { dir.remove() }
        let svgPath = dir.sub("diagram.svg")
        let (code, output) = ScenarioTests.run(["run", path, "--svg", svgPath])
        #expect(code == 0, "\(output)")
        let svg = try #require(SimulatorCLI.readFile(svgPath))
        let (ok, c, error) = Self.parse(svg)
        #expect(ok, "\(error)")
        #expect(c.classes["lane"] == 2)
        #expect(c.classes["failure"] == nil)
        #expect(c.classes["crash"] == 1 && c.classes["restart"] == 1 && c.classes["down"] == 1)
        #expect(c.text.contains("No check failed."))

        let partitioned = try SimulatorCLI.runScenario(text: "replicas 3\nat 0 r0 add-child Ava\nat 100 partition r2 | r0,r1\nat 900 heal\n",
                                                       record: true).get()
        let partitionSVG = SpaceTimeDiagram.svg(try #require(partitioned.simulation.diagram), title: "partition")
        let (_, p, _) = Self.parse(partitionSVG)
        // Both sides of the cut are banded, one band a lane: r2 cut off, r0 and r1 the rest.
        #expect(p.classes["partition"] == 3 && p.classes["lane"] == 3)
        let bands = partitionSVG.split(separator: "\n").filter { $0.contains(#"class="partition""#) }
        func laneY(_ lane: Int) -> String { #"y="\#(SpaceTimeDiagram.top + lane * SpaceTimeDiagram.laneGap - 20)""# }
        #expect(bands.filter { $0.contains(#"data-side="cut-off""#) }.map { $0.contains(laneY(2)) } == [true], "\(bands)")
        let rest = bands.filter { $0.contains(#"data-side="rest""#) }
        #expect(rest.count == 2 && rest[0].contains(laneY(0)) && rest[1].contains(laneY(1)), "\(bands)")
        #expect(p.text.contains("Orange and blue bands: the two sides of a partition."))

        // A failing expectation is highlighted at the end of the run, with its text.
        let wrong = try SimulatorCLI.runScenario(text: "replicas 2\nat 0 r0 add-child Ava\nat 10 r1 give Ava 1.00\nexpect balance Ava 9.00\n",
                                                 record: true).get()
        #expect(!wrong.passed)
        let (_, w, _) = Self.parse(SpaceTimeDiagram.svg(try #require(wrong.simulation.diagram), title: "wrong"))
        #expect(w.classes["failure"] == 1)
        #expect(w.text.contains("FAILED at t=\(wrong.simulation.virtualMillis) ms: line 4: expect balance Ava 9.00 — found"), "\(w.text)")
    }

    @Test("thousands of deliveries are aggregated into fewer arrows, and the legend says so")
    func longRunsAreAggregated() {
        var log = DiagramLog(replicas: 3)
        for i in 0..<6_000 { log.message(from: i % 3, to: (i + 1) % 3, sent: Int64(i * 10), delivered: Int64(i * 10 + 25), session: i) }
        for i in 0..<4_000 { log.lost(from: 0, to: 1, at: Int64(i * 15)) }
        log.endMillis = 60_000
        let svg = SpaceTimeDiagram.svg(log, title: "long")
        let arrows = svg.components(separatedBy: "marker-end=").count - 1
        #expect(arrows > 0 && arrows <= SpaceTimeDiagram.maxArrows, "\(arrows) arrows")
        #expect(svg.contains("6000 deliveries, aggregated into \(arrows) arrows"))
        #expect(svg.contains("4000 chunks lost by the network (one in 3 drawn)"))
        #expect(Self.parse(svg).ok)
    }
}

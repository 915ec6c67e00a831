// swift-tools-version:6.0
// kidledger: a local-first, peer-to-peer family allowance ledger.
// No Swift package dependencies; C libraries come from Debian packages (see README); no C of our own.
import PackageDescription

let package = Package(
    name: "kidledger",
    products: [
        .executable(name: "kidledger", targets: ["kidledger"]),
        .executable(name: "kidledger-sim", targets: ["kidledger-sim"]),
        // Benchmark helper behind Scripts/bench.sh (docs/PERFORMANCE.md); not a user command.
        .executable(name: "kidledger-bench", targets: ["kidledger-bench"]),
        // Prints the package's generated files (man page, bash completion, user unit) for
        // Scripts/package.sh; not a user command.
        .executable(name: "kidledger-package", targets: ["kidledger-package"]),
    ],
    targets: [
        // C libraries through system-library targets.
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        // QR codes for `invite` on a terminal.
        .systemLibrary(name: "CQRencode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),

        // POSIX helpers of the drivers and tools: the one monotonic clock and the one EINTR-retrying
        // wrapper for system calls. No dependency; the core and the simulator never import it.
        .target(name: "KidLedgerSystem"),

        // Pure domain: money, ids, clocks, records, merge rules, canonical encoding. Imports nothing of
        // ours; SHA-256 comes from libsodium.
        .target(name: "KidLedgerDomain", dependencies: ["CSodium"]),

        // The replica's state machine over an abstract ordered key-value store (pure; no I/O of its own).
        // It imports KidLedgerSecurity for the relay's epoch records (sealed and opened with libsodium).
        .target(name: "KidLedgerReplica", dependencies: ["KidLedgerDomain", "KidLedgerSecurity"]),

        // The sync protocol core: a pure state machine (bytes and events in, bytes and actions out).
        .target(name: "KidLedgerProtocol", dependencies: ["KidLedgerDomain", "KidLedgerReplica"]),

        // In-memory stand-ins for the product's two system seams: `MemoryStore` (a KeyValueStore with
        // LMDB's order and transactions) and `SimZones` (a fixed zone table). The simulator and tests use them.
        .target(name: "KidLedgerInMemory", dependencies: ["KidLedgerDomain", "KidLedgerReplica"]),

        // The durable key-value store on LMDB.
        .target(name: "KidLedgerLMDB", dependencies: ["CLMDB", "KidLedgerDomain", "KidLedgerReplica"]),

        // The deterministic simulator: N replicas running the real protocol core and store code under a
        // virtual clock, a seeded generator and a simulated network with faults.
        .target(name: "KidLedgerSimulation", dependencies: ["KidLedgerDomain", "KidLedgerReplica", "KidLedgerInMemory", "KidLedgerProtocol", "KidLedgerLMDB", "KidLedgerSecurity", "KidLedgerRelay"]),
        .executableTarget(name: "kidledger-sim", dependencies: ["KidLedgerSystem", "KidLedgerSimulation", "KidLedgerDomain"]),

        .target(name: "KidLedgerSecurity", dependencies: ["KidLedgerSystem", "CSodium", "KidLedgerDomain"]),
        // The relay's store (envelopes filed by clear header, quotas, vectors, mailboxes and
        // collection over the abstract key-value store; it holds no key), its wire messages and the
        // relay's and a member's session state machines (pure; framing from KidLedgerProtocol).
        .target(name: "KidLedgerRelay", dependencies: ["KidLedgerDomain", "KidLedgerReplica", "KidLedgerProtocol", "KidLedgerSecurity"]),
        .target(name: "KidLedgerTransport", dependencies: ["KidLedgerSystem", "KidLedgerDomain", "KidLedgerReplica", "KidLedgerProtocol", "KidLedgerSecurity"]),
        // The family page: a small bounded HTTP/1.1 server on loopback, its token, Host and Origin
        // checks, the JSON API's routes (each runs a CLI command) and the embedded HTML, CSS and JS.
        .target(name: "KidLedgerUI", dependencies: ["KidLedgerSystem", "KidLedgerDomain", "KidLedgerTransport", "KidLedgerSecurity"]),
        // The long-running machinery behind `serve` and `sync`: the daemon's accept and gossip loops,
        // LAN discovery, the sync driver, the one-daemon-per-home lock, the systemd user unit.
        .target(name: "KidLedgerDaemon", dependencies: ["KidLedgerSystem", "KidLedgerDomain", "KidLedgerReplica", "KidLedgerProtocol", "KidLedgerRelay", "KidLedgerLMDB", "KidLedgerTransport", "KidLedgerSecurity"]),
        // The command-line interface as a library (argument parsing, commands, output), so tests can drive it.
        .target(name: "KidLedgerCLI", dependencies: ["KidLedgerSystem", "CQRencode", "KidLedgerDomain", "KidLedgerReplica", "KidLedgerRelay", "KidLedgerLMDB", "KidLedgerProtocol", "KidLedgerTransport", "KidLedgerSecurity", "KidLedgerUI", "KidLedgerDaemon"]),

        // Thin executable.
        .executableTarget(name: "kidledger", dependencies: ["KidLedgerCLI"]),
        .executableTarget(name: "kidledger-package", dependencies: ["KidLedgerCLI"]),
        .executableTarget(name: "kidledger-bench", dependencies: ["KidLedgerSystem", "CLMDB", "KidLedgerDomain", "KidLedgerReplica", "KidLedgerLMDB", "KidLedgerSecurity"]),

        // Fixtures shared by the test targets (temporary directories, deadlines, work on a thread of
        // its own, replicas with a household, two sessions wired in memory). Only test targets depend on it.
        .target(name: "KidLedgerTestSupport", dependencies: ["KidLedgerSystem", "KidLedgerDomain", "KidLedgerReplica", "KidLedgerProtocol", "KidLedgerInMemory"], path: "Tests/KidLedgerTestSupport"),
        // Fixtures of the tests that drive the CLI (KidLedgerCLITests, KidLedgerUITests): a ledger run
        // in process (`TestLedger`), the `kidledger` executable as a process and as a daemon on
        // 127.0.0.1, loopback sockets and a relay that records a session's channel frames.
        .target(name: "KidLedgerCLITestSupport", dependencies: ["KidLedgerSystem", "KidLedgerDomain", "KidLedgerCLI", "KidLedgerSecurity", "KidLedgerTestSupport"], path: "Tests/KidLedgerCLITestSupport"),

        .testTarget(name: "KidLedgerDomainTests", dependencies: ["KidLedgerDomain"]),
        .testTarget(name: "KidLedgerReplicaTests", dependencies: ["KidLedgerDomain", "KidLedgerReplica", "KidLedgerSecurity", "KidLedgerInMemory", "KidLedgerTestSupport"]),
        .testTarget(name: "KidLedgerProtocolTests", dependencies: ["KidLedgerDomain", "KidLedgerReplica", "KidLedgerProtocol", "KidLedgerInMemory", "KidLedgerTestSupport"]),
        .testTarget(name: "KidLedgerSimulationTests", dependencies: ["KidLedgerDomain", "KidLedgerReplica", "KidLedgerProtocol", "KidLedgerLMDB", "KidLedgerInMemory", "KidLedgerSimulation", "KidLedgerTestSupport"]),
        .testTarget(name: "KidLedgerLMDBTests", dependencies: ["KidLedgerDomain", "KidLedgerReplica", "KidLedgerLMDB", "KidLedgerInMemory", "KidLedgerTestSupport"]),
        .testTarget(name: "KidLedgerTransportTests", dependencies: ["KidLedgerSystem", "KidLedgerDomain", "KidLedgerReplica", "KidLedgerProtocol", "KidLedgerTransport", "KidLedgerLMDB", "KidLedgerSecurity", "KidLedgerTestSupport"]),
        .testTarget(name: "KidLedgerSecurityTests", dependencies: ["KidLedgerSecurity", "KidLedgerDomain", "KidLedgerTestSupport"]),
        .testTarget(name: "KidLedgerRelayTests", dependencies: ["KidLedgerRelay", "KidLedgerSecurity", "KidLedgerDomain", "KidLedgerReplica", "KidLedgerProtocol", "KidLedgerLMDB", "KidLedgerTestSupport"]),
        .testTarget(name: "KidLedgerUITests", dependencies: ["KidLedgerSystem", "KidLedgerUI", "KidLedgerCLI", "KidLedgerDaemon", "KidLedgerTransport", "KidLedgerDomain", "KidLedgerReplica", "KidLedgerLMDB", "KidLedgerTestSupport", "KidLedgerCLITestSupport"]),
        .testTarget(name: "KidLedgerCLITests", dependencies: ["KidLedgerSystem", "KidLedgerCLI", "KidLedgerDaemon", "KidLedgerRelay", "KidLedgerProtocol", "KidLedgerDomain", "KidLedgerReplica", "KidLedgerLMDB", "KidLedgerSecurity", "KidLedgerTestSupport", "KidLedgerCLITestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

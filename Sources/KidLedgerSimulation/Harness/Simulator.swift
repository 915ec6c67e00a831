import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica
import KidLedgerProtocol
import KidLedgerLMDB
import KidLedgerSecurity

/// A deterministic simulation of N replicas running the real replica and protocol code under a
/// virtual clock, a seeded generator and a faulty network. No wall clock, no system randomness,
/// no threads: the same seed gives a byte-identical trace.
public final class Simulator {
    enum Event {
        case operation(Int)
        case gossip(Int)
        case deliver(connection: Int, to: Int, bytes: [UInt8], sentAt: Int64)
        case closed(connection: Int, to: Int)
        case restart(Int)
        case idleCheck(connection: Int, lastSeen: Int)
        case heal
        case check
        case revoke
        /// A member recovers ownership with the recovery secret (``Simulator/recover()``).
        case recover
        /// The owner revokes the hostile member while a member lags (``HostileStrategy/writeAfterRevocation``).
        case hostileRevocation
        /// A scenario's scripted step (its index in the script).
        case scripted(Int)
        /// Bytes of a relay session arrive (``Simulator/relayDeliver(_:link:toRelay:)``).
        case relayDeliver(link: Int, toRelay: Bool, bytes: [UInt8])
        /// One end of a relay session sees its connection close.
        case relayClosed(link: Int, toRelay: Bool)
        /// A drawn relay fault (``Simulator/relayFault()``).
        case relayFault
    }

    /// The drawn parameters (a scenario changes the network's loss and delay as it goes).
    public internal(set) var parameters: SimulationParameters
    let time = SimTime()
    /// Every replica's signature verifier in this run: the seed's (``SeedShare/verifier``).
    var verifier: CachingVerifier { share.verifier }
    /// Every replica's prepared changes in this run (``PreparationCache``): each change reaches
    /// every replica, and is hashed once. The final checks' fresh replica does without, so the
    /// equivalence check recomputes every hash. With them the identities and signed membership
    /// records the run makes; a seed's determinism rerun is handed its first run's (``SeedShare``).
    let share: SeedShare
    // The simulator runs on one thread (it is not Sendable, so the compiler confines it; its
    // nodes' ``ThreadCheck`` checks it at run time) and no access to these outlives the call that
    // makes it, so the run-time exclusivity checks of its hot state, the membership bookkeeping
    // below included (about 1% of a simulation, with those of ``SyncSession`` and
    // ``SimConnection``), are left out, as in ``MemoryStore``.
    @exclusivity(unchecked) var g: SplitMix64
    /// Draws the household's time-zone changes (a generator of its own: adding them changed no
    /// other draw of a seed). Unchecked for the same reason as `g`: one thread, checked at run time
    /// by the nodes' ``ThreadCheck``, and no access outlives the call that makes it.
    @exclusivity(unchecked) var zoneG: SplitMix64
    /// Draws everything about the relay (its key, stream and epoch keys, sealing nonces, its
    /// delays and faults): a generator of its own, so a run without a relay draws as before.
    /// Unchecked for the same reason as `g` (one thread, the nodes' ``ThreadCheck``).
    @exclusivity(unchecked) var relayG: SplitMix64
    /// The relay, when the run has one (``SimRelay``). Unchecked as `g`: read at every tick of
    /// every run, on the simulator's one thread (the nodes' ``ThreadCheck``).
    @exclusivity(unchecked) var relay: SimRelay?
    /// Pairs of replicas that never meet directly (`isolate rA rB`): they reach each other only
    /// through the relay. Kept as `min * 64 + max`. Unchecked as `g`: read at every delivery, on
    /// the simulator's one thread (the nodes' ``ThreadCheck``).
    @exclusivity(unchecked) var isolatedPairs = Set<Int>()
    @exclusivity(unchecked) var queue = EventQueue<Event>()
    @exclusivity(unchecked) var nodes: [SimNode] = []
    @exclusivity(unchecked) var connections: [Int: SimConnection] = [:]
    @exclusivity(unchecked) var nextConnection = 0
    var partitioned = Set<Int>() {  // node indexes cut off from the rest
        didSet { if partitioned != oldValue { diagram?.partition(partitioned, at: time.millis - startMillis) } }
    }
    @exclusivity(unchecked) var faultsOn = true
    let startMillis: Int64
    @exclusivity(unchecked) var household = RecordID.zero
    @exclusivity(unchecked) var events = 0
    @exclusivity(unchecked) var keepTrace: Bool
    @exclusivity(unchecked) var trace: [String] = []
    @exclusivity(unchecked) var traceHasher = SHA256Hasher()
    /// ``log(_:)``'s line bytes (kept to reuse its storage).
    @exclusivity(unchecked) var logBytes: [UInt8] = []
    @exclusivity(unchecked) var faults: [String: Int] = [:]
    /// The nodes whose member account the run revoked.
    @exclusivity(unchecked) var revokedNodes = Set<Int>()
    /// The nodes that recorded their revocation from a peer's refusal (``refuses(_:_:)``).
    @exclusivity(unchecked) var learnedFromRefusal = Set<Int>()
    /// Where the revocations the run made are (origin and sequence of each): a member recovers
    /// ownership only once it holds them all (``recover()``).
    @exclusivity(unchecked) var revocationChanges: [(target: Int, origin: ReplicaID, sequence: UInt64)] = []
    /// The node the simulator last made the owner: 0, or the last to recover ownership.
    @exclusivity(unchecked) var currentOwner = 0
    /// The household's recovery secret (the genesis names its public key).
    @exclusivity(unchecked) var recovery: Identity!
    /// The revoked nodes whose revocation some replica holds (one lost with every copy of it, in
    /// a restore from stale files, revokes nobody): once refused they are stopped (in
    /// attentionRequired, no sync), so they are left out of convergence with the others
    /// (``honestNodes``) and checked apart (``stoppedChecks(_:)``).
    var stoppedNodes: Set<Int> {
        revokedNodes.filter { i in
            nodes.contains { (try? $0.revokedKeys().contains(nodes[i].member.publicKey.bytes)) ?? false }
        }
    }
    /// The nodes that are not stopped, in order, nor the hostile member's: they must converge.
    var honestNodes: [SimNode] {
        if revokedNodes.isEmpty && hostile == nil { return nodes }
        return honestNodes(stopped: stoppedNodes)
    }
    /// ``honestNodes`` when the stopped nodes are `stopped` (for a caller that needs both).
    func honestNodes(stopped: Set<Int>) -> [SimNode] {
        stopped.isEmpty && hostile == nil ? nodes : nodes.filter { !stopped.contains($0.index) && $0.index != hostile?.node }
    }
    /// The hostile member, when the run has one (``HostileStrategy``). Unchecked like the state
    /// above: it is read on every frame a session sends.
    @exclusivity(unchecked) var hostile: HostileState?
    @exclusivity(unchecked) var failures: [String] = []
    /// The run's checkers: they watch the run through the hooks it calls (``Checker``).
    let checkers = RunCheckers()
    let lmdbBase: String?
    /// A scripted scenario's state: when set, no random user operations or faults are drawn.
    @exclusivity(unchecked) var scenario: ScenarioState?
    /// Shortest one-way network delay (scenarios may raise it).
    @exclusivity(unchecked) var delayMillisMin: Int64 = 1
    /// A deliberate bug, for testing the shrinker only (never on unless asked for by name).
    let plantedBug: PlantedBug?
    /// When recording: the drawn user operations and faults, as scenario steps.
    @exclusivity(unchecked) var generated: [Scenario.Step]?
    /// Labels of the children added in a recorded run (`add-child NAME as LABEL`), by id.
    @exclusivity(unchecked) var childLabels: [RecordID: String] = [:]
    /// When recording: what the space-time diagram draws.
    @exclusivity(unchecked) var diagram: DiagramLog?
    /// When the first check failed.
    @exclusivity(unchecked) var failureMillis: Int64?
    /// Whether idle stretches are skipped (``skipIdle(now:tick:)``); off only to test that
    /// skipping changes no outcome.
    var skipsIdle = true
    /// Virtual time the gossip ticks skipped, in all.
    var idleSkippedMillis: Int64 = 0

    /// Whether a run ends with the final checks.
    public enum FinalChecks: Sendable {
        /// Every final check (convergence, verify, reference model, membership, equivalence).
        case all
        /// None: the run ends after its event loop. For the determinism rerun of a seed whose
        /// first run passed: the final checks are functions of the final state, so an identical
        /// loop trace and final digest already say the rerun would pass them alike.
        case skipped
    }

    /// Which final checks this run does.
    let finalChecksMode: FinalChecks

    /// Creates a simulation of `parameters`. LMDB runs keep their files under `lmdbBase`. With
    /// `record`, the run keeps its drawn events (as scenario steps) and its diagram. It derives
    /// identities, signs and prepares changes through `share` (which another run of the same seed
    /// may have filled: it only remembers pure functions).
    public init(parameters: SimulationParameters, keepTrace: Bool = false, lmdbBase: String? = nil,
                record: Bool = false, plantedBug: PlantedBug? = nil, finalChecks: FinalChecks = .all,
                share: SeedShare = SeedShare()) {
        self.parameters = parameters
        self.share = share
        self.finalChecksMode = finalChecks
        self.keepTrace = keepTrace
        self.lmdbBase = parameters.usesLMDB ? lmdbBase : nil
        self.plantedBug = plantedBug
        g = SplitMix64(seed: parameters.seed)
        zoneG = SplitMix64(seed: parameters.seed ^ 0x20E5_C4A6)
        relayG = SplitMix64(seed: parameters.seed ^ 0x7E1A_5EA1_0000_0044)
        startMillis = time.millis
        if record {
            generated = []
            diagram = DiagramLog(replicas: parameters.replicaCount)
        }
    }

    /// Runs the whole simulation and its checks.
    public func run() -> SimulationResult { run(afterSetUp: { _ in }, beforeClose: { _ in }) }

    /// Runs with hooks: `afterSetUp` may schedule events (a scenario's script), `beforeClose`
    /// inspects the replicas once the run is over (a scenario's expectations).
    func run(afterSetUp: (Simulator) -> Void, beforeClose: (Simulator) -> Void) -> SimulationResult {
        log("params \(parameters)")
        var loopTraceHash = ""
        do {
            try setUp()
            afterSetUp(self)
            try loop()
            var atLoopEnd = traceHasher
            loopTraceHash = Digest256Hex.hex(atLoopEnd.finalize())
            if failures.isEmpty && finalChecksMode == .all { try finalChecks() }
        } catch {
            failures.append("unexpected error: \(error)")
        }
        noteFailureTime()
        beforeClose(self)
        noteFailureTime()
        let digest = (try? nodes.first?.replica?.digest().description) ?? nil
        for node in nodes { (node.store as? LMDBEnvironment)?.close() }
        let hash = Digest256Hex.hex(traceHasher.finalize())
        diagram?.endMillis = time.millis - startMillis
        diagram?.failureMillis = failureMillis
        if let first = failures.first { diagram?.failure = first }  // else a scenario expectation's, if any
        return SimulationResult(parameters: parameters, failures: failures, traceHash: hash, trace: trace,
                                events: events, virtualMillis: time.millis - startMillis, faults: faults,
                                digest: digest ?? "", rejectedChanges: checkers.revocation.rejectedChanges,
                                failureMillis: failureMillis, generated: generated, diagram: diagram,
                                equivalentWays: checkers.equivalence.ways, loopTraceHash: loopTraceHash)
    }

    /// Remembers when the first failure was found (the diagram highlights it there).
    func noteFailureTime() {
        if failureMillis == nil && !failures.isEmpty { failureMillis = time.millis - startMillis }
    }

    /// Appends a drawn event to the recorded event list (seeded runs only: a scenario's steps are
    /// its own list).
    func record(_ replica: Int?, _ action: Scenario.Action) {
        guard scenario == nil, generated != nil else { return }
        generated!.append(Scenario.Step(line: 0, at: time.millis - startMillis, replica: replica, action: action, text: ""))
    }

    func setUp() throws {
        for i in 0..<parameters.replicaCount {
            let skew = parameters.skewMillisMax == 0 ? 0 : Int64.random(in: -parameters.skewMillisMax...parameters.skewMillisMax, using: &g)
            let store: any KeyValueStore
            var directory: String?
            if let base = lmdbBase {
                directory = "\(base)/seed-\(parameters.seed)-r\(i)"
                store = try LMDBEnvironment(directory: directory!, tables: Tables.all, mapSizeBytes: 8 << 20, durable: false)
            } else {
                store = MemoryStore()
            }
            let identity = try share.identity(seed: drawBytes(Identity.seedByteCount))
            let node = SimNode(index: i, store: store, skew: skew, lmdbDirectory: directory, identity: identity,
                               verifier: verifier)
            node.share = share
            try node.boot(time: time, seed: parameters.seed)
            nodes.append(node)
            if skew != 0 { count("skew"); record(i, .skew(skew)) }
        }
        // Replica 0 founds the household as its owner and grants every other replica's account; the
        // others start as joined members holding the genesis (creation, claim, grants).
        if let h = parameters.hostileReplica, h > 0, h < nodes.count {
            hostile = HostileState(node: h, strategies: parameters.hostileStrategies)
            checkers.allowance.hostileKey = nodes[h].member.publicKey.bytes
            for strategy in parameters.hostileStrategies { count(strategy.countKey + ".drawn") }
        }
        let owner = nodes[0]
        let founder = owner.replica!
        recovery = try Self.recoveryIdentity(seed: parameters.seed, share: share)
        household = try founder.createHousehold(name: "Household \(parameters.seed)", owner: owner.member.publicKey.bytes,
                                                salt: drawBytes(16), recovery: recovery.publicKey.bytes,
                                                timeZone: parameters.householdZone, sign: { [share] in share.sign($0, by: owner.member) }).id
        if let zone = parameters.householdZone { checkers.allowance.zonesUsed.insert(zone) }
        let grants = nodes.dropFirst().map { node in
            Operation.grant(share.grant(by: owner.member, node.member.publicKey, name: node.name, household: household,
                                        atMillis: time.millis + owner.skew))
        }
        if !grants.isEmpty { try founder.commitMembership(grants) }
        try recordLocalChanges(owner, after: 0)
        log("household \(household.hex.prefix(8)) owned by r0 \(owner.member.publicKey.fingerprint); members " +
            nodes.dropFirst().map { "\($0.name) \($0.member.publicKey.fingerprint)" }.joined(separator: ", "))
        let genesis = try founder.batch(notCoveredBy: [:])
        for node in nodes.dropFirst() { try node.replica!.applyRemote(genesis) }
        for node in nodes {
            queue.schedule(at: time.millis + jitter(parameters.operationIntervalMillis), .operation(node.index))
            queue.schedule(at: time.millis + jitter(parameters.gossipIntervalMillis), .gossip(node.index))
        }
        queue.schedule(at: startMillis + parameters.faultPhaseMillis, .heal)
        if parameters.relays { try setUpRelay() }
        queue.schedule(at: time.millis + Self.checkMillis, .check)
        // At most two revocations, at random times of the fault phase.
        for _ in 0..<2 where nodes.count > 1 && chance(parameters.revocationPerMille) {
            queue.schedule(at: startMillis + Int64.random(in: 1..<max(2, parameters.faultPhaseMillis), using: &g), .revoke)
        }
        // At most two owner transfers (a member recovers ownership with the recovery secret).
        for _ in 0..<2 where nodes.count > 1 && chance(parameters.revocationPerMille / 2) {
            queue.schedule(at: startMillis + Int64.random(in: 1..<max(2, parameters.faultPhaseMillis), using: &g), .recover)
        }
        if let hostile, parameters.hostileRevoked || hostile.ignoresRevocation {
            let phase = parameters.faultPhaseMillis
            queue.schedule(at: startMillis + Int64.random(in: max(1, phase / 4)...max(1, phase * 3 / 4), using: &g), .hostileRevocation)
        }
    }

    /// Virtual time between two checkpoints of the run's checkers.
    static let checkMillis: Int64 = 500

    /// Virtual time after the fault phase within which everything must have converged.
    static let quietMillisMax: Int64 = 600_000

    func loop() throws {
        let deadline = startMillis + parameters.faultPhaseMillis + Self.quietMillisMax
        while let (at, event) = queue.pop() {
            precondition(at >= time.millis, "time never goes backwards")
            time.millis = at
            events += 1
            if at > deadline {
                failures.append(ConvergenceChecker.notQuiet(within: Self.quietMillisMax))
                return
            }
            if scenario != nil, case .gossip = event, try skipIdle(now: at, tick: event) { continue }
            try handle(event)
            if !failures.isEmpty { noteFailureTime(); return }
            if !faultsOn && isQuiet() { log("quiet"); return }
        }
    }

    func handle(_ event: Event) throws {
        switch event {
        case .operation where scenario != nil:
            break
        case .scripted(let step):
            try runScripted(step)
        case .operation(let i):
            try userOperation(nodes[i])
            if faultsOn {
                queue.schedule(at: time.millis + jitter(parameters.operationIntervalMillis), .operation(i))
                if chance(parameters.crashPerMille), nodes[i].isUp { crash(nodes[i]) }
                try accountChangeTick(nodes[i])
            }
        case .gossip(let i):
            if faultsOn && chance(parameters.partitionPerMille) { changePartition() }
            try gossip(from: nodes[i])
            queue.schedule(at: time.millis + jitter(parameters.gossipIntervalMillis), .gossip(i))
        case .deliver(let id, let to, let bytes, let sentAt):
            try deliver(bytes, connection: id, to: to, sentAt: sentAt)
            if let c = connections[id] { try checkpoint([c.ends[to]]) }
        case .closed(let id, let to):
            try closed(connection: id, to: to)
        case .restart(let i):
            try restart(nodes[i])
        case .idleCheck(let id, let lastSeen):
            idleCheck(connection: id, lastSeen: lastSeen)
        case .heal:
            faultsOn = false
            record(nil, .heal)
            diagram?.healMillis = time.millis - startMillis
            partitioned.removeAll()
            log("heal: faults off, partitions healed, crashed replicas restart, switched accounts switch back")
            for node in nodes where node.isFrozen { switchBack(node) }
            for node in nodes where !node.isUp { queue.schedule(at: time.millis + 1, .restart(node.index)) }
            if relay != nil { healRelay() }
            if scenario == nil { isolatedPairs.removeAll() }
        case .check:
            try checkpoint()
            queue.schedule(at: time.millis + Self.checkMillis, .check)
        case .revoke:
            try revoke()
        case .recover:
            try recover()
        case .hostileRevocation where scenario != nil:
            break  // a scenario scripts the partition and the revocation itself
        case .hostileRevocation:
            try revokeHostile()
        case .relayDeliver(let link, let toRelay, let bytes):
            try relayDeliver(bytes, link: link, toRelay: toRelay)
        case .relayClosed(let link, let toRelay):
            try relayClosed(link: link, toRelay: toRelay)
        case .relayFault:
            try relayFault()
        }
    }

    // MARK: Helpers

    func chance(_ perMille: Int) -> Bool { perMille > 0 && Int.random(in: 0..<1000, using: &g) < perMille }

    func jitter(_ mean: Int64) -> Int64 { Int64.random(in: max(1, mean / 2)...max(1, mean * 3 / 2), using: &g) }

    /// `n` bytes from the run's generator.
    func drawBytes(_ n: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        while bytes.count < n { withUnsafeBytes(of: g.next().littleEndian) { bytes += $0 } }
        return Array(bytes.prefix(n))
    }

    func count(_ fault: String) { faults[fault, default: 0] += 1 }

    /// The member keys over a per-member limit on every one of `nodes` (none when one is down).
    func floodingOnEvery(_ nodes: [SimNode]) -> Set<[UInt8]> {
        var result: Set<[UInt8]>?
        for node in nodes {
            guard let flooding = try? node.floodingMembers() else { return [] }
            result = result.map { $0.intersection(flooding) } ?? flooding
        }
        return result ?? []
    }

    func isQuiet() -> Bool {
        // Sessions between replicas that hold the same changes move nothing, so open connections
        // don't matter once every version vector is equal.
        guard nodes.allSatisfy(\.isUp) else { return false }
        // A revoked replica is quiet once it knows it is revoked and every other replica refuses
        // it (it serves nobody, and asks in only to be refused). One that some replica would let
        // in (a recovery voided its revocation there) is not: it gets in and learns why.
        let stopped = stoppedNodes
        let honest = honestNodes(stopped: stopped)
        // The honest ones hold what the hostile member wrote itself (what it crafted may be refused);
        // once it is revoked and ignores it, what it wrote up to its revocation's cut (its later
        // changes get through only while a member lags, and count nowhere).
        // (Not once every honest replica holds it over the origin limit: then one may have stored
        // 257 others of its origins first and refuse its own, which counts for nothing anyway.)
        let floodingEverywhere = floodingOnEvery(honest)
        if let state = hostile, let own = nodes[state.node].replica?.replicaID,
           !floodingEverywhere.contains(nodes[state.node].member.publicKey.bytes) {
            let made = (try? nodes[state.node].versionVector()[own]) ?? nil
            if !stopped.contains(state.node) {
                guard honest.allSatisfy({ ((try? $0.versionVector()[own]) ?? nil) == made }) else { return false }
            } else if state.ignoresRevocation {
                let due = min(made ?? 0, state.cut?[own] ?? 0)
                guard honest.allSatisfy({ (((try? $0.versionVector()[own]) ?? nil) ?? 0) >= due }) else { return false }
            }
        }
        for i in stopped {
            guard ignoresRevocation(i) || ((try? nodes[i].listsItselfRevoked()) ?? false) else { return false }
            let key = nodes[i].member.publicKey.bytes
            guard honest.allSatisfy({ (try? $0.revokedKeys().contains(key)) ?? false }) else { return false }
        }
        // Equal vectors and equal hash chains: the same changes, every version of them; but for
        // the origins of a member over `Limits.originsPerMemberMax` on EVERY honest replica (each
        // stores the first `Limits.originsPerMemberStoredMax` it receives, so they may hold
        // different ones; none counts). Over the limit on some only is not quiet: the others
        // still count that member's changes until its further origins reach them.
        guard let first = honest.first?.heads() else { return false }
        if honest.dropFirst().allSatisfy({ $0.heads() == first }) { return true }
        guard hostile != nil, !floodingEverywhere.isEmpty,
              honest.allSatisfy({ (try? $0.floodingMembers()) == floodingEverywhere }) else { return false }
        let flooded = honest.reduce(into: Set<ReplicaID>()) { $0.formUnion((try? $1.replica?.originsOfFloodingMembers()) ?? []) }
        let kept = first.filter { !flooded.contains($0.key) }
        return honest.dropFirst().allSatisfy { $0.heads()?.filter { !flooded.contains($0.key) } == kept }
    }
}

import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica
import KidLedgerProtocol
import KidLedgerSecurity

/// A running scenario: its script and what it has printed so far.
final class ScenarioState {
    let scenario: Scenario
    var timeline: [String] = []
    /// Sessions opened by a laptop of another household that the replica refused.
    var refused = 0
    var strangers = 0
    /// Children named by `add-child NAME as LABEL`, by label.
    var labels: [String: RecordID] = [:]
    /// Transactions made by steps labelled `as LABEL` (a batch's first), by label: `undo @LABEL`.
    var operations: [String: RecordID] = [:]
    /// The label of the step running now, if it has one.
    var stepLabel: String?

    /// Whether the timeline shows the ends of sessions that moved nothing (`--verbose`).
    let verbose: Bool

    init(_ scenario: Scenario, verbose: Bool = false) {
        self.scenario = scenario
        self.verbose = verbose
    }

    /// Engine trace lines worth showing in the timeline: sessions ending, crashes, restarts, heals.
    /// A session end that sent and applied nothing (a gossip tick between replicas holding the
    /// same changes) is shown only when verbose: what one end applies the other sent, so both
    /// ends of a no-op session say so.
    func engineLine(_ line: String) {
        let shown = [" finished:", " failed:", " restart", " dropped:", "heal:", " restored", " switches back", " learns it from the refusal",
                     " pays allowance:"]
        guard shown.contains(where: { line.contains($0) }) else { return }
        if !verbose && Self.isNoOpSessionEnd(line) { return }
        timeline.append(line)
    }

    static func isNoOpSessionEnd(_ line: String) -> Bool {
        line.contains(" finished: sent 0 applied 0 upToDate=true")
    }
}

/// The outcome of one scenario run.
public struct ScenarioResult: Sendable {
    /// One expectation and whether it held (with what was found when it did not).
    public struct Outcome: Sendable {
        public var expectation: Scenario.Expectation
        public var passed: Bool
        public var detail: String
    }

    /// The engine's run (its own checks' failures included).
    public var simulation: SimulationResult
    /// The timeline: the scripted steps and their outcomes, by virtual time, each line after the
    /// time it happened in milliseconds from the start (`t=310 …`, as in the engine trace).
    public var timeline: [String]
    /// The timeline as `kidledger-sim run` prints it: each time as a time of the run
    /// (``Scenario/clockText(_:)``: `day 1 00:00:00.310 …`).
    public var readableTimeline: [String] { timeline.map(Scenario.readable) }
    /// The expectations' results, in file order.
    public var outcomes: [Outcome]
    /// Whether every expectation and every engine check held.
    public var passed: Bool { simulation.passed && outcomes.allSatisfy(\.passed) }
}

extension Simulator {
    /// Network delay of a scenario (until it changes the delay; its gossip interval is `Scenario.gossipMillis`).
    static let scenarioDelayMillisMax: Int64 = 20

    /// The parameters of a scenario run: no random faults, operations or revocations.
    static func scenarioParameters(_ scenario: Scenario, seed: UInt64) -> SimulationParameters {
        SimulationParameters(seed: seed, replicaCount: scenario.replicas,
                             faultPhaseMillis: (scenario.steps.last?.at ?? 0) + 1,
                             operationIntervalMillis: 1_000, gossipIntervalMillis: scenario.gossipMillis,
                             delayMillisMax: scenarioDelayMillisMax, lossPerMille: 0, duplicationPerMille: 0,
                             reorderPerMille: 0, partitionPerMille: 0, crashPerMille: 0, staleRestorePerMille: 0,
                             skewMillisMax: 0, lineTopology: scenario.lineTopology, operationWeights: Array(repeating: 0, count: 9),
                             usesLMDB: scenario.usesLMDB, revocationPerMille: 0, accountChangePerMille: 0,
                             hostileReplica: scenario.hostileReplica, hostileStrategies: scenario.hostileStrategies,
                             relays: scenario.hasRelay)
    }

    /// Runs a scripted scenario: the engine's replicas, gossip and network, the script's steps
    /// instead of random operations and faults; after the last step everything heals (as after a
    /// fuzz run's fault phase), the run continues until quiet, then the engine's checks and the
    /// scenario's expectations run. `seed` overrides the scenario's own.
    /// `record` keeps the run's diagram; `plantedBug` is for testing the shrinker only; `verbose`
    /// keeps no-op session ends in the timeline; `skipIdle` off plays every idle gossip tick (for
    /// testing that skipping them changes no outcome).
    public static func runScenario(_ scenario: Scenario, seed: UInt64? = nil, keepTrace: Bool = false, record: Bool = false,
                                   plantedBug: PlantedBug? = nil, verbose: Bool = false) -> ScenarioResult {
        runScenario(scenario, seed: seed, keepTrace: keepTrace, record: record, plantedBug: plantedBug, verbose: verbose, skipIdle: true)
    }

    static func runScenario(_ scenario: Scenario, seed: UInt64?, keepTrace: Bool, record: Bool,
                            plantedBug: PlantedBug?, verbose: Bool, skipIdle: Bool) -> ScenarioResult {
        let base = scenario.usesLMDB ? TemporaryDirectory.make() : nil
        defer { if let base { TemporaryDirectory.remove(base) } }
        let simulator = Simulator(parameters: scenarioParameters(scenario, seed: seed ?? scenario.seed), keepTrace: keepTrace,
                                  lmdbBase: base, record: record, plantedBug: plantedBug)
        simulator.skipsIdle = skipIdle
        let state = ScenarioState(scenario, verbose: verbose)
        simulator.scenario = state
        var outcomes: [ScenarioResult.Outcome] = []
        let result = simulator.run(afterSetUp: { sim in
            let origins = sim.nodes.map { "\($0.name)=\(Self.hex16($0.replica?.replicaID.rawValue ?? 0).prefix(6))" }
            sim.note("replica origins at set-up (changes are sent in order of origin; a member takes an id derived from its key at its first change): "
                     + origins.joined(separator: " "))
            for (i, step) in scenario.steps.enumerated() { sim.queue.schedule(at: sim.startMillis + step.at, .scripted(i)) }
        }, beforeClose: { sim in
            outcomes = scenario.expectations.map { sim.evaluate($0, state) }
            for outcome in outcomes where !outcome.passed && sim.failureMillis == nil {
                sim.failureMillis = sim.time.millis - sim.startMillis
                sim.diagram?.failure = "line \(outcome.expectation.line): \(outcome.expectation.text) — found \(outcome.detail)"
            }
        })
        return ScenarioResult(simulation: result, timeline: state.timeline, outcomes: outcomes)
    }

    func note(_ text: String) {
        let timeline = scenario?.timeline
        log(text)
        scenario?.timeline = (timeline ?? []) + ["t=\(time.millis - startMillis) \(text)"]
    }

    func runScripted(_ index: Int) throws {
        guard let state = scenario else { return }
        let step = state.scenario.steps[index]
        let outcome: String
        if let r = step.replica {
            state.stepLabel = step.label
            defer { state.stepLabel = nil }
            outcome = try scriptedStep(nodes[r], step.action)
        } else {
            outcome = try networkStep(step.action)
        }
        note("\(step.text)  → \(outcome)")
    }

    // MARK: Steps on a replica

    func scriptedStep(_ node: SimNode, _ action: Scenario.Action) throws -> String {
        switch action {
        case .crash:
            guard node.isUp else { return "already down" }
            crash(node, scheduleRestart: false)
            return "down (only committed state survives)"
        case .restart, .restartStale:
            guard !node.isUp else { return "already up" }
            if action == .restartStale && node.staleCopy == nil {
                try restart(node, stale: false)
                return "up (no copy of its files was taken: restarted from its own files)"
            }
            return try restart(node, stale: action == .restartStale) ? "up from the copy of its files (later changes lost)" : "up"
        case .copyFiles:
            guard node.isUp else { return "refused: \(node.name) is down" }
            guard let memory = node.store as? MemoryStore else { return "refused: only replicas in memory copy their files" }
            node.staleCopy = memory.lazyCopy()
            log("\(node.name) copies its files")
            return "files copied"
        case .skew(let millis):
            node.skew = millis
            dropConnections(of: node, reason: "\(node.name) clock changed")
            if node.isUp { try node.boot(time: time, seed: parameters.seed) }
            count("skew")
            return "clock now \(millis >= 0 ? "+" : "")\(millis) ms"
        case .accountSwitch:
            guard !node.isFrozen else { return "already switched" }
            try switchAway(node)
            return "switched to account \(node.identity.publicKey.fingerprint): no changes, no sync, queued changes kept"
        case .accountBack:
            guard node.isFrozen else { return "not switched" }
            switchBack(node)
            return "back on account \(node.member.publicKey.fingerprint)"
        case .revoke(let target):
            guard let seen = try revoke(target, by: node.index) else {
                return "refused: \(node.name) is down, switched away, or not the owner as its replica sees it"
            }
            return "r\(target) revoked having seen \(Self.describe(seen))"
        case .recover:
            guard let epoch = try recover(node) else { return "refused: \(node.name) is down, switched away, revoked, or already the owner" }
            return "owner now (transfer epoch \(epoch)), signed with the recovery secret"
        case .secondGenesis:
            return try signSecondGenesis(node)
        case .growHousehold(let members):
            return try growHousehold(node, members: members)
        case .addRelay:
            return try addRelay(by: node)
        default:
            return try scriptedOperation(node, action)
        }
    }

    func dropConnections(of node: SimNode, reason: String) {
        for id in connections.keys.sorted() {
            guard let c = connections[id], c.ends.contains(node.index) else { continue }
            c.sessions[c.side(of: node.index)] = nil
            drop(connection: id, reason: reason)
        }
    }

    // long-function: one case per ledger operation of the scenario language: a table.
    /// A user's ledger operation; refusals are outcomes, not failures.
    func scriptedOperation(_ node: SimNode, _ action: Scenario.Action) throws -> String {
        guard let replica = node.replica else { return "refused: \(node.name) is down" }
        guard !node.isFrozen else { return "refused: attention required (switched to another account)" }
        if try knowsItIsRevoked(node) { return "refused: attention required (it knows it is revoked; exit 77)" }
        let before = try ownSequence(node)
        // As every ledger command does, it first pays the allowance periods due.
        var made = try payAllowances(node)
        var outcome = ""
        /// A child as the replica's resolver takes it; `@LABEL` is the child that step added.
        func child(_ query: String) throws(LedgerError) -> String {
            guard query.hasPrefix("@") else { return query }
            guard let id = scenario?.labels[String(query.dropFirst())] else { throw .unknownChild(query) }
            return id.hex
        }
        do {
            switch action {
            case .addChild(let name, let label):
                let c = try replica.addChild(name: name)
                if let label { scenario?.labels[label] = c.id }
                outcome = "added \(c.name) (\(c.id.hex.prefix(8)))"
            case .rename(let query, let name):
                let c = try replica.renameChild(try child(query), to: name)
                outcome = "now called \(c.name)"
            case .archive(let query), .restore(let query):
                let archive = action == .archive(query)
                let c = try replica.setArchived(try child(query), archive)
                outcome = "\(c.name) \(archive ? "archived" : "restored")"
            case .post(let query, let cents, let note):
                let p = try replica.post(try child(query), signedCents: cents, note: note, source: cents > 0 ? "give" : "take")
                made += [p.transaction.id]
                if let label = scenario?.stepLabel { scenario?.operations[label] = p.transaction.id }
                outcome = "\(p.childName) balance \(Money.format(cents: p.balanceCents)) (\(p.transaction.id.tail))"
            case .postAll(let cents, let note):
                let ps = try replica.postAll(signedCents: cents, note: note, source: cents > 0 ? "give-all" : "take-all")
                try madeBatch(ps.map(\.transaction.id), on: replica)
                made += ps.map(\.transaction.id)
                if let label = scenario?.stepLabel, let first = ps.first { scenario?.operations[label] = first.transaction.id }
                outcome = ps.map { "\($0.childName) \(Money.format(cents: $0.balanceCents))" }.joined(separator: ", ")
            case .undo, .undoLabelled:
                var target = UndoTarget.newest
                if case .undo(mine: true) = action { target = .mine }
                if case .undoLabelled(let label) = action {
                    guard let id = scenario?.operations[label] else { throw LedgerError.cannotUndo("@\(label) made no transaction (its step was refused)") }
                    guard try replica.containsTransaction(id) else { throw LedgerError.cannotUndo("\(node.name) does not hold @\(label) (\(id.tail)) yet") }
                    target = .entry(id)
                }
                let u = try undo(node, replica, target)
                made += u.entries.map(\.undo.id)
                outcome = u.entries.map {
                    "undid \($0.original.id.tail) (\(Money.format(cents: $0.original.amountCents))); \($0.childName) balance \(Money.format(cents: $0.balanceCents))"
                }.joined(separator: ", ")
            case .allowanceSet(let query, let cents, let every, let day):
                let schedule = try replica.setAllowance(try child(query), amountCents: cents, every: every, on: day, note: "allowance")
                let now = try payAllowances(node)
                made += now
                outcome = "\(schedule.childName) gets \(Money.format(cents: cents)) \(schedule.rule)" + (now.isEmpty ? "" : "; paid \(now.count) period\(now.count == 1 ? "" : "s")")
            case .allowanceStop(let query):
                let schedule = try replica.stopAllowance(try child(query))
                noteStop(schedule, by: node)
                outcome = "\(schedule.childName)'s allowance stopped"
            case .householdTimeZone(let zone):
                try replica.setHouseholdTimeZone(zone)
                checkers.allowance.zonesUsed.insert(zone)
                let now = try payAllowances(node)
                made += now
                outcome = "household zone \(zone)" + (now.isEmpty ? "" : "; paid \(now.count) period\(now.count == 1 ? "" : "s")")
            case .householdLimit(let cents):
                try replica.setHouseholdConfirmAbove(cents)
                outcome = "household limit " + Replica.limitText(cents)
            case .merge(let from, let into):
                let m = try replica.mergeChild(try child(from), into: try child(into))
                outcome = "\(m.from.name) (\(m.from.id.hex.prefix(8))) merged into \(m.into.name) (\(m.into.id.hex.prefix(8))): balance \(Money.format(cents: m.into.balanceCents))"
            case .unmerge(let query):
                let (c, was) = try replica.unmergeChild(try child(query))
                outcome = "\(c.name) (\(c.id.hex.prefix(8))) on its own again: balance \(Money.format(cents: c.balanceCents)); \(was.name) \(Money.format(cents: was.balanceCents))"
            default:
                preconditionFailure("not a ledger operation: \(action)")
            }
        } catch let error as LedgerError {
            outcome = "refused: \(error)"
        }
        if !outcome.hasPrefix("refused") {
            let step = Scenario.join(action.words(replica: node.index, replicas: nodes.count))
            diagram?.mark(.operation, node.index, at: time.millis - startMillis, label: "\(step) → \(outcome)")
        }
        try recordLocalChanges(node, after: before, acknowledging: made)
        return outcome
    }

    // MARK: Network steps

    func networkStep(_ action: Scenario.Action) throws -> String {
        switch action {
        case .sync(let a, let b):
            return try openSession(a, b)
        case .syncAll:
            var out: [String] = []
            for a in nodes.indices { for b in nodes.indices where b > a { out.append("r\(a)–r\(b) \(try openSession(a, b))") } }
            return out.isEmpty ? "nothing to sync" : out.joined(separator: "; ")
        case .partition(let group):
            partitioned = Set(group)
            count("partition")
            for id in connections.keys.sorted() {
                let c = connections[id]!
                if !canTalk(c.ends[0], c.ends[1]) { drop(connection: id, reason: "partition") }
            }
            return "\(group.sorted().map { "r\($0)" }.joined(separator: ",")) cut off from the rest"
        case .heal:
            partitioned.removeAll()
            return "partition healed"
        case .loss(let perMille):
            parameters.lossPerMille = perMille
            return "\(perMille)‰ of chunks lost"
        case .duplicate(let perMille):
            parameters.duplicationPerMille = perMille
            return "\(perMille)‰ of chunks delivered twice"
        case .reorder(let perMille):
            parameters.reorderPerMille = perMille
            return "\(perMille)‰ of chunks may overtake earlier ones"
        case .delay(let range):
            delayMillisMin = range.lowerBound
            parameters.delayMillisMax = range.upperBound
            return "one-way delay \(range.lowerBound)..\(range.upperBound) ms"
        case .foreignSync(let peer):
            return try foreignSync(peer)
        case .isolate(let group):
            for a in group { for b in group where b > a { isolatedPairs.insert(min(a, b) * 64 + max(a, b)) } }
            for id in connections.keys.sorted() {
                let c = connections[id]!
                if !canTalk(c.ends[0], c.ends[1]) { drop(connection: id, reason: "isolated") }
            }
            return "\(group.map { "r\($0)" }.joined(separator: ",")) meet only through the relay"
        case .relayMode(let mode):
            setRelayMode(mode)
            return "relay \(mode)"
        case .relayCrash:
            guard relay?.isUp == true else { return "already down" }
            crashRelay(wipe: false)
            return "relay down (its store survives)"
        case .relayRestart:
            guard relay?.isUp == false else { return "already up" }
            restartRelay()
            return "relay up"
        case .relayWipe:
            crashRelay(wipe: true)
            return "relay wiped: its store is empty"
        default:
            preconditionFailure("not a network step: \(action)")
        }
    }

    /// Opens a sync session from `a` to `b` now (as a gossip tick would).
    func openSession(_ a: Int, _ b: Int) throws -> String {
        if connections.values.contains(where: { $0.joins(a, b) }) { return "already syncing" }
        guard nodes[a].isUp, nodes[b].isUp else { return "unreachable: a replica is down" }
        guard canTalk(a, b) else { return "unreachable: partitioned" }
        guard !nodes[a].isFrozen, !nodes[b].isFrozen else { return "refused: an account is switched" }
        if let refusal = try handshake(nodes[a], nodes[b]) { return refusal }
        let id = nextConnection
        nextConnection += 1
        let initiator = SyncSession(role: .initiator, replica: nodes[a].replica!, household: household)
        let responder = SyncSession(role: .responder, replica: nodes[b].replica!, household: household)
        let connection = SimConnection(id: id, ends: [a, b], sessions: [initiator, responder])
        connections[id] = connection
        log("c\(id) r\(a) → r\(b) open (scripted)")
        try perform(responder.start(), connection: connection, side: 1)
        try perform(initiator.start(), connection: connection, side: 0)
        queue.schedule(at: time.millis + Self.idleMillisMax, .idleCheck(connection: id, lastSeen: 0))
        return "session c\(id) opened"
    }

    /// A laptop holding its own ledger (another household, one child) syncs with `peer`; the two
    /// sessions talk directly (no network faults) until both end.
    func foreignSync(_ peer: Int) throws -> String {
        guard let target = nodes[peer].replica else { return "unreachable: r\(peer) is down" }
        guard let state = scenario else { return "no scenario" }
        state.strangers += 1
        let owner = try Identity(seed: drawBytes(Identity.seedByteCount))
        let stranger = try Replica(store: MemoryStore(), clock: SkewedClock(time: time, skew: 0),
                                   random: SplitMix64(seed: parameters.seed &+ 0xF0_0000 &+ UInt64(state.strangers)),
                                   verifier: verifier)
        stranger.signer = owner.signer
        let other = try stranger.createHousehold(name: "Another household", owner: owner.publicKey.bytes, salt: drawBytes(16),
                                                sign: owner.sign)
        try stranger.addChild(name: "Stranger")
        let before = try target.digest()
        let ends = Self.pump(SyncSession(role: .initiator, replica: stranger, household: other.id),
                             SyncSession(role: .responder, replica: target, household: household), maxMessages: 10_000)
        let unchanged = try target.digest() == before
        let refused = (ends[1]?.hasPrefix("failed") ?? false) && unchanged
        if refused { state.refused += 1 }
        return "stranger laptop (household \(other.id.hex.prefix(8))): r\(peer) \(ends[1] ?? "no outcome"), stranger \(ends[0] ?? "no outcome"); r\(peer) \(unchanged ? "unchanged" : "CHANGED")"
    }

    // MARK: Expectations

    func evaluate(_ expectation: Scenario.Expectation, _ state: ScenarioState) -> ScenarioResult.Outcome {
        do {
            let problem = try check(expectation.check, state)
            return .init(expectation: expectation, passed: problem == nil, detail: problem ?? "")
        } catch {
            return .init(expectation: expectation, passed: false, detail: "error: \(error)")
        }
    }

    // long-function: one case per check of the scenario language: a table.
    /// nil when the check holds, else what was found.
    /// Ledger checks hold on `only` when given, else on every replica the run did not revoke.
    func check(_ check: Scenario.Check, _ state: ScenarioState, only: SimNode? = nil) throws -> String? {
        let up = nodes.filter(\.isUp)
        guard up.count == nodes.count else { return "replicas down: " + nodes.filter { !$0.isUp }.map(\.name).joined(separator: ",") }
        let checked = only.map { [$0] } ?? honestNodes
        func onEach(_ what: (SimNode, Replica) throws -> String?) throws -> String? {
            let found = try checked.compactMap { node in try what(node, node.replica!).map { "\(node.name): \($0)" } }
            return found.isEmpty ? nil : found.joined(separator: "; ")
        }
        func child(_ name: String, _ replica: Replica) throws -> (ChildSummary?, String?) {
            if name.hasPrefix("@") {
                // A label: the child its add-child step added, whatever it is called now.
                guard let id = state.labels[String(name.dropFirst())] else { return (nil, "no child labelled \(name) (its add-child step added none)") }
                let found = try replica.children(includeArchived: true).first { $0.id == id }
                return (found, found == nil ? "no child \(name) (\(id.hex.prefix(8)))" : nil)
            }
            let matches = try replica.children(includeArchived: true).filter { $0.name.lowercased() == name.lowercased() }
            if matches.count == 1 { return (matches[0], nil) }
            return (nil, matches.isEmpty ? "no child named \(name)" : "\(matches.count) children named \(name)")
        }
        switch check {
        case .on(let index, let inner):
            return try self.check(inner, state, only: nodes[index])
        case .converged:
            let digests = try checked.map { try $0.replica!.digest().description }
            return Set(digests).count == 1 ? nil : "digests differ: " + zip(checked, digests).map { "\($0.name)=\($1.prefix(12))" }.joined(separator: " ")
        case .balance(let name, let cents):
            return try onEach { _, r in
                let (c, problem) = try child(name, r)
                guard let c else { return problem }
                return c.balanceCents == Int128(cents) ? nil : "balance \(Money.format(cents: c.balanceCents))"
            }
        case .conflicts(let n):
            return try onEach { _, r in let k = try r.fieldConflicts().count; return k == n ? nil : "\(k) conflicts" }
        case .householdLimit(let cents):
            return try onEach { _, r in let k = try r.householdConfirmAbove(); return k == cents ? nil : "household limit " + Replica.limitText(k) }
        case .transactionCount(let n):
            return try onEach { _, r in let k = try r.counts().transactions; return k == n ? nil : "\(k) transactions" }
        case .archived(let name, let want):
            return try onEach { _, r in
                let (c, problem) = try child(name, r)
                guard let c else { return problem }
                return c.isArchived == want ? nil : "archived=\(c.isArchived)"
            }
        case .present(let note, let want):
            return try onEach { _, r in
                let has = try r.allTransactions().contains { $0.note == note }
                return has == want ? nil : (has ? "holds" : "lacks") + " a transaction noted \"\(note)\""
            }
        case .attention(let index, let want):
            let node = nodes[index]
            let mine = try node.replica!.members().first { $0.key == node.member.publicKey.bytes }
            let reason: String? = node.isFrozen ? "switched account" : mine == nil ? "not a member" : mine!.isRevoked ? "revoked" : nil
            return (reason != nil) == want ? nil : "attention required: \(reason ?? "no")"
        case .learnedFromRefusal(let index):
            return learnedFromRefusal.contains(index) ? nil : "r\(index) did not learn its revocation from a refusal"
        case .rejectedChanges(let n):
            return try onEach { _, r in let k = try r.membershipCounts().rejected; return k == n ? nil : "\(k) changes rejected" }
        case .secondGeneses(let n):
            return try onEach { _, r in
                let counts = try r.membershipCounts()
                if counts.secondGeneses != n { return "\(counts.secondGeneses) second geneses" }
                return (counts.ownerKeyCompromised != nil) == (n > 0) ? nil : "owner key warning \(counts.ownerKeyCompromised?.rawValue ?? "none")"
            }
        case .owner(let index):
            let key = nodes[index].member.publicKey.bytes
            return try onEach { _, r in try r.ownership()?.owner == key ? nil : "another owner than r\(index)" }
        case .refused(let n):
            return state.refused == n ? nil : "\(state.refused) stranger sessions refused"
        case .childCount(let n):
            return try onEach { _, r in let k = try r.children().count; return k == n ? nil : "\(k) children" }
        case .sameNames(let n):
            return try onEach { _, r in let k = Replica.sameNameGroups(try r.children()).count; return k == n ? nil : "\(k) same-name groups" }
        case .merged(let name, let into):
            return try onEach { _, r in
                let all = try r.children(includeArchived: true, includeMerged: true)
                func id(_ query: String) -> RecordID? {
                    if query.hasPrefix("@") { return state.labels[String(query.dropFirst())] }
                    let matches = all.filter { $0.name == query }
                    return matches.count == 1 ? matches[0].id : nil
                }
                guard let a = id(name), let b = id(into), let row = all.first(where: { $0.id == a }) else { return "no child \(name) or \(into)" }
                return row.mergedInto == b ? nil : "\(name) counts in \(row.mergedInto.map { String($0.hex.prefix(8)) } ?? "itself")"
            }
        case .allowancePayments(let name, let n):
            return try onEach { _, r in
                let (c, problem) = try child(name, r)
                guard let c else { return problem }
                let k = try r.history(child: c.id).filter { $0.transaction.source == Allowance.source }.count
                return k == n ? nil : "\(k) allowance payments"
            }
        }
    }
}

extension Simulator {
    /// Sixteen hex digits, zero-padded (so prefixes sort like the numbers).
    static func hex16(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 16 - digits.count)) + digits
    }
}

@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerTestSupport

/// Several replicas sharing one household, after random local work and random partial syncs.
struct RandomScenario {
    var sources: [Replica]
    var clocks: [TestClock]
    /// Every change any source made, each once.
    var changes: [Change]
    /// What happened, for failure messages.
    var operationsTried = 0
    var operationsDone = 0
}

/// Builds a scenario from `seed`: 2-4 replicas, clocks that collide in one millisecond and are
/// skewed against each other, local operations (swallowing expected errors) and partial syncs.
func makeRandomScenario(seed: UInt64) throws -> RandomScenario {
    var rng = SplitMix64(seed: seed)
    let count = 2 + Int(rng.next() % 3)
    var now: Int64 = 1_700_000_000_000
    let skewChoices: [Int64] = [0, 0, 0, 3, -2, 40, -25]
    let skews = (0..<count).map { _ in skewChoices[Int(rng.next() % UInt64(skewChoices.count))] }
    let clocks = skews.map { TestClock(now + $0) }
    var sources: [Replica] = []
    for i in 0..<count {
        sources.append(try makeReplica(seed: seed &* 1_000 &+ UInt64(i) &+ 1, clock: clocks[i]))
    }
    try sources[0].createHousehold(name: "Home")
    let founding = try sources[0].changeLog()
    for other in sources.dropFirst() {
        #expect(try other.receive(founding, now: now) == founding.map { _ in .applied })
    }

    var scenario = RandomScenario(sources: sources, clocks: clocks, changes: [])
    let names = ["Ava", "Ben", "cy", "AVA", "Dee"]
    let steps = 40 + Int(rng.next() % 40)
    for _ in 0..<steps {
        now += Int64(rng.next() % 3)   // 0: the same millisecond as the previous step
        for (i, clock) in clocks.enumerated() { clock.millis = now + skews[i] }
        let i = Int(rng.next() % UInt64(count))
        let replica = sources[i]
        let kids = try replica.children(includeArchived: true)
        let kid = kids.isEmpty ? nil : kids[Int(rng.next() % UInt64(kids.count))]
        let query = kid?.id.hex ?? "nobody"
        let amount = Int64(1 + rng.next() % 2_000)
        let roll = rng.next() % 100
        scenario.operationsTried += 1
        do {
            switch roll {
            case 0..<12: try replica.addChild(name: names[Int(rng.next() % UInt64(names.count))])
            case 12..<20: try replica.renameChild(query, to: names[Int(rng.next() % UInt64(names.count))])
            case 20..<28: try replica.setArchived(query, rng.next() % 2 == 0)
            case 28..<48: try replica.post(query, signedCents: amount, note: "give", source: "give")
            case 48..<58: try replica.post(query, signedCents: -amount, note: "", source: "take")
            case 58..<64: try replica.postAll(signedCents: rng.next() % 3 == 0 ? -amount : amount, note: "all", source: "give-all")
            case 64..<72: try replica.undo()
            case 72..<78:
                guard let kid else { break }
                let k = rng.next() % 4
                let t = LedgerTransaction(id: RecordID.v5(namespace: RecordID.namespaceKidLedger, name: "import:\(k)"),
                                          childID: kid.id, amountCents: amount, createdAtMillis: clocks[i].millis - Int64(rng.next() % 100),
                                          note: "imp", source: "import")
                try replica.commitLocal { _, _ in ([.addTransaction(t)], ()) }
            default:
                // Partial sync: offer each of another replica's changes with probability 1/2, in log order.
                let j = (i + 1 + Int(rng.next() % UInt64(count - 1))) % count
                for c in try sources[j].changeLog() where rng.next() % 2 == 0 {
                    _ = try replica.receive(c, now: clocks[i].millis)
                }
            }
            scenario.operationsDone += 1
        } catch let error as LedgerError {
            switch error {
            case .badName, .unchanged, .archived, .noActiveChildren, .nothingToUndo, .unknownChild, .restoreNameTaken: break
            default: Issue.record("unexpected ledger error \(error) (seed \(seed))")
            }
        }
    }

    for replica in sources { scenario.changes += try replica.ownChanges() }
    return scenario
}

@Suite("CRDT merge laws over random histories")
struct MergeLawTests {
    @Test("every delivery order converges; duplicates change nothing", arguments: UInt64(0)..<50)
    func convergence(seed: UInt64) throws {
        let scenario = try makeRandomScenario(seed: seed)
        let all = scenario.changes
        #expect(all.count > scenario.sources.count)
        var rng = SplitMix64(seed: seed ^ 0xDEAD_BEEF)

        // Logs agree: one (origin, sequence) is one change everywhere.
        var byKey: [String: Change] = [:]
        for replica in scenario.sources {
            for c in try replica.changeLog() {
                let key = "\(c.origin)/\(c.sequence)"
                if let seen = byKey[key] { #expect(seen == c) } else { byKey[key] = c }
            }
        }
        #expect(byKey.count == all.count)

        // 1. Random delivery with gap retry.
        let random = try makeReplica(seed: 10_001)
        let counts1 = try random.receiveShuffledWithRetry(all, using: &rng)
        #expect(counts1.applied == all.count && counts1.duplicate == 0)
        let reference = try random.view()
        #expect(reference.counts.deferred == 0)
        #expect(reference.counts.changes == all.count)

        // 2. Shuffled, respecting per-origin order: nothing is ever refused.
        let causal = try makeReplica(seed: 10_002)
        let outcomes = try causal.receive(causalShuffle(all, using: &rng))
        #expect(outcomes.allSatisfy { $0 == .applied })
        #expect(try causal.view() == reference)

        // 3. In (origin, sequence) order, the order of a full sync.
        let sorted = all.sorted { ($0.origin, $0.sequence) < ($1.origin, $1.sequence) }
        let inOrder = try makeReplica(seed: 10_003)
        #expect(try inOrder.receive(sorted).allSatisfy { $0 == .applied })
        #expect(try inOrder.view() == reference)

        // 4. Every change twice, randomly interleaved: each applies once, then is a duplicate.
        let twice = try makeReplica(seed: 10_004)
        let counts2 = try twice.receiveShuffledWithRetry(all + all, using: &rng)
        #expect(counts2.applied == all.count && counts2.duplicate == all.count)
        #expect(try twice.view() == reference)

        // 5. Idempotence: re-offering everything changes nothing.
        #expect(try random.receive(causalShuffle(all, using: &rng)).allSatisfy { $0 == .duplicate })
        #expect(try random.view() == reference)

        // 6. The sources themselves converge after exchanging everything.
        for (i, source) in scenario.sources.enumerated() {
            try source.receiveShuffledWithRetry(all, using: &rng, now: scenario.clocks[i].millis)
            #expect(try source.view() == reference, "source \(i) (seed \(seed))")
        }
    }

    @Test("views are consistent with the transaction set", arguments: UInt64(100)..<120)
    func derivedViewsAgree(seed: UInt64) throws {
        let scenario = try makeRandomScenario(seed: seed)
        let merged = try makeReplica(seed: 1)
        var rng = SplitMix64(seed: seed)
        try merged.receiveShuffledWithRetry(scenario.changes, using: &rng)
        let view = try merged.view()
        #expect(view.counts.transactions == view.transactions.count)
        #expect(view.counts.children == view.children.count)
        // Nothing is deferred, so history holds every transaction.
        #expect(view.history.count == view.transactions.count)
        #expect(Set(view.history.map(\.transaction)) == Set(view.transactions))
        // History is newest first.
        let times = view.history.map(\.transaction.createdAtMillis)
        #expect(times == times.sorted(by: >))
        for child in view.children {
            let own = view.history.filter { $0.transaction.childID == child.id }
            #expect(child.balanceCents == own.reduce(Int128(0)) { $0 + Int128($1.transaction.amountCents) })
            #expect(child.transactionCount == UInt64(own.count))
            #expect(try merged.balance(of: child.id) == child.balanceCents)
            #expect(try merged.history(child: child.id) == own)
        }
        // An original is marked reversed exactly when its undo entry is present, and it is applied once.
        let ids = Set(view.transactions.map(\.id))
        for entry in view.history {
            #expect(entry.isReversed == ids.contains(LedgerTransaction.undoID(for: entry.transaction.id)))
        }
        let undone = view.transactions.compactMap(\.reverses)
        #expect(undone.count == Set(undone).count)
    }
}

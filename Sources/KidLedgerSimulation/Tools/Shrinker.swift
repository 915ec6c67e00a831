/// Shrinks a failing scenario: removes replicas and steps (and resets settings) while the run
/// still fails the same way, within a bounded number of runs. Each candidate is written as text
/// and parsed back before it runs, so the result is exactly what `kidledger-sim run` of the
/// written file does.
public struct Shrinker {
    /// The smallest failing scenario found, and how it was found.
    public struct Outcome: Sendable {
        public var scenario: Scenario
        /// The first failure of its run.
        public var failure: String
        /// Scenario runs made.
        public var runs: Int
        /// Whether the run budget ran out before no removal helped any more.
        public var budgetExhausted: Bool
    }

    /// Engine seeds tried for each replica removal (the scenario's own, then the next ones).
    static let engineSeedsPerReplica: UInt64 = 4

    let plantedBug: PlantedBug?
    let maxRuns: Int
    let target: String
    var runs = 0
    var lastFailure: String

    /// The first failure of a scenario run (an engine check, else an expectation), nil when it passes.
    public static func firstFailure(_ result: ScenarioResult) -> String? {
        if let f = result.simulation.failures.first { return f }
        if let o = result.outcomes.first(where: { !$0.passed }) { return "\(o.expectation.text) — found \(o.detail)" }
        return nil
    }

    /// The kind of a failure: its text up to the first colon, with every word holding a digit
    /// (replica names, ids, counts) and every short transaction id (8 hex digits, which may hold
    /// none) blanked, so one bug's failure keeps its kind while it shrinks.
    public static func kind(_ failure: String) -> String {
        let head = failure.split(separator: ":", maxSplits: 1).first.map(String.init) ?? failure
        func blanked(_ word: Substring) -> Bool {
            word.contains(where: \.isNumber) || (word.count == 8 && word.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        }
        return head.split(separator: " ").map { blanked($0) ? "#" : String($0) }.joined(separator: " ")
    }

    /// Runs `scenario` as its text would run; returns its first failure (nil: it passes).
    public static func failure(of scenario: Scenario, seed: UInt64? = nil, plantedBug: PlantedBug?) -> String? {
        guard let parsed = try? Scenario.parse(scenario.text()) else { return "the scenario does not parse back" }
        return firstFailure(Simulator.runScenario(parsed, seed: seed, plantedBug: plantedBug))
    }

    /// Shrinks `scenario`, which fails with `failure`, within `maxRuns` runs.
    public static func shrink(_ scenario: Scenario, failure: String, plantedBug: PlantedBug?, maxRuns: Int = 400) -> Outcome {
        var shrinker = Shrinker(plantedBug: plantedBug, maxRuns: maxRuns, target: kind(failure), lastFailure: failure)
        var current = scenario
        var progress = true
        while progress && shrinker.runs < maxRuns {
            progress = false
            // Replicas, highest first (the others are renumbered). Fewer replicas draw the engine's
            // delays and gossip partners differently, so a few engine seeds are tried for each.
            var k = current.replicas - 1
            while k >= 0 && current.replicas > 1 && shrinker.runs < maxRuns {
                let candidate = current.removingReplica(k)
                for offset in 0..<Self.engineSeedsPerReplica where shrinker.runs < maxRuns {
                    var reseeded = candidate
                    reseeded.seed = candidate.seed &+ offset
                    if shrinker.accept(reseeded, into: &current) { progress = true; break }
                }
                k -= 1
            }
            if shrinker.removeSteps(&current) { progress = true }
            // Settings back to the defaults.
            var plain = current
            (plain.gossipMillis, plain.lineTopology, plain.usesLMDB) = (Scenario.defaultGossipMillis, false, false)
            if plain != current && shrinker.runs < maxRuns && shrinker.accept(plain, into: &current) { progress = true }
        }
        return Outcome(scenario: current, failure: shrinker.lastFailure, runs: shrinker.runs, budgetExhausted: shrinker.runs >= maxRuns)
    }

    /// Runs `candidate`; when it fails the same way, it becomes `current`.
    mutating func accept(_ candidate: Scenario, into current: inout Scenario) -> Bool {
        runs += 1
        guard let f = Self.failure(of: candidate, plantedBug: plantedBug), Self.kind(f) == target else { return false }
        current = candidate
        lastFailure = f
        return true
    }

    /// Delta debugging over the steps: remove chunks of half, a quarter, … down to one step at a
    /// time, keeping each removal after which the run still fails. Returns whether any step went.
    mutating func removeSteps(_ current: inout Scenario) -> Bool {
        var removedAny = false
        var chunk = max(1, current.steps.count / 2)
        while !current.steps.isEmpty && runs < maxRuns {
            chunk = min(chunk, current.steps.count)
            var removed = false
            var start = 0
            while start < current.steps.count && runs < maxRuns {
                var candidate = current
                candidate.steps.removeSubrange(start..<min(start + chunk, current.steps.count))
                if accept(candidate, into: &current) { removed = true } else { start += chunk }
            }
            removedAny = removedAny || removed
            if !removed {
                if chunk == 1 { break }
                chunk = max(1, chunk / 2)
            }
        }
        return removedAny
    }
}

extension Scenario {
    /// The scenario without replica `k`: its steps and expectations go, and so do syncs, revocations
    /// and foreign syncs that involve it; partitions lose it (and go when a side empties); the
    /// replicas above it are renumbered.
    public func removingReplica(_ k: Int) -> Scenario {
        var s = self
        s.replicas -= 1
        func map(_ i: Int) -> Int? { i == k ? nil : (i > k ? i - 1 : i) }
        s.steps = steps.compactMap { original in
            var step = original
            if let r = step.replica {
                guard let m = map(r) else { return nil }
                step.replica = m
            }
            switch step.action {
            case .sync(let a, let b):
                guard let x = map(a), let y = map(b) else { return nil }
                step.action = .sync(x, y)
            case .partition(let group):
                let left = group.compactMap(map)
                guard !left.isEmpty, left.count < s.replicas else { return nil }
                step.action = .partition(left)
            case .revoke(let target):
                guard let t = map(target), t != step.replica else { return nil }
                step.action = .revoke(t)
            case .foreignSync(let peer):
                guard let p = map(peer) else { return nil }
                step.action = .foreignSync(p)
            default:
                break
            }
            return step
        }
        s.expectations = expectations.compactMap { e in
            var moved = e
            switch e.check {
            case .attention(let r, let want):
                guard let m = map(r) else { return nil }
                moved.check = .attention(m, want)
            case .on(let r, let check):
                guard let m = map(r) else { return nil }
                moved.check = .on(m, check)
            case .learnedFromRefusal(let r):
                guard let m = map(r) else { return nil }
                moved.check = .learnedFromRefusal(m)
            default: break
            }
            return moved
        }
        return s
    }
}

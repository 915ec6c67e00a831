import KidLedgerDomain

/// Writing scenarios back as text (the shrinker's output), and turning a recorded seeded run into
/// an explicit scenario.
extension Scenario {
    /// The scenario as text; `Scenario.parse` reads it back to the same replicas, settings, steps
    /// and expectations. `comments` go first, each as a `#` line.
    public func text(comments: [String] = []) -> String {
        var lines = comments.map { "# " + $0 }
        lines.append("replicas \(replicas)")
        lines.append("seed \(seed)")
        if gossipMillis != Self.defaultGossipMillis { lines.append("gossip \(gossipMillis)") }
        if lineTopology { lines.append("topology line") }
        if usesLMDB { lines.append("store lmdb") }
        if let hostileReplica { lines.append((["hostile", "r\(hostileReplica)"] + hostileStrategies.map(\.rawValue)).joined(separator: " ")) }
        if hasRelay { lines.append("relay") }
        for step in steps {
            let label = step.label.map { " as \($0)" } ?? ""
            lines.append("at \(Self.durationText(step.at)) " + Self.join(step.action.words(replica: step.replica, replicas: replicas)) + label)
        }
        for e in expectations { lines.append("expect " + Self.join(e.check.words)) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Words joined by spaces, quoted where the tokenizer needs it.
    static func join(_ words: [String]) -> String {
        words.map { w in w.isEmpty || w.contains(where: { " \t#".contains($0) }) ? "\"\(w)\"" : w }.joined(separator: " ")
    }

    /// An amount as the parser reads it (`1.25`).
    static func amountText(_ cents: Int64) -> String {
        String(Money.format(cents: Int64(cents.magnitude)).drop { $0 == "$" })
    }

    /// A per-mille rate as a percentage with one decimal at most (`25` → `2.5`).
    static func percentText(_ perMille: Int) -> String {
        perMille % 10 == 0 ? "\(perMille / 10)" : "\(perMille / 10).\(perMille % 10)"
    }

    /// The explicit event list of a recorded seeded run (``SimulationResult/generated``): the
    /// network settings it drew, then every user operation and fault at its virtual time.
    public static func eventList(_ result: SimulationResult) -> Scenario {
        let p = result.parameters
        var s = Scenario()
        s.replicas = p.replicaCount
        s.seed = p.seed
        s.gossipMillis = min(max(p.gossipIntervalMillis, 10), 60_000)
        s.lineTopology = p.lineTopology
        s.usesLMDB = p.usesLMDB
        s.hostileReplica = p.hostileReplica
        s.hostileStrategies = p.hostileStrategies
        var setup: [Action] = [.delay(1...max(1, p.delayMillisMax))]
        if p.lossPerMille > 0 { setup.append(.loss(perMille: p.lossPerMille)) }
        if p.duplicationPerMille > 0 { setup.append(.duplicate(perMille: p.duplicationPerMille)) }
        if p.reorderPerMille > 0 { setup.append(.reorder(perMille: p.reorderPerMille)) }
        s.steps = setup.map { Step(line: 0, at: 0, replica: nil, action: $0, text: "") } + (result.generated ?? [])
        return s
    }
}

extension Scenario.Action {
    /// The action's words in the scenario format (`replica` is the step's, `replicas` the count).
    func words(replica: Int?, replicas: Int) -> [String] {
        let r = replica.map { "r\($0)" } ?? "r?"
        switch self {
        case .addChild(let name, let label): return [r, "add-child", name] + (label.map { ["as", $0] } ?? [])
        case .rename(let child, let name): return [r, "rename", child, name]
        case .archive(let child): return [r, "archive", child]
        case .restore(let child): return [r, "restore", child]
        case .post(let child, let cents, let note):
            return [r, cents > 0 ? "give" : "take", child, Scenario.amountText(cents)] + (note.isEmpty ? [] : ["note", note])
        case .postAll(let cents, let note):
            return [r, cents > 0 ? "give-all" : "take-all", Scenario.amountText(cents)] + (note.isEmpty ? [] : ["note", note])
        case .undo(let mine): return [r, "undo"] + (mine ? ["mine"] : [])
        case .undoLabelled(let label): return [r, "undo", "@" + label]
        case .sync(let a, let b): return ["sync", "r\(a)", "r\(b)"]
        case .syncAll: return ["sync", "all"]
        case .partition(let group):
            let rest = (0..<replicas).filter { !group.contains($0) }
            return ["partition", group.map { "r\($0)" }.joined(separator: ","), "|", rest.map { "r\($0)" }.joined(separator: ",")]
        case .heal: return ["heal"]
        case .loss(let p): return ["loss", Scenario.percentText(p)]
        case .duplicate(let p): return ["duplicate", Scenario.percentText(p)]
        case .reorder(let p): return ["reorder", Scenario.percentText(p)]
        case .delay(let range): return ["delay", "\(range.lowerBound)..\(range.upperBound)"]
        case .crash: return [r, "crash"]
        case .restart: return [r, "restart"]
        case .restartStale: return [r, "restart", "stale"]
        case .copyFiles: return [r, "copy-files"]
        case .skew(let millis): return [r, "skew", millis >= 0 ? "+\(millis)" : "\(millis)"]
        case .accountSwitch: return [r, "account-switch"]
        case .accountBack: return [r, "account-back"]
        case .revoke(let target): return [r, "revoke", "r\(target)"]
        case .recover: return [r, "recover"]
        case .secondGenesis: return [r, "second-genesis"]
        case .growHousehold(let n): return [r, "grow-household", "\(n)"]
        case .foreignSync(let peer): return ["foreign-sync", "r\(peer)"]
        case .allowanceSet(let child, let cents, let every, let day):
            let on = day.map { every == .week ? Allowance.weekdayNames[Int($0) - 1] : String($0) }
            return [r, "allowance-set", child, Scenario.amountText(cents), every.name] + (on.map { ["on", $0] } ?? [])
        case .allowanceStop(let child): return [r, "allowance-stop", child]
        case .householdTimeZone(let zone): return [r, "household-timezone", zone]
        case .householdLimit(let cents): return [r, "household-limit", cents == HouseholdLimit.neverCents ? "never" : Scenario.amountText(cents)]
        case .merge(let from, let into): return [r, "merge", from, "into", into]
        case .unmerge(let child): return [r, "unmerge", child]
        case .addRelay: return [r, "add-relay"]
        case .isolate(let group): return ["isolate"] + group.map { "r\($0)" }
        case .relayMode(.withhold(let target)): return ["relay", "withhold", "r\(target)"]
        case .relayMode(let mode): return ["relay", mode.description]
        case .relayCrash: return ["relay", "crash"]
        case .relayRestart: return ["relay", "restart"]
        case .relayWipe: return ["relay", "wipe"]
        }
    }
}

extension Scenario.Check {
    /// The expectation's words after `expect`.
    var words: [String] {
        func signed(_ cents: Int64) -> String { cents == 0 ? "0" : (cents < 0 ? "-" : "") + Scenario.amountText(cents) }
        switch self {
        case .converged: return ["converged"]
        case .balance(let child, let cents): return ["balance", child, signed(cents)]
        case .conflicts(let n): return ["conflicts", "\(n)"]
        case .householdLimit(let cents): return ["household-limit", cents == HouseholdLimit.neverCents ? "never" : Scenario.amountText(cents)]
        case .transactionCount(let n): return ["transaction-count", "\(n)"]
        case .attention(let r, let want): return ["attention", "r\(r)", "\(want)"]
        case .archived(let child, let want): return ["child", child, "archived", "\(want)"]
        case .present(let note, let want): return [want ? "present" : "absent", note]
        case .refused(let n): return ["refused", "\(n)"]
        case .on(let r, let check): return check.words + ["on", "r\(r)"]
        case .learnedFromRefusal(let r): return ["learned-from-refusal", "r\(r)"]
        case .rejectedChanges(let n): return ["rejected-changes", "\(n)"]
        case .allowancePayments(let child, let n): return ["allowance-payments", child, "\(n)"]
        case .childCount(let n): return ["children", "\(n)"]
        case .merged(let child, let into): return ["merged", child, "into", into]
        case .sameNames(let n): return ["same-names", "\(n)"]
        case .secondGeneses(let n): return ["second-geneses", "\(n)"]
        case .owner(let r): return ["owner", "r\(r)"]
        }
    }
}

extension Scenario {
    /// A time of the run, `millis` after its start, as the timeline shows it: the day (the run
    /// starts on day 1 at 00:00) and the time of day, with seconds and milliseconds only when
    /// they are not zero: `day 1 00:00`, `day 2 14:30`, `day 1 00:00:01.5` is written
    /// `day 1 00:00:01.500`, `day 1 00:01:30`. A step `at 1d14h30m` runs at `day 2 14:30`.
    public static func clockText(_ millis: Int64) -> String {
        let m = max(0, millis)
        let day = m / 86_400_000 + 1, hours = m / 3_600_000 % 24, minutes = m / 60_000 % 60
        let seconds = m / 1_000 % 60, rest = m % 1_000
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        var text = "day \(day) \(two(hours)):\(two(minutes))"
        if seconds != 0 || rest != 0 { text += ":\(two(seconds))" }
        if rest != 0 { text += "." + (rest < 10 ? "00" : rest < 100 ? "0" : "") + "\(rest)" }
        return text
    }

    /// A timeline line (`t=MILLIS …`) with its time as ``clockText(_:)`` writes it; any other
    /// line unchanged.
    static func readable(_ line: String) -> String {
        guard line.hasPrefix("t="), let space = line.firstIndex(of: " "),
              let millis = Int64(line[line.index(line.startIndex, offsetBy: 2)..<space]) else { return line }
        return clockText(millis) + line[space...]
    }
}

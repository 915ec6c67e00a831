import KidLedgerDomain
import KidLedgerInMemory

/// A hand-written simulation scenario: replicas, scripted events at virtual times, expectations
/// checked once the run is quiet. See docs/SIMULATOR.md for the format.
public struct Scenario: Sendable, Equatable {
    /// One scripted action.
    public enum Action: Sendable, Equatable {
        /// A new child; `label` (from `as LABEL`) names it for later steps (`@LABEL`).
        case addChild(String, label: String?)
        case rename(String, String)
        case archive(String)
        case restore(String)
        case post(child: String, cents: Int64, note: String)
        case postAll(cents: Int64, note: String)
        /// `undo` (the newest entry) or `undo mine` (the replica's own newest, as `undo --mine`).
        case undo(mine: Bool)
        /// `undo @LABEL`: the transaction an earlier step labelled `as LABEL` made (a give-all's
        /// or take-all's: its whole batch), as `undo ENTRY_ID`.
        case undoLabelled(String)
        /// A sync session between two replicas (opened now).
        case sync(Int, Int)
        /// A sync session between every pair of replicas.
        case syncAll
        /// Replicas in the group on one side, all others on the other.
        case partition([Int])
        case heal
        case loss(perMille: Int)
        case duplicate(perMille: Int)
        case reorder(perMille: Int)
        case delay(ClosedRange<Int64>)
        case crash
        case restart
        /// Restart from the copy of its files the replica took last (`copy-files`), losing what came after.
        case restartStale
        /// The replica copies its files now (a backup a later `restart stale` comes back from).
        case copyFiles
        case skew(Int64)
        case accountSwitch
        case accountBack
        /// The step's replica revokes a member: refused at run time unless it is the owner as
        /// its own replica sees it (r0, or the member that recovered ownership).
        case revoke(Int)
        /// The step's replica recovers ownership with the household's recovery secret.
        case recover
        /// The step's replica holds the genesis owner's key (a thief on the stolen owner laptop,
        /// issue 39): it signs a second creation record of the household with that key (an
        /// earlier creation time, a recovery key of its own) and a transfer to a key of its own
        /// signed with that recovery key, in a change under a fresh origin the owner key claims,
        /// and puts it in its log, so its sessions carry it. Refused unless it holds the owner key.
        case secondGenesis
        /// The step's replica, the owner, grants this many fresh member keys, and each of them
        /// claims `Limits.originsPerMemberMax` origins (a change each, with its signed head) that
        /// reach the owner's replica as if those laptops had synced to it: the largest household
        /// the per-member limits allow, for a recovery during it (issue 39).
        case growHousehold(Int)
        /// A laptop that already holds its own ledger (another household, with a child of its own)
        /// opens a sync session with the replica: the replica must refuse and nothing is written.
        case foreignSync(Int)
        /// The replica sets a child's allowance (`on`: a weekday 1...7 or a day 1...28, nil: the default).
        case allowanceSet(child: String, cents: Int64, every: AllowanceRule.Every, on: Int64?)
        /// The replica stops a child's allowance.
        case allowanceStop(String)
        /// The replica sets the household's time zone (a ``SimZones`` name).
        case householdTimeZone(String)
        /// The replica sets the household's limit for asking first (cents; 0: never ask).
        case householdLimit(Int64)
        /// The replica merges the first child into the second (`child merge FROM INTO`).
        case merge(String, into: String)
        /// The replica undoes a merge: the child counts on its own again (`child unmerge CHILD`).
        case unmerge(String)
        /// The replica, the owner, adds the scenario's relay (`rX add-relay`).
        case addRelay
        /// These replicas never meet each other directly from now on (`isolate rA rB …`): they
        /// reach each other only through the relay (a `heal` does not undo it).
        case isolate([Int])
        /// The relay turns hostile in a mode, or honest again (`relay MODE`).
        case relayMode(RelayMode)
        /// The relay crashes (`relay crash`), restarts (`relay restart`) or loses its store (`relay wipe`).
        case relayCrash, relayRestart, relayWipe
    }

    /// One scripted step: at a virtual time (ms from the start), on a replica (network steps: nil).
    public struct Step: Sendable, Equatable {
        public var line: Int
        public var at: Int64
        public var replica: Int?
        public var action: Action
        public var text: String
        /// The label a give, take, give-all or take-all step names its transaction by (`as LABEL`),
        /// for a later `undo @LABEL`.
        public var label: String? = nil
    }

    /// What must hold once the run is quiet.
    public indirect enum Check: Sendable, Equatable {
        /// The replicas the run did not revoke have one digest (a revoked one is stopped once
        /// refused: it keeps its stale ledger).
        case converged
        /// A ledger check (balance, transaction count, conflicts, child archived, present or
        /// absent) on one replica only; without it such a check holds on every replica the run
        /// did not revoke.
        case on(Int, Check)
        case balance(String, Int64)
        case conflicts(Int)
        /// The household's limit for asking first, in cents (0: never ask).
        case householdLimit(Int64)
        case transactionCount(Int)
        case attention(Int, Bool)
        case archived(String, Bool)
        case present(String, Bool)
        case refused(Int)
        /// The replica learnt its revocation from a peer's refusal (the revocation it carried was
        /// recorded: it did not know it before).
        case learnedFromRefusal(Int)
        /// Every replica the run did not revoke counts this many changes rejected by the
        /// revocation rule (they hold them, and they count nowhere).
        case rejectedChanges(Int)
        /// The child holds this many allowance payments (transactions of source "allowance").
        case allowancePayments(String, Int)
        /// `children` lists this many children (active ones that were not merged into another).
        case childCount(Int)
        /// The first child was merged into the second: the second is the first's effective child.
        case merged(String, into: String)
        /// `children` flags this many groups of children with one name up to case and accents.
        case sameNames(Int)
        /// Every replica the run did not revoke counts this many second geneses (creation records
        /// of the household the owner key signed that are not the pinned genesis) and, when more
        /// than none, warns that the owner key signed one.
        case secondGeneses(Int)
        /// Every replica the run did not revoke names this replica's member as the owner.
        case owner(Int)
    }

    public struct Expectation: Sendable, Equatable {
        public var line: Int
        public var check: Check
        public var text: String
    }

    public var replicas = 2
    public var seed: UInt64 = 1
    /// Mean virtual milliseconds between a replica's gossip attempts (`gossip MS`).
    public var gossipMillis: Int64 = Scenario.defaultGossipMillis
    public static let defaultGossipMillis: Int64 = 300
    /// Whether replicas only reach their neighbours in a line (`topology line`).
    public var lineTopology = false
    /// Whether replicas keep their state in LMDB files (`store lmdb`) rather than in memory.
    public var usesLMDB = false
    /// The hostile member's replica (`hostile rN [STRATEGY ...]`; never r0, the owner), or nil.
    public var hostileReplica: Int?
    /// What it does (every strategy when the directive names none).
    public var hostileStrategies: [HostileStrategy] = []
    /// Whether the scenario places a relay (`relay`): a replica adds it with `rX add-relay`.
    public var hasRelay = false
    public var steps: [Step] = []
    public var expectations: [Expectation] = []

    /// A parse error with the 1-based line it is on.
    public struct ParseError: Error, Equatable, CustomStringConvertible, Sendable {
        public var line: Int
        public var message: String
        public var description: String { "line \(line): \(message)" }
    }

    // long-function: one pass over the scenario's lines; the sections share the parser's position.
    /// Parses scenario text.
    public static func parse(_ text: String) throws(ParseError) -> Scenario {
        var s = Scenario()
        var sawReplicas = false
        /// Labels defined by `add-child NAME as LABEL` so far: a step may name only those.
        var labels = Set<String>()
        /// Labels of operations (`… give Ava 1.00 as LABEL`) so far, for `undo @LABEL`.
        var operationLabels = Set<String>()
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = i + 1
            let words: [String]
            do { words = try tokenize(String(raw)) } catch { throw ParseError(line: line, message: error.message) }
            guard let first = words.first else { continue }
            func fail(_ message: String) -> ParseError { ParseError(line: line, message: message) }
            let text = words.map { $0.contains(" ") || $0.isEmpty ? "\"\($0)\"" : $0 }.joined(separator: " ")
            switch first {
            case "replicas":
                guard words.count == 2, let n = Int(words[1]), (1...16).contains(n) else { throw fail("replicas takes a number from 1 to 16") }
                guard s.steps.isEmpty else { throw fail("replicas must come before the first step") }
                s.replicas = n
                sawReplicas = true
            case "seed":
                guard words.count == 2, let n = UInt64(words[1]) else { throw fail("seed takes a non-negative number") }
                s.seed = n
            case "gossip":
                guard words.count == 2, let n = Int64(words[1]), (10...60_000).contains(n) else { throw fail("gossip takes a mean interval in ms from 10 to 60000") }
                s.gossipMillis = n
            case "topology":
                guard words.count == 2, ["line", "full"].contains(words[1]) else { throw fail("expected: topology line|full") }
                s.lineTopology = words[1] == "line"
            case "store":
                guard words.count == 2, ["lmdb", "memory"].contains(words[1]) else { throw fail("expected: store lmdb|memory") }
                s.usesLMDB = words[1] == "lmdb"
            case "hostile":
                guard words.count >= 2, words[1].hasPrefix("r"), let r = Int(words[1].dropFirst()), (1..<s.replicas).contains(r) else {
                    throw fail("expected: hostile rN [STRATEGY ...] with N from 1 to replicas - 1 (r0 is the owner; after `replicas`)")
                }
                var strategies: [HostileStrategy] = []
                for name in words.dropFirst(2) {
                    guard let strategy = HostileStrategy(rawValue: name) else {
                        throw fail("unknown hostile strategy \(name) (one of: \(HostileStrategy.allCases.map(\.rawValue).joined(separator: ", ")))")
                    }
                    strategies.append(strategy)
                }
                s.hostileReplica = r
                s.hostileStrategies = strategies.isEmpty ? HostileStrategy.allCases : strategies
            case "relay" where words.count == 1:
                guard s.steps.isEmpty else { throw fail("relay must come before the first step") }
                s.hasRelay = true
            case "at":
                guard words.count >= 3 else { throw fail("expected: at TIME STEP (TIME: ms, or a duration such as 90s, 2h30m, 1d)") }
                guard let t = time(words[1]) else { throw fail("bad time \"\(words[1])\": \(timeUsage)") }
                if let last = s.steps.last, t < last.at {
                    throw fail("steps must be in time order (\(durationText(t)) < \(durationText(last.at)))")
                }
                var stepWords = Array(words.dropFirst(2))
                let label = try operationLabel(&stepWords, line: line)
                let (replica, action) = try parseStep(stepWords, replicas: s.replicas, line: line)
                if action.needsRelay && !s.hasRelay { throw fail("no relay is placed: add a line `relay` before the steps") }
                for name in action.childrenNamed {
                    if operationLabels.contains(String(name.dropFirst())) && name.hasPrefix("@") {
                        throw fail("\(name) labels an operation, not a child (a child's label comes from rX add-child NAME as LABEL)")
                    }
                    guard let label = undefinedLabel(name, labels) else { continue }
                    throw fail("undefined label @\(label) (define it in an earlier step: rX add-child NAME as \(label))")
                }
                if case .undoLabelled(let target) = action, !operationLabels.contains(target) {
                    throw fail(labels.contains(target) ? "@\(target) labels a child, not an operation (undo @LABEL takes the label of an earlier give, take, give-all or take-all)"
                               : "undefined label @\(target) (label an earlier operation: rX give CHILD AMOUNT as \(target))")
                }
                if case .addChild(_, let label?) = action { try define(label, line: line, labels, operationLabels); labels.insert(label) }
                if let label { try define(label, line: line, labels, operationLabels); operationLabels.insert(label) }
                let stepText = words.dropFirst(2).map { $0.contains(" ") || $0.isEmpty ? "\"\($0)\"" : $0 }.joined(separator: " ")
                s.steps.append(Step(line: line, at: t, replica: replica, action: action, text: stepText, label: label))
            case "expect":
                let check = try parseCheck(Array(words.dropFirst()), replicas: s.replicas, line: line)
                s.expectations.append(Expectation(line: line, check: check, text: text))
            case "loss", "duplicate", "reorder", "delay":
                // Network settings before (or between) steps: a step at the time of the last one.
                let (replica, action) = try parseStep(words, replicas: s.replicas, line: line)
                s.steps.append(Step(line: line, at: s.steps.last?.at ?? 0, replica: replica, action: action, text: text))
            default:
                let near = Suggestions.nearest(first, in: directives).map { "did you mean \($0)? " } ?? ""
                throw fail("unknown directive \"\(first)\" (\(near)expected replicas, seed, gossip, topology, store, hostile, relay, at or expect)")
            }
        }
        _ = sawReplicas
        guard !s.steps.isEmpty || !s.expectations.isEmpty else {
            throw ParseError(line: 1, message: "the scenario is empty: it has no steps (at TIME …) and no expectations (expect …)")
        }
        for e in s.expectations {
            for name in e.check.childrenNamed {
                guard let label = undefinedLabel(name, labels) else { continue }
                throw ParseError(line: e.line, message: "undefined label @\(label) (no step defines it: rX add-child NAME as \(label))")
            }
        }
        return s
    }

    /// The directives a line may start with.
    static let directives = ["replicas", "seed", "gossip", "topology", "store", "hostile", "relay", "at", "expect", "loss", "duplicate", "reorder",
                             "delay"]
    /// The operations a step on a replica may name (`at TIME rX OPERATION …`).
    static let operations = ["add-child", "rename", "archive", "restore", "give", "take", "give-all", "take-all", "undo", "crash",
                             "restart", "copy-files", "skew", "account-switch", "account-back", "revoke", "recover", "second-genesis",
                             "grow-household", "allowance-set", "allowance-stop", "household-timezone", "merge", "unmerge", "add-relay"]
    /// The steps on the network (`at TIME STEP …`, no replica first).
    static let networkSteps = ["sync", "connect", "partition", "foreign-sync", "heal", "loss", "duplicate", "reorder", "delay", "isolate", "relay"]
    /// What may follow `relay` in a step.
    static let relaySteps = RelayMode.names + ["crash", "restart", "wipe"]
    /// The operations that make a transaction a later `undo @LABEL` may name (`… as LABEL`).
    static let labelledOperations: Set<String> = ["give", "take", "give-all", "take-all"]
    /// The expectations (`expect …`).
    static let expectations = ["converged", "balance", "conflicts", "transaction-count", "refused", "rejected-changes", "attention",
                               "second-geneses", "owner", "learned-from-refusal", "child", "allowance-payments", "children", "same-names",
                               "merged", "present", "absent"]

    /// " (did you mean give?)" when `word` is a likely typo of one of `candidates`, else "".
    static func didYouMean(_ word: String, _ candidates: [String]) -> String {
        Suggestions.nearest(word, in: candidates).map { " (did you mean \($0)?)" } ?? ""
    }

    /// Removes a trailing `as LABEL` from the words of a give, take, give-all or take-all step and
    /// returns the label (nil when there is none).
    static func operationLabel(_ w: inout [String], line: Int) throws(ParseError) -> String? {
        guard w.count >= 4, w[w.count - 2] == "as", labelledOperations.contains(w[1]) else { return nil }
        let label = w[w.count - 1]
        guard !label.isEmpty, !label.contains("@") else { throw ParseError(line: line, message: "a label is a word without @") }
        w.removeLast(2)
        return label
    }

    /// Refuses a label defined before (by an add-child or an operation): a label names one thing.
    static func define(_ label: String, line: Int, _ children: Set<String>, _ operations: Set<String>) throws(ParseError) {
        guard children.contains(label) || operations.contains(label) else { return }
        throw ParseError(line: line, message: "label \(label) is already defined (by an earlier step): a label names one child or one operation")
    }

    /// How `at` takes a time.
    static let timeUsage = "expected milliseconds (1500) or a duration of whole days, hours, minutes, seconds and milliseconds, largest unit first (1d, 2h30m, 90s, 1m30s, 250ms)"

    /// A step's time in milliseconds: a plain number (`1500`, milliseconds, as before durations
    /// existed) or a duration (`1d`, `2h30m`, `90s`, `1m30s`, `1s250ms`): units d, h, m, s, ms,
    /// each at most once, largest first. nil when `word` is neither, or past ``timeMax``.
    static func time(_ word: String) -> Int64? {
        if let plain = Int64(word), plain >= 0, word.allSatisfy(\.isASCII) { return plain <= timeMax ? plain : nil }
        let units: [(String, Int64)] = [("d", 86_400_000), ("h", 3_600_000), ("ms", 1), ("m", 60_000), ("s", 1_000)]
        let order = ["d", "h", "m", "s", "ms"]
        var rest = Substring(word), total: Int64 = 0, lastRank = -1
        while !rest.isEmpty {
            let digits = rest.prefix { ("0"..."9").contains($0) }
            guard !digits.isEmpty, digits.count <= 12, let n = Int64(digits) else { return nil }
            rest = rest.dropFirst(digits.count)
            guard let (unit, millis) = units.first(where: { rest.hasPrefix($0.0) }),
                  let rank = order.firstIndex(of: unit), rank > lastRank else { return nil }
            rest = rest.dropFirst(unit.count)
            lastRank = rank
            let (part, overflow) = n.multipliedReportingOverflow(by: millis)
            guard !overflow, part <= timeMax - total else { return nil }
            total += part
        }
        return lastRank >= 0 ? total : nil
    }

    /// The latest time a step may have: a year of virtual time.
    static let timeMax: Int64 = 366 * 86_400_000

    /// `millis` as ``time(_:)`` reads it back, in the largest units that fit (`0`, `250ms`,
    /// `1s500ms`, `2h30m`, `1d`).
    static func durationText(_ millis: Int64) -> String {
        guard millis > 0 else { return "\(millis)" }
        var rest = millis, text = ""
        for (unit, size) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)] where rest >= size {
            text += "\(rest / size)\(unit)"
            rest %= size
        }
        return text
    }

    /// The label `name` refers to (`@LABEL`) when it is not among `labels`; nil for a plain name
    /// or a defined label.
    static func undefinedLabel(_ name: String, _ labels: Set<String>) -> String? {
        guard name.hasPrefix("@") else { return nil }
        let label = String(name.dropFirst())
        return labels.contains(label) ? nil : label
    }

    struct TokenError: Error { var message: String }

    /// Splits a line into words: `#` starts a comment (outside quotes), "…" quotes a word.
    static func tokenize(_ line: String) throws(TokenError) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false, quoted = false
        for ch in line {
            if quoted {
                if ch == "\"" { quoted = false; words.append(current); current = ""; inWord = false } else { current.append(ch) }
            } else if ch == "#" {
                break
            } else if ch == "\"" {
                if inWord { throw TokenError(message: "a quote inside a word") }
                quoted = true
                inWord = true
            } else if ch == " " || ch == "\t" || ch == "\r" {
                if inWord { words.append(current); current = ""; inWord = false }
            } else {
                current.append(ch)
                inWord = true
            }
        }
        if quoted { throw TokenError(message: "unterminated quote") }
        if inWord { words.append(current) }
        return words
    }

    static func replicaIndex(_ word: String, _ replicas: Int, line: Int) throws(ParseError) -> Int {
        guard word.hasPrefix("r"), let n = Int(word.dropFirst()), n >= 0 else {
            throw ParseError(line: line, message: "expected a replica (r0, r1, …), got \"\(word)\"")
        }
        guard n < replicas else { throw ParseError(line: line, message: "\(word) does not exist (replicas \(replicas))") }
        return n
    }

    static func amount(_ word: String, line: Int) throws(ParseError) -> Int64 {
        do {
            let cents = try Money.parseAmount(word)
            guard cents > 0 else { throw ParseError(line: line, message: "amount must be positive: \(word)") }
            return cents
        } catch let e as ParseError { throw e } catch {
            throw ParseError(line: line, message: "bad amount \"\(word)\": \(error)")
        }
    }

    /// An amount that may be zero or negative (`0`, `-1.50`): for expected balances.
    static func signedAmount(_ word: String, line: Int) throws(ParseError) -> Int64 {
        let negative = word.hasPrefix("-")
        let magnitude = negative ? String(word.dropFirst()) : word
        if !magnitude.isEmpty, magnitude.allSatisfy({ $0 == "0" || $0 == "." }), magnitude.contains("0") { return 0 }
        let cents = try amount(magnitude, line: line)
        return negative ? -cents : cents
    }

    /// A percentage with at most one decimal (`2`, `2.5`, `2.5%`), exactly, in per mille.
    static func perMille(_ word: String) -> Int? {
        let text = word.hasSuffix("%") ? String(word.dropLast()) : word
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, let whole = Int(parts[0]), whole >= 0, parts[0].allSatisfy(\.isASCII) else { return nil }
        var tenths = 0
        if parts.count == 2 {
            guard parts[1].count == 1, let d = Int(parts[1]), d >= 0 else { return nil }
            tenths = d
        }
        let value = whole * 10 + tenths
        return value <= 1000 ? value : nil
    }

    /// `[note TEXT]` after an amount.
    static func note(_ rest: ArraySlice<String>, line: Int) throws(ParseError) -> String {
        if rest.isEmpty { return "" }
        guard rest.count == 2, rest.first == "note" else { throw ParseError(line: line, message: "expected: note \"TEXT\"") }
        return rest.last!
    }

    // long-function: one case per step of the scenario language: a table, read case by case.
    static func parseStep(_ w: [String], replicas: Int, line: Int) throws(ParseError) -> (Int?, Action) {
        func fail(_ m: String) -> ParseError { ParseError(line: line, message: m) }
        func arity(_ n: Int, _ usage: String) throws(ParseError) { if w.count != n { throw fail("expected: \(usage)") } }
        switch w[0] {
        case "sync", "connect":
            if w.count == 2 && w[1] == "all" { return (nil, .syncAll) }
            try arity(3, "sync all | sync rX rY")
            let a = try replicaIndex(w[1], replicas, line: line), b = try replicaIndex(w[2], replicas, line: line)
            guard a != b else { throw fail("a replica cannot sync with itself") }
            return (nil, .sync(a, b))
        case "partition":
            guard let bar = w.firstIndex(of: "|"), bar > 1 else { throw fail("expected: partition rA [rB …] | rC [rD …]") }
            var left: [Int] = [], right: [Int] = []
            for word in w[1..<bar] { for r in word.split(separator: ",") { left.append(try replicaIndex(String(r), replicas, line: line)) } }
            for word in w[(bar + 1)...] { for r in word.split(separator: ",") { right.append(try replicaIndex(String(r), replicas, line: line)) } }
            guard !right.isEmpty, Set(left).isDisjoint(with: right) else { throw fail("partition groups must be non-empty and disjoint") }
            return (nil, .partition(left))
        case "foreign-sync":
            try arity(2, "foreign-sync rX")
            return (nil, .foreignSync(try replicaIndex(w[1], replicas, line: line)))
        case "heal":
            try arity(1, "heal")
            return (nil, .heal)
        case "isolate":
            guard w.count >= 3 else { throw fail("expected: isolate rA rB [rC …] (they meet only through the relay)") }
            var group: [Int] = []
            for word in w.dropFirst() { group.append(try replicaIndex(word, replicas, line: line)) }
            guard Set(group).count == group.count else { throw fail("isolate names each replica once") }
            return (nil, .isolate(group))
        case "relay":
            return (nil, try relayStep(w, replicas: replicas, line: line))
        case "loss", "duplicate", "reorder":
            try arity(2, "\(w[0]) PERCENT (0 to 100, at most one decimal)")
            guard let p = perMille(w[1]) else { throw fail("\(w[0]) takes a percentage from 0 to 100 with at most one decimal") }
            return (nil, w[0] == "loss" ? .loss(perMille: p) : w[0] == "duplicate" ? .duplicate(perMille: p) : .reorder(perMille: p))
        case "delay":
            try arity(2, "delay MIN..MAX (ms)")
            let parts = w[1].split(separator: ".", omittingEmptySubsequences: true)
            guard parts.count == 2, let lo = Int64(parts[0]), let hi = Int64(parts[1]), lo >= 1, lo <= hi else { throw fail("delay takes MIN..MAX with 1 <= MIN <= MAX") }
            return (nil, .delay(lo...hi))
        default:
            break
        }
        guard w[0].hasPrefix("r"), Int(w[0].dropFirst()) != nil else {
            let near = Suggestions.nearest(w[0], in: networkSteps)
            throw fail("expected a replica (r0, r1, …) or a network step, got \"\(w[0])\"" + (near.map { " (did you mean \($0)?)" } ?? ""))
        }
        let r = try replicaIndex(w[0], replicas, line: line)
        guard w.count >= 2 else { throw fail("expected an operation after \(w[0])") }
        switch w[1] {
        case "add-child":
            guard w.count == 3 || (w.count == 5 && w[3] == "as") else { throw fail("expected: rX add-child NAME [as LABEL]") }
            if w.count == 5, w[4].isEmpty || w[4].contains("@") { throw fail("a label is a word without @") }
            return (r, .addChild(w[2], label: w.count == 5 ? w[4] : nil))
        case "rename": try arity(4, "rX rename CHILD NEWNAME"); return (r, .rename(w[2], w[3]))
        case "archive": try arity(3, "rX archive CHILD"); return (r, .archive(w[2]))
        case "restore": try arity(3, "rX restore CHILD"); return (r, .restore(w[2]))
        case "give", "take":
            guard w.count >= 4 else { throw fail("expected: rX \(w[1]) CHILD AMOUNT [note \"TEXT\"]") }
            let cents = try amount(w[3], line: line)
            return (r, .post(child: w[2], cents: w[1] == "give" ? cents : -cents, note: try note(w[4...], line: line)))
        case "give-all", "take-all":
            guard w.count >= 3 else { throw fail("expected: rX \(w[1]) AMOUNT [note \"TEXT\"]") }
            let cents = try amount(w[2], line: line)
            return (r, .postAll(cents: w[1] == "give-all" ? cents : -cents, note: try note(w[3...], line: line)))
        case "undo":
            if w.count == 3, w[2].hasPrefix("@"), w[2].count > 1 { return (r, .undoLabelled(String(w[2].dropFirst()))) }
            guard w.count == 2 || (w.count == 3 && w[2] == "mine") else { throw fail("expected: rX undo [mine | @LABEL]") }
            return (r, .undo(mine: w.count == 3))
        case "crash": try arity(2, "rX crash"); return (r, .crash)
        case "restart":
            guard w.count == 2 || (w.count == 3 && w[2] == "stale") else { throw fail("expected: rX restart [stale]") }
            return (r, w.count == 3 ? .restartStale : .restart)
        case "copy-files": try arity(2, "rX copy-files"); return (r, .copyFiles)
        case "skew":
            try arity(3, "rX skew +/-MILLIS")
            guard let m = Int64(w[2].hasPrefix("+") ? String(w[2].dropFirst()) : w[2]) else { throw fail("skew takes +/-MILLIS") }
            return (r, .skew(m))
        case "account-switch": try arity(2, "rX account-switch"); return (r, .accountSwitch)
        case "account-back": try arity(2, "rX account-back"); return (r, .accountBack)
        case "revoke":
            try arity(3, "rN revoke rX")
            let target = try replicaIndex(w[2], replicas, line: line)
            guard target != r else { throw fail("a replica cannot revoke itself") }
            return (r, .revoke(target))
        case "recover": try arity(2, "rX recover"); return (r, .recover)
        case "second-genesis": try arity(2, "rX second-genesis"); return (r, .secondGenesis)
        case "grow-household":
            try arity(3, "rX grow-household MEMBERS")
            guard let n = Int(w[2]), (1...64).contains(n) else { throw fail("grow-household takes MEMBERS from 1 to 64") }
            return (r, .growHousehold(n))
        case "allowance-set":
            let usage = "rX allowance-set CHILD AMOUNT week|month [on DAY]"
            guard w.count == 5 || (w.count == 7 && w[5] == "on"), let every = ["week": AllowanceRule.Every.week, "month": .month][w[4]] else {
                throw fail("expected: \(usage)")
            }
            let cents = try amount(w[3], line: line)
            var day: Int64?
            if w.count == 7 {
                if let i = Allowance.weekdayNames.firstIndex(of: w[6]), every == .week {
                    day = Int64(i) + 1
                } else if let n = Int64(w[6]), every == .month, (1...28).contains(n) {
                    day = n
                } else {
                    throw fail("on takes a weekday (monday ... sunday) for week, a day 1 to 28 for month")
                }
            }
            return (r, .allowanceSet(child: w[2], cents: cents, every: every, on: day))
        case "allowance-stop": try arity(3, "rX allowance-stop CHILD"); return (r, .allowanceStop(w[2]))
        case "household-timezone":
            try arity(3, "rX household-timezone ZONE")
            guard SimZones().rules(for: w[2]) != nil else { throw fail("unknown zone \"\(w[2])\" (one of \(SimZones.names.joined(separator: ", ")))") }
            return (r, .householdTimeZone(w[2]))
        case "household-limit":
            try arity(3, "rX household-limit AMOUNT|never")
            if w[2] == "never" { return (r, .householdLimit(HouseholdLimit.neverCents)) }
            guard let cents = try? Money.parseAmount(w[2]) else { throw fail("household-limit takes an amount (1000, 12.50) or never") }
            return (r, .householdLimit(cents))
        case "merge":
            guard w.count == 5, w[3] == "into" else { throw fail("expected: rX merge FROM into INTO") }
            return (r, .merge(w[2], into: w[4]))
        case "unmerge": try arity(3, "rX unmerge CHILD"); return (r, .unmerge(w[2]))
        case "add-relay": try arity(2, "rX add-relay"); return (r, .addRelay)
        default:
            throw fail("unknown operation \"\(w[1])\"" + didYouMean(w[1], operations))
        }
    }

    static func parseCheck(_ w: [String], replicas: Int, line: Int) throws(ParseError) -> Check {
        func fail(_ m: String) -> ParseError { ParseError(line: line, message: m) }
        func count(_ usage: String) throws(ParseError) -> Int {
            guard w.count == 2, let n = Int(w[1]), n >= 0 else { throw fail("expected: expect \(usage)") }
            return n
        }
        func bool(_ word: String) throws(ParseError) -> Bool {
            switch word { case "true", "yes": return true; case "false", "no": return false
            default: throw fail("expected true or false, got \"\(word)\"") }
        }
        guard let first = w.first else { throw fail("expect what?") }
        if w.count >= 3 && w[w.count - 2] == "on" {
            let r = try replicaIndex(w[w.count - 1], replicas, line: line)
            let inner = try parseCheck(Array(w.dropLast(2)), replicas: replicas, line: line)
            switch inner {
            case .balance, .conflicts, .householdLimit, .transactionCount, .archived, .present, .allowancePayments, .childCount, .merged, .sameNames:
                return .on(r, inner)
            default: throw fail("only ledger checks (balance, transaction-count, conflicts, child, present, absent) take \"on rX\"")
            }
        }
        switch first {
        case "converged":
            guard w.count == 1 else { throw fail("expected: expect converged") }
            return .converged
        case "balance":
            guard w.count == 3 else { throw fail("expected: expect balance CHILD AMOUNT") }
            return .balance(w[1], try signedAmount(w[2], line: line))
        case "conflicts": return .conflicts(try count("conflicts N"))
        case "household-limit":
            guard w.count == 2 else { throw fail("expected: expect household-limit AMOUNT|never") }
            if w[1] == "never" { return .householdLimit(HouseholdLimit.neverCents) }
            guard let cents = try? Money.parseAmount(w[1]) else { throw fail("household-limit takes an amount (1000, 12.50) or never") }
            return .householdLimit(cents)
        case "transaction-count": return .transactionCount(try count("transaction-count N"))
        case "refused": return .refused(try count("refused N"))
        case "rejected-changes": return .rejectedChanges(try count("rejected-changes N"))
        case "attention":
            guard w.count == 2 || w.count == 3 else { throw fail("expected: expect attention rX [true|false]") }
            return .attention(try replicaIndex(w[1], replicas, line: line), w.count == 3 ? try bool(w[2]) : true)
        case "second-geneses": return .secondGeneses(try count("second-geneses N"))
        case "owner":
            guard w.count == 2 else { throw fail("expected: expect owner rX") }
            return .owner(try replicaIndex(w[1], replicas, line: line))
        case "learned-from-refusal":
            guard w.count == 2 else { throw fail("expected: expect learned-from-refusal rX") }
            return .learnedFromRefusal(try replicaIndex(w[1], replicas, line: line))
        case "child":
            guard w.count == 4, w[2] == "archived" else { throw fail("expected: expect child CHILD archived true|false") }
            return .archived(w[1], try bool(w[3]))
        case "allowance-payments":
            guard w.count == 3, let n = Int(w[2]), n >= 0 else { throw fail("expected: expect allowance-payments CHILD N") }
            return .allowancePayments(w[1], n)
        case "children": return .childCount(try count("children N"))
        case "same-names": return .sameNames(try count("same-names N"))
        case "merged":
            guard w.count == 4, w[2] == "into" else { throw fail("expected: expect merged CHILD into CHILD") }
            return .merged(w[1], into: w[3])
        case "present", "absent":
            guard w.count == 2 else { throw fail("expected: expect \(first) NOTE") }
            return .present(w[1], first == "present")
        default:
            throw fail("unknown expectation \"\(first)\"" + didYouMean(first, expectations))
        }
    }
}

extension Scenario.Action {
    /// The child a step names (a name or `@LABEL`), if it names one.
    var childNamed: String? {
        switch self {
        case .rename(let child, _), .archive(let child), .restore(let child), .post(let child, _, _),
             .allowanceSet(let child, _, _, _), .allowanceStop(let child), .unmerge(let child): return child
        default: return nil
        }
    }

    /// Every child a step names.
    var childrenNamed: [String] {
        if case .merge(let from, let into) = self { return [from, into] }
        return childNamed.map { [$0] } ?? []
    }
}

extension Scenario.Check {
    /// The child an expectation names (a name or `@LABEL`), if it names one.
    var childNamed: String? {
        switch self {
        case .on(_, let inner): return inner.childNamed
        case .balance(let child, _), .archived(let child, _), .allowancePayments(let child, _): return child
        default: return nil
        }
    }

    /// Every child an expectation names.
    var childrenNamed: [String] {
        switch self {
        case .on(_, let inner): return inner.childrenNamed
        case .merged(let child, let into): return [child, into]
        default: return childNamed.map { [$0] } ?? []
        }
    }
}

extension Scenario {
    /// `relay MODE` (honest, drop, delay, replay, reorder, withhold rN, stale) or `relay crash|restart|wipe`.
    static func relayStep(_ w: [String], replicas: Int, line: Int) throws(ParseError) -> Action {
        func fail(_ m: String) -> ParseError { ParseError(line: line, message: m) }
        let usage = "relay honest|drop|delay|replay|reorder|withhold rN|stale|crash|restart|wipe"
        guard w.count >= 2 else { throw fail("expected: \(usage)") }
        if w[1] == "withhold" {
            guard w.count == 3 else { throw fail("expected: relay withhold rN") }
            return .relayMode(.withhold(try replicaIndex(w[2], replicas, line: line)))
        }
        guard relaySteps.contains(w[1]) else {
            let near = Suggestions.nearest(w[1], in: relaySteps).map { " (did you mean \($0)?)" } ?? ""
            throw fail("unknown relay step \"\(w[1])\"\(near); expected: \(usage)")
        }
        guard w.count == 2 else { throw fail("expected: \(usage)") }
        switch w[1] {
        case "honest": return .relayMode(.honest)
        case "drop": return .relayMode(.drop)
        case "delay": return .relayMode(.delay)
        case "replay": return .relayMode(.replay)
        case "reorder": return .relayMode(.reorder)
        case "stale": return .relayMode(.stale)
        case "crash": return .relayCrash
        case "restart": return .relayRestart
        default: return .relayWipe
        }
    }
}

extension Scenario.Action {
    /// Whether the step needs the scenario's relay (`relay` line).
    var needsRelay: Bool {
        switch self {
        case .addRelay, .relayMode, .relayCrash, .relayRestart, .relayWipe: true
        default: false
        }
    }
}

import KidLedgerDomain
import KidLedgerReplica

/// A deliberately naive, sequential re-statement of the merge rules (docs/CRDT.md), used as an
/// oracle: from the set of every change any replica holds, it computes what each child's name,
/// archived flag, balance and allowance schedule must be. It shares no code with the replica's merge logic beyond the
/// record types and their canonical encoding.
enum ReferenceModel {
    struct ChildState: Equatable, CustomStringConvertible {
        var name: String
        var archived: Bool
        var balance: Int128
        /// The child's allowance schedule as "cents rule note stoppedAt" (its registers), or "".
        var allowance = ""
        /// The child it counts in, when it was merged into another (its balance is its own
        /// transactions' sum then; the other's includes it).
        var mergedInto: RecordID? = nil
        var description: String {
            "\(name)\(archived ? " (archived)" : "") \(balance)\(allowance.isEmpty ? "" : " allowance " + allowance)"
                + (mergedInto.map { " merged into \($0.hex.prefix(8))" } ?? "")
        }

        /// ``allowance`` of a replica's schedule.
        static func allowance(_ s: AllowanceSchedule) -> String {
            "\(s.amountCents) \(s.rule.packed) \(s.note) \(s.stoppedAtMillis ?? 0)"
        }
    }

    // long-function: the reference model is one straight fold of the merge rules, to be read against docs, not against the replica's code.
    /// The expected children, by id (`verifier` checks the owners' signatures on grants and
    /// revocations).
    static func expected(from changes: [Change], verifier: any SignatureVerifier, genesis: Household? = nil) -> [RecordID: ChildState] {
        // Membership: where each origin's changes stop counting (revocations by author, owner
        // terms, unclaimed origins), restated from the log alone.
        let membership = LogMembership(changes, verifier: verifier, genesis: genesis)

        // A register is (entity, field); values and transactions are encoded only to break a tie
        // (the encoding is a function of the value, so encoding the kept one again is the same).
        struct Register: Hashable {
            let entity: RecordID
            let field: UInt8
        }
        // Two versions of one transaction id: the author who made the id (its member's mark),
        // then the owner, then members by key, then origins nobody claimed; then the smaller
        // payload (docs/CRDT.md, "Same id, different payload"). Two laptops paying one allowance
        // period with different amounts (a concurrent change) meet this rule.
        let owner = membership.owners.last
        func rank(_ origin: ReplicaID, _ id: RecordID) -> (maker: Int, tier: Int, key: [UInt8]) {
            guard let key = membership.claimant[origin] else { return (1, 2, []) }
            return (Membership.isEntryID(id, madeBy: key) ? 0 : 1, key == owner ? 0 : 1, key)
        }
        func before(_ a: (maker: Int, tier: Int, key: [UInt8]), _ b: (maker: Int, tier: Int, key: [UInt8])) -> Bool? {
            if a.maker != b.maker { return a.maker < b.maker }
            if a.tier != b.tier { return a.tier < b.tier }
            if a.key != b.key { return a.key.lexicographicallyPrecedes(b.key) }
            return nil
        }
        var transactionAuthors: [RecordID: ReplicaID] = [:]
        var created = Set<RecordID>()
        var registers: [Register: (stamp: Stamp, value: FieldValue)] = [:]
        var transactions: [RecordID: LedgerTransaction] = [:]
        transactions.reserveCapacity(changes.count)  // about one a change: no rehashing as it grows
        for change in changes where !membership.rejects(change) {
            let stamp = Stamp(hlc: change.hlc, origin: change.origin)
            for op in change.operations {
                switch op {
                case .createChild(let c):
                    created.insert(c.id)
                case .setField(let entity, let field, let value, _):
                    let key = Register(entity: entity, field: field.rawValue)
                    if let current = registers[key] {
                        let newer = stamp != current.stamp
                            ? stamp > current.stamp
                            : RecordCodec.encode(current.value).lexicographicallyPrecedes(RecordCodec.encode(value))
                        if !newer { continue }
                    }
                    registers[key] = (stamp, value)
                case .addTransaction(let t):
                    if let current = transactions[t.id], let author = transactionAuthors[t.id] {
                        if current == t {
                            // One payload, several authors: the best-ranked is its author.
                            if before(rank(change.origin, t.id), rank(author, t.id)) ?? (change.origin.rawValue < author.rawValue) {
                                transactionAuthors[t.id] = change.origin
                            }
                            continue
                        }
                        let wins = before(rank(change.origin, t.id), rank(author, t.id))
                            ?? RecordCodec.encode(t).lexicographicallyPrecedes(RecordCodec.encode(current))
                        if !wins { continue }
                    }
                    transactions[t.id] = t
                    transactionAuthors[t.id] = change.origin
                default:
                    break
                }
            }
        }
        var result: [RecordID: ChildState] = [:]
        for id in created {
            var state = ChildState(name: "(unnamed)", archived: false, balance: 0)
            if case .text(let s)? = registers[Register(entity: id, field: Field.childName.rawValue)]?.value { state.name = s }
            if case .flag(let b)? = registers[Register(entity: id, field: Field.childArchived.rawValue)]?.value { state.archived = b }
            // A schedule is there when its amount and its rule are (docs/CRDT.md, "Allowance schedules").
            func value(_ field: Field) -> FieldValue? { registers[Register(entity: id, field: field.rawValue)]?.value }
            if case .integer(let cents)? = value(.allowanceAmount), case .integer(let rule)? = value(.allowanceRule) {
                var note = "", stopped: Int64 = 0
                if case .text(let s)? = value(.allowanceNote) { note = s }
                if case .integer(let at)? = value(.allowanceStoppedAt) { stopped = at }
                state.allowance = "\(cents) \(rule) \(note) \(stopped)"
            }
            result[id] = state
        }
        for (_, t) in transactions where result[t.childID] != nil {
            result[t.childID]!.balance += Int128(t.amountCents)
        }
        // Child merges (docs/CRDT.md, "Child merges"): each child's merge register names the
        // child it was merged into; a link to itself or to a child not created is no link. Follow
        // the links; where they go round, the smallest id of the round keeps its identity.
        var link: [RecordID: RecordID] = [:]
        for id in created {
            if case .text(let s)? = registers[Register(entity: id, field: Field.childMergedInto.rawValue)]?.value,
               let target = RecordID(string: s), target != id, created.contains(target) {
                link[id] = target
            }
        }
        func root(_ id: RecordID) -> RecordID {
            var seen: [RecordID] = [id]
            var current = id
            while let next = link[current] {
                if let i = seen.firstIndex(of: next) { return seen[i...].min()! }
                seen.append(next)
                current = next
            }
            return current
        }
        var own = result
        for id in created {
            let r = root(id)
            guard r != id else { continue }
            result[id]!.mergedInto = r
            result[id]!.allowance = ""  // a merged child's schedule is listed and paid no more
            result[r]!.balance += own[id]!.balance
        }
        own.removeAll()
        return result
    }
}

/// Balances equal sums: every replica's children (names, archived flags, balances: each the sum
/// of the child's transactions) are what the ``ReferenceModel`` computes from the union of every
/// replica's changes.
final class BalanceChecker: Checker {
    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        guard stage == .referenceModel else { return [] }
        let expected = ReferenceModel.expected(from: run.logs.union, verifier: run.verifier, genesis: run.genesis)
        for (node, replica) in zip(run.nodes, run.replicas) {
            var actual: [RecordID: ReferenceModel.ChildState] = [:]
            for c in try replica.children(includeArchived: true, includeMerged: true) {
                actual[c.id] = ReferenceModel.ChildState(name: c.name, archived: c.isArchived, balance: c.balanceCents, mergedInto: c.mergedInto)
            }
            for s in try replica.allowanceSchedules() where actual[s.childID] != nil {
                actual[s.childID]!.allowance = ReferenceModel.ChildState.allowance(s)
            }
            if actual != expected {
                let differing = Set(actual.keys).union(expected.keys).sorted().filter { actual[$0] != expected[$0] }.prefix(3)
                return ["\(node.name) differs from the reference model: " + differing.map {
                    "\($0.hex.prefix(8)) is \(actual[$0].map(\.description) ?? "missing"), model says \(expected[$0].map(\.description) ?? "missing")"
                }.joined(separator: "; ")]
            }
        }
        return []
    }
}

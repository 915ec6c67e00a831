import KidLedgerDomain
import KidLedgerReplica

/// A deliberately naive, sequential re-statement of the merge rules (docs/CRDT.md), used as an
/// oracle: from the set of every change any replica holds, it computes what each child's name,
/// archived flag and balance must be. It shares no code with the replica's merge logic beyond the
/// record types and their canonical encoding.
enum ReferenceModel {
    struct ChildState: Equatable, CustomStringConvertible {
        var name: String
        var archived: Bool
        var balance: Int128
        var description: String { "\(name)\(archived ? " (archived)" : "") \(balance)" }
    }

    /// The expected children, by id.
    static func expected(from changes: [Change]) -> [RecordID: ChildState] {
        // Membership: who wrote each origin, who the owner and the granted keys are, and where
        // each revoked member's changes stop.
        var claims: [ReplicaID: [UInt8]] = [:]
        var cuts: [[UInt8]: [ReplicaID: UInt64]] = [:]
        var owner: [UInt8]?
        var granted = Set<[UInt8]>()
        for change in changes {
            for op in change.operations {
                switch op {
                case .createHousehold(let h) where !h.owner.isEmpty:
                    owner = h.owner
                case .grant(let g):
                    granted.insert(g.member)
                case .claim(let c) where c.origin == change.origin && change.sequence == 1:
                    if let existing = claims[c.origin], !c.member.lexicographicallyPrecedes(existing) { continue }
                    claims[c.origin] = c.member
                case .revoke(let r):
                    if let current = cuts[r.member] {
                        var merged: [ReplicaID: UInt64] = [:]
                        for origin in Set(current.keys).union(r.seen.keys) {
                            let v = min(current[origin] ?? 0, r.seen[origin] ?? 0)
                            if v > 0 { merged[origin] = v }
                        }
                        cuts[r.member] = merged
                    } else {
                        cuts[r.member] = r.seen
                    }
                default: break
                }
            }
        }
        // A change is rejected beyond its origin's cut: the cut of the member claiming the origin
        // (taken once per origin, not looked up by the member's key for every change). In an
        // owned household, every change of an origin no claim names, or whose claim names a key
        // that is neither the owner nor granted, is rejected too (cut 0).
        var cutAt: [ReplicaID: UInt64] = [:]
        for (origin, member) in claims {
            if let owner, member != owner, !granted.contains(member) { cutAt[origin] = 0; continue }
            if let cut = cuts[member] { cutAt[origin] = cut[origin] ?? 0 }
        }
        func rejected(_ change: Change) -> Bool {
            guard let cut = cutAt[change.origin] else { return owner != nil && claims[change.origin] == nil }
            return change.sequence > cut
        }

        // A register is (entity, field); values and transactions are encoded only to break a tie
        // (the encoding is a function of the value, so encoding the kept one again is the same).
        struct Register: Hashable {
            let entity: RecordID
            let field: UInt8
        }
        var created = Set<RecordID>()
        var registers: [Register: (stamp: Stamp, value: FieldValue)] = [:]
        var transactions: [RecordID: LedgerTransaction] = [:]
        transactions.reserveCapacity(changes.count)  // about one a change: no rehashing as it grows
        for change in changes where !rejected(change) {
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
                    if let current = transactions[t.id],
                       !RecordCodec.encode(t).lexicographicallyPrecedes(RecordCodec.encode(current)) { continue }
                    transactions[t.id] = t
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
            result[id] = state
        }
        for (_, t) in transactions where result[t.childID] != nil {
            result[t.childID]!.balance += Int128(t.amountCents)
        }
        return result
    }
}

/// Balances equal sums: every replica's children (names, archived flags, balances: each the sum
/// of the child's transactions) are what the ``ReferenceModel`` computes from the union of every
/// replica's changes.
final class BalanceChecker: Checker {
    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        guard stage == .referenceModel else { return [] }
        let expected = ReferenceModel.expected(from: run.logs.union)
        for (node, replica) in zip(run.nodes, run.replicas) {
            var actual: [RecordID: ReferenceModel.ChildState] = [:]
            for c in try replica.children(includeArchived: true) {
                actual[c.id] = ReferenceModel.ChildState(name: c.name, archived: c.isArchived, balance: c.balanceCents)
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

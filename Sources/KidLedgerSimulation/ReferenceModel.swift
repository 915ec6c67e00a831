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
        // Membership: who wrote each origin, and where each revoked member's changes stop.
        var claims: [ReplicaID: [UInt8]] = [:]
        var cuts: [[UInt8]: [ReplicaID: UInt64]] = [:]
        for change in changes {
            for op in change.operations {
                switch op {
                case .claim(let c) where c.origin == change.origin:
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
        func rejected(_ change: Change) -> Bool {
            guard let member = claims[change.origin], let cut = cuts[member] else { return false }
            return change.sequence > (cut[change.origin] ?? 0)
        }

        var created = Set<RecordID>()
        var registers: [String: (stamp: Stamp, bytes: [UInt8], value: FieldValue)] = [:]
        var transactions: [RecordID: (bytes: [UInt8], t: LedgerTransaction)] = [:]
        for change in changes where !rejected(change) {
            let stamp = Stamp(hlc: change.hlc, origin: change.origin)
            for op in change.operations {
                switch op {
                case .createChild(let c):
                    created.insert(c.id)
                case .setField(let entity, let field, let value, _):
                    let key = "\(entity)/\(field.rawValue)"
                    let bytes = RecordCodec.encode(value)
                    if let current = registers[key] {
                        let newer = stamp != current.stamp ? stamp > current.stamp
                                                           : current.bytes.lexicographicallyPrecedes(bytes)
                        if !newer { continue }
                    }
                    registers[key] = (stamp, bytes, value)
                case .addTransaction(let t):
                    let bytes = RecordCodec.encode(t)
                    if let current = transactions[t.id], !bytes.lexicographicallyPrecedes(current.bytes) { continue }
                    transactions[t.id] = (bytes, t)
                default:
                    break
                }
            }
        }
        var result: [RecordID: ChildState] = [:]
        for id in created {
            var state = ChildState(name: "(unnamed)", archived: false, balance: 0)
            if case .text(let s)? = registers["\(id)/\(Field.childName.rawValue)"]?.value { state.name = s }
            if case .flag(let b)? = registers["\(id)/\(Field.childArchived.rawValue)"]?.value { state.archived = b }
            result[id] = state
        }
        for (_, entry) in transactions where result[entry.t.childID] != nil {
            result[entry.t.childID]!.balance += Int128(entry.t.amountCents)
        }
        return result
    }
}

extension Simulator {
    /// Every replica's children must equal what the reference model computes from all changes.
    /// `logs` are the replicas' whole change logs, in the same order.
    func checkAgainstReferenceModel(_ replicas: [Replica], logs: [[Change]]) throws {
        var all: [String: Change] = [:]
        for (i, log) in logs.enumerated() {
            // A log equal to an earlier one adds nothing to the union.
            if logs[..<i].contains(log) { continue }
            for change in log {
                let version = SHA256.hash(RecordCodec.encode(change)).prefix(8).map { String($0, radix: 16) }.joined()
                all["\(change.origin.rawValue)/\(change.sequence)/\(version)"] = change
            }
        }
        let expected = ReferenceModel.expected(from: all.keys.sorted().map { all[$0]! })
        for (node, replica) in zip(nodes, replicas) {
            var actual: [RecordID: ReferenceModel.ChildState] = [:]
            for c in try replica.children(includeArchived: true) {
                actual[c.id] = ReferenceModel.ChildState(name: c.name, archived: c.isArchived, balance: c.balanceCents)
            }
            if actual != expected {
                let differing = Set(actual.keys).union(expected.keys).sorted().filter { actual[$0] != expected[$0] }.prefix(3)
                failures.append("\(node.name) differs from the reference model: " + differing.map {
                    "\($0.hex.prefix(8)) is \(actual[$0].map(\.description) ?? "missing"), model says \(expected[$0].map(\.description) ?? "missing")"
                }.joined(separator: "; "))
                return
            }
        }
    }
}

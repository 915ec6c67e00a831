import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica

extension Simulator {
    static let names = ["Ava", "Ben", "Cleo", "Dan", "Eve", "Finn"]

    // long-function: one case per operation of the seed's mix: a table.
    /// One user operation on `node`, drawn from the seed's operation mix. Refusals (unknown child,
    /// overflow, nothing to undo, …) are part of the story and are traced, not failures.
    func userOperation(_ node: SimNode) throws {
        guard faultsOn, let replica = node.replica, !node.isFrozen else { return }
        let before = try ownSequence(node)
        if let memory = node.store as? MemoryStore, chance(50) {
            node.staleCopy = memory.lazyCopy()
            log("\(node.name) copies its files")
            record(node.index, .copyFiles)
        }
        let weights = parameters.operationWeights
        var pick = Int.random(in: 0..<max(1, weights.reduce(0, +)), using: &g)
        var kind = 0
        while kind < weights.count - 1 && pick >= weights[kind] { pick -= weights[kind]; kind += 1 }
        // The child the operation is about: drawn as `children.randomElement(using:)` draws, from
        // the number of children; the list itself is read only by the operations that use the
        // child (rename, archive, give and take).
        let childCount = try node.childCount()
        let picked = childCount == 0 ? nil : Int.random(in: 0..<childCount, using: &g)
        var child: PickableChild?
        if let picked, (1...4).contains(kind) || kind == Self.allowanceOperation || kind == Self.mergeOperation {
            let listed = try node.pickableChild(at: picked)
            precondition(listed.count == childCount, "\(node.name) lists \(listed.count) of \(childCount) children")
            child = listed.child
        }
        let target = child.map { $0.id.hexPrefix(12) } ?? "nobody"
        let cents = chance(20) ? Int64.max / 2 : Int64.random(in: 1...500, using: &g)
        var made: [RecordID] = []
        let label = child.map { childLabels[$0.id] ?? $0.id.hex } ?? "nobody"
        // A laptop that knows it is revoked is in attentionRequired: the CLI refuses every local
        // change (exit 77); reads and its data stay.
        if try knowsItIsRevoked(node) {
            log("\(node.name) refused: attention required (it knows it is revoked)")
            return
        }
        // As every ledger command does, it first pays the allowance periods due.
        let paid = try payAllowances(node)
        var described = ""  // the trace line, and the diagram mark's tooltip
        do {
            switch kind {
            case 0:
                let c = try replica.addChild(name: Self.names.randomElement(using: &g)!)
                described = "\(node.name) add \(c.name) \(c.id.hexPrefix(8))"
                log(described)
                childLabels[c.id] = "c\(childLabels.count + 1)"
                record(node.index, .addChild(c.name, label: childLabels[c.id]))
            case 1:
                let name = Self.names.randomElement(using: &g)!
                let c = try replica.renameChild(target, to: name)
                described = "\(node.name) rename \(c.id.hexPrefix(8)) to \(name)"
                log(described)
                record(node.index, .rename("@" + label, name))
            case 2:
                let archive = !(child?.isArchived ?? false)
                let c = try replica.setArchived(target, archive)
                described = "\(node.name) \(archive ? "archive" : "restore") \(c.id.hexPrefix(8))"
                log(described)
                record(node.index, archive ? .archive("@" + label) : .restore("@" + label))
            case 3, 4:
                let p = try replica.post(target, signedCents: kind == 3 ? cents : -cents, note: "n\(events)", source: kind == 3 ? "give" : "take")
                made = [p.transaction.id]
                described = "\(node.name) \(kind == 3 ? "give" : "take") \(Money.format(cents: cents)) \(p.childName) \(p.transaction.id.tail)"
                log(described)
                record(node.index, .post(child: "@" + label, cents: kind == 3 ? cents : -cents, note: "n\(events)"))
            case 5:
                let give = chance(500)
                let ps = try replica.postAll(signedCents: give ? cents : -cents, note: "all\(events)", source: give ? "give-all" : "take-all")
                made = ps.map(\.transaction.id)
                try madeBatch(made, on: replica)
                described = "\(node.name) \(give ? "give-all" : "take-all") \(Money.format(cents: cents)) to \(ps.count): \(ps.map { $0.transaction.id.tail }.joined(separator: ","))"
                log(described)
                record(node.index, .postAll(cents: give ? cents : -cents, note: "all\(events)"))
            case Self.allowanceOperation:
                described = try drawnAllowance(node, replica, target: target, label: label, cents: cents)
                log(described)
            case Self.mergeOperation:
                described = try drawnMerge(node, replica, target: target, label: label, childCount: childCount)
                log(described)
            default:
                let mine = drawsUndoMine()
                let u = try undo(node, replica, mine: mine)
                made = u.entries.map(\.undo.id)
                described = "\(node.name) undo\(mine ? " mine" : "") " + u.entries.map { "\($0.original.id.tail) by \($0.undo.id.tail)" }.joined(separator: ",")
                log(described)
                record(node.index, .undo(mine: mine))
            }
            diagram?.mark(.operation, node.index, at: time.millis - startMillis, label: described)
        } catch let error as LedgerError {
            log("\(node.name) refused: \(error)")
        }
        try recordLocalChanges(node, after: before, acknowledging: paid + made)
    }

    /// Whether the replica has learnt that its own account is revoked: it is then in
    /// attentionRequired (no local changes, no sync; its data kept).
    func knowsItIsRevoked(_ node: SimNode) throws -> Bool {
        guard faults["revocation", default: 0] > 0, node.replica != nil, !ignoresRevocation(node.index) else { return false }
        return try node.listsItselfRevoked()
    }
}

import KidLedgerDomain

/// The result of ``Replica/mergeChild(_:into:)``.
public struct ChildMergeResult: Equatable, Sendable {
    /// The merged child: its totals are what it brought (its own and those of any child merged
    /// into it before); ``ChildSummary/mergedInto`` names the child it counts in now.
    public var from: ChildSummary
    /// The child it was merged into, with its totals after the merge.
    public var into: ChildSummary
    /// The merged child's allowance schedule, when it was running: it pays no more.
    public var stoppedAllowance: AllowanceSchedule?
}

extension Replica {
    /// Merges the child `fromQuery` names into the child `intoQuery` names: one replicated
    /// register write on FROM (``Field/childMergedInto``, INTO's id), after which every replica
    /// counts FROM's transactions (and those of any child merged into FROM) in INTO's balance and
    /// history. No transaction is changed; the merge is a view derived from the registers
    /// (docs/CRDT.md, "Child merges").
    ///
    /// - Throws: ``LedgerError/unknownChild(_:nearest:)`` and
    ///   ``LedgerError/ambiguousChild(_:candidates:)`` for either name,
    ///   ``LedgerError/alreadyMerged(_:into:)`` when FROM was merged already,
    ///   ``LedgerError/mergeTargetMerged(_:into:)`` when INTO was,
    ///   ``LedgerError/mergeIntoItself(_:)``, ``LedgerError/archived(_:)`` for an archived INTO,
    ///   ``LedgerError/overflow(child:)`` when the sum would leave Int64.
    @discardableResult
    public func mergeChild(_ fromQuery: String, into intoQuery: String) throws -> ChildMergeResult {
        let now = clock.nowMillis()
        let (_, planned) = try commitLocal { w, _ in
            let household = try Self.requireHousehold(w).id
            let from = try Self.resolveChildMatch(fromQuery, w)
            let into = try Self.resolveChildMatch(intoQuery, w)
            if from.namedMerged { throw LedgerError.alreadyMerged(from.named.name, into: from.child.name) }
            if into.namedMerged { throw LedgerError.mergeTargetMerged(into.named.name, into: into.child.name) }
            if from.child.id == into.child.id { throw LedgerError.mergeIntoItself(from.child.name) }
            if into.child.isArchived { throw LedgerError.archived(into.child.name) }
            let sum = from.child.balanceCents &+ into.child.balanceCents
            guard sum >= Int128(Int64.min), sum <= Int128(Int64.max) else { throw LedgerError.overflow(child: into.child.name) }
            let stopped = try Self.schedule(of: from.child, household: household, zone: Self.zone(w, zones), now: now, w).flatMap { $0.isActive ? $0 : nil }
            let op = Operation.setField(entity: from.child.id, field: .childMergedInto, value: .text(into.child.id.description),
                                        base: try Self.registerStamp(from.child.id, .childMergedInto, w))
            return ([op], (from: from.child, into: into.child.id, stopped: stopped))
        }
        return try store.read { r in
            let into = try Self.applied(Self.effectiveChild(planned.into, r)) {
                try $0.id == planned.into && Self.effectiveChild(planned.from.id, r)?.id == $0.id
            }
            var from = planned.from
            from.mergedInto = into.id
            return ChildMergeResult(from: from, into: into, stoppedAllowance: planned.stopped)
        }
    }

    /// Undoes a merge: the child `query` names (a child merged into another, by its name or id
    /// prefix) counts on its own again, with its own transactions (and those of the children
    /// merged into it). One register write on it: its own id, which is no link (so a merge and
    /// an unmerge made concurrently resolve by the register rule, like two renames). Returns the
    /// child, with its totals, and the child it counted in, with its totals after.
    ///
    /// - Throws: ``LedgerError/unknownChild(_:nearest:)``, ``LedgerError/ambiguousChild(_:candidates:)``,
    ///   ``LedgerError/unchanged(_:)`` when the child was not merged into another.
    @discardableResult
    public func unmergeChild(_ query: String) throws -> (child: ChildSummary, was: ChildSummary) {
        let (_, planned) = try commitLocal { w, _ in
            _ = try Self.requireHousehold(w)
            let match = try Self.resolveChildMatch(query, w)
            guard match.namedMerged else {
                throw LedgerError.unchanged("\(match.named.name) is not merged into another child (`kidledger children --all` shows merged children)")
            }
            let id = match.named.id
            var ops: [Operation] = [.setField(entity: id, field: .childMergedInto, value: .text(id.description),
                                              base: try Self.registerStamp(id, .childMergedInto, w))]
            // In a round (merged both ways while apart), the child that kept its identity has a
            // link too, which counts again once the round is open: it leads back to this child.
            // It is written off as well, so the other child stays what it was.
            let stored = try Self.childRowsAndKeys(w)
            if let root = stored.index[match.child.id], Self.linkLeads(from: root, to: id, stored.rows, stored.index) {
                ops.append(.setField(entity: match.child.id, field: .childMergedInto, value: .text(match.child.id.description),
                                     base: try Self.registerStamp(match.child.id, .childMergedInto, w)))
            }
            return (ops, (id: id, was: match.child.id))
        }
        return try store.read { r in
            let child = try Self.applied(Self.effectiveChild(planned.id, r)) { $0.id == planned.id }
            return (child, try Self.applied(Self.effectiveChild(planned.was, r)))
        }
    }

    /// Whether the merge links from the row at `start` (its own link first) reach the child `target`
    /// (at most one step per row: a round that does not pass through it ends the walk).
    static func linkLeads(from start: Int, to target: RecordID, _ rows: [ChildSummary], _ index: [RecordID: Int]) -> Bool {
        var current = start
        for _ in 0..<rows.count {
            guard let link = rows[current].mergeLink, link != rows[current].id, let next = index[link] else { return false }
            if link == target { return true }
            current = next
        }
        return false
    }

    /// The index of each row's effective child: follow its merge link (``ChildSummary/mergeLink``)
    /// to the child it names, and on, until a child without one. A link is ignored when it names
    /// the child itself or a child not in `rows` (not arrived yet, or no child at all). The links
    /// can form cycles (two laptops apart merge A into B and B into A): in a cycle, the child
    /// with the smallest id keeps its identity (its link is ignored), so every child of the
    /// cycle, and every child leading into it, ends there. A function of the rows alone, so every
    /// replica holding the same children and registers computes the same; iterative, each row
    /// visited once (docs/CRDT.md, "Child merges").
    static func mergeRoots(_ rows: [ChildSummary]) -> [Int] {
        let n = rows.count
        var roots = Array(0..<n)
        guard rows.contains(where: { $0.mergeLink != nil }) else { return roots }
        var index: [RecordID: Int] = [:]
        index.reserveCapacity(n)
        for i in 0..<n { index[rows[i].id] = i }
        var next = [Int](repeating: -1, count: n)
        for i in 0..<n {
            if let link = rows[i].mergeLink, link != rows[i].id, let j = index[link] { next[i] = j }
        }
        // 0: not visited; 1: on the path being walked; 2: its root is known.
        var state = [UInt8](repeating: 0, count: n)
        var path: [Int] = []
        for start in 0..<n where state[start] == 0 {
            path.removeAll(keepingCapacity: true)
            var x = start
            var root: Int
            while true {
                if state[x] == 2 { root = roots[x]; break }
                if state[x] == 1 {
                    // A cycle: the path from x's place on it. Its smallest id keeps its identity.
                    let from = path.firstIndex(of: x)!
                    var smallest = x
                    for c in path[from...] where rows[c].id < rows[smallest].id { smallest = c }
                    root = smallest
                    break
                }
                state[x] = 1
                path.append(x)
                if next[x] < 0 { root = x; break }
                x = next[x]
            }
            for p in path {
                roots[p] = root
                state[p] = 2
            }
        }
        return roots
    }
}

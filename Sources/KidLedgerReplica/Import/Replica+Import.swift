import KidLedgerDomain

/// What an import did.
public struct ImportResult: Equatable, Sendable {
    /// Transactions added.
    public var added = 0
    /// Rows whose transaction was already in the ledger (re-imports add nothing).
    public var alreadyPresent = 0
    /// Children created because no child of that name or id existed.
    public var childrenCreated: [String] = []
}

extension Replica {
    // long-function: one write transaction: match rows, find or create children, write; its steps share that transaction's state.
    /// Imports rows in one write transaction: all or nothing.
    ///
    /// A row's id is the file's `id` column when present; otherwise it is derived (UUIDv5) from
    /// the row's content and its occurrence among identical rows, so importing the same file
    /// twice adds nothing. A child is found by id, then by name; a missing one is created.
    public func importTransactions(_ rows: [ImportRow]) throws -> ImportResult {
        var generator = random
        let (_, result) = try commitLocalBatch { w, hlc in
            let household = try Self.requireHousehold(w)
            var result = ImportResult()
            var operations: [Operation] = []
            var created: [String: RecordID] = [:]
            // Children created by this import for a `childId` the ledger did not hold: the new child takes
            // that id, so importing the file again finds it instead of creating another.
            var createdByID = Set<RecordID>()
            var balances: [RecordID: Int128] = [:]
            var names: [RecordID: String] = [:]
            var seen: [String: Int] = [:]
            var idsInFile = Set<RecordID>()
            // Children merged into another are found by their id only; a balance's range is
            // checked on the effective child (docs/CRDT.md, "Child merges").
            let existing = try Self.children(w, includeArchived: true, includeMerged: true)
            let ownNames = existing.filter { $0.mergedInto == nil }
            let stored = try Self.childRowsAndKeys(w)
            for row in rows {
                let childID: RecordID
                if let id = row.childID, let c = existing.first(where: { $0.id == id }) {
                    childID = c.id
                    names[c.id] = c.name
                } else if let id = row.childID, createdByID.contains(id) {
                    childID = id
                } else {
                    let matches = ownNames.filter { $0.name.lowercased() == row.childName.lowercased() }
                    if matches.count > 1 { throw LedgerError.ambiguousChild(row.childName, candidates: matches.map(\.name)) }
                    if let c = matches.first {
                        childID = c.id
                        names[c.id] = c.name
                    } else if let id = created[row.childName.lowercased()] {
                        childID = id
                    } else {
                        let name = try Self.validName(row.childName.isEmpty ? "Child \(String(row.childID!.hex.prefix(8)))" : row.childName,
                                                      what: "child name (line \(row.line))")
                        if let id = row.childID, id != household.id {
                            childID = id
                            createdByID.insert(id)
                        } else {
                            childID = RecordID.random(using: &generator)
                        }
                        created[name.lowercased()] = childID
                        names[childID] = name
                        result.childrenCreated.append(name)
                        let order = Int64(existing.count + result.childrenCreated.count - 1)
                        operations += [.createChild(ChildRecord(id: childID, createdAtMillis: hlc.millis)),
                                       .setField(entity: childID, field: .childName, value: .text(name)),
                                       .setField(entity: childID, field: .childArchived, value: .flag(false)),
                                       .setField(entity: childID, field: .childSortOrder, value: .integer(order))]
                    }
                }
                let id: RecordID
                if let given = row.id {
                    id = given
                } else if let original = row.reverses {
                    id = LedgerTransaction.undoID(for: original)
                } else {
                    let content = "csv:\(row.childName.lowercased())|\(row.amountCents)|\(row.createdAtMillis)|\(row.note)|\(row.source)"
                    let occurrence = seen[content, default: 0]
                    seen[content] = occurrence + 1
                    id = RecordID.v5(namespace: .namespaceKidLedger, name: content + "#\(occurrence)")
                }
                if try w.get(Tables.transactions, Keys.id(id)) != nil || !idsInFile.insert(id).inserted {
                    result.alreadyPresent += 1
                    continue
                }
                let root = stored.root(of: childID)
                let effective = root.map { stored.rows[$0].id } ?? childID
                if balances[effective] == nil { balances[effective] = try root.map { try Self.mergedTotals($0, stored, w).sumCents } ?? 0 }
                let balance = balances[effective]! + Int128(row.amountCents)
                guard balance >= Int128(Int64.min), balance <= Int128(Int64.max) else {
                    throw LedgerError.overflow(child: root.map { stored.rows[$0].name } ?? names[childID] ?? row.childName)
                }
                balances[effective] = balance
                operations.append(.addTransaction(LedgerTransaction(
                    id: id, childID: childID, amountCents: row.amountCents, createdAtMillis: row.createdAtMillis,
                    note: row.note, source: row.source, reverses: row.reverses)))
                result.added += 1
            }
            var batches: [[Operation]] = []
            var start = 0
            while start < operations.count {
                var end = min(start + Limits.operationsPerChangeMax, operations.count)
                // Keep a child's creation and its registers in one change.
                while end < operations.count, case .setField = operations[end] { end -= 1 }
                batches.append(Array(operations[start..<end]))
                start = end
            }
            return (batches, result)
        }
        random = generator
        return result
    }
}

import KidLedgerDomain

/// Which entry an undo starts from.
public enum UndoTarget: Equatable, Sendable {
    /// The newest eligible entry this replica knows, across all children and authors.
    case newest
    /// The newest eligible entry made by this member (any of its devices' origins; without
    /// membership, this device's origin).
    case mine
    /// The entry with this id.
    case entry(RecordID)
}

/// One compensating entry of an undo.
public struct UndoEntry: Equatable, Sendable {
    /// The compensating entry.
    public var undo: LedgerTransaction
    /// The transaction it reverses.
    public var original: LedgerTransaction
    /// The child's name.
    public var childName: String
    /// The child's balance after it.
    public var balanceCents: Int128
}

/// The result of an undo: the entry it started from (the first of ``entries``), and every
/// compensation its one change holds (one per remaining entry of a `give-all`/`take-all` batch).
public struct UndoResult: Equatable, Sendable {
    /// The compensating entry of the entry the undo started from.
    public var undo: LedgerTransaction
    /// The transaction the undo started from.
    public var original: LedgerTransaction
    /// Its child's name.
    public var childName: String
    /// Its child's balance after the undo.
    public var balanceCents: Int128
    /// Who made the reversed entries (a batch has one author).
    public var originalAuthor: Author
    /// Every compensation of the change, the started-from entry's first, then the rest of its
    /// batch in time-index order (oldest first).
    public var entries: [UndoEntry]
}

extension Replica {
    /// The sources whose entries were written as one batch (one change, one HLC reading, one
    /// author): undoing one entry of such a batch reverses the batch's remaining entries.
    public static let batchSources: Set<String> = ["give-all", "take-all"]

    /// Reverses `target` (the newest eligible entry by default) and, for an entry of a
    /// `give-all`/`take-all` batch, every remaining entry of that batch, as one local change: every
    /// replica applies all of its compensations or none. Each compensating entry's id is derived
    /// from its original's (``LedgerTransaction/undoID(for:)``), so two devices undoing the same
    /// entry or batch (or one an entry and one its batch) compensate each entry once.
    ///
    /// - Throws: ``LedgerError/nothingToUndo``, ``LedgerError/unknownEntry(_:)``,
    ///   ``LedgerError/cannotUndo(_:)``, ``LedgerError/overflow(child:)``.
    @discardableResult
    public func undo(_ target: UndoTarget = .newest) throws -> UndoResult {
        let mine = mineFilter
        let (_, result) = try commitLocal { w, hlc in
            _ = try Self.requireHousehold(w)
            let plan = try Self.undoPlan(target, mine: mine, w)
            var authors = AuthorNames(w)
            let author = try authors.author(plan.origin)
            var children: [RecordID: ChildSummary] = [:]
            var entries: [UndoEntry] = []
            // Balances are checked on each entry's effective child: the one its child was merged
            // into, if it was (docs/CRDT.md, "Child merges").
            var effective: [RecordID: RecordID] = [:]
            for original in plan.originals {
                if effective[original.childID] == nil, let child = try Self.effectiveChild(original.childID, w) {
                    effective[original.childID] = child.id
                    if children[child.id] == nil { children[child.id] = child }
                }
                let amount = -original.amountCents
                // An entry waiting for its child (never the started-from one) counts in no
                // balance yet, and its compensation waits with it.
                if let id = effective[original.childID], var child = children[id] {
                    child.balanceCents = try Self.checkedBalance(child, adding: amount)
                    children[id] = child
                } else if original.id == plan.originals[0].id {
                    throw LedgerError.corrupted("child of indexed transaction")
                }
                let note = String(("undo " + (original.note.isEmpty ? Money.format(cents: original.amountCents) : original.note))
                    .utf8.prefix(Limits.noteBytesMax)) ?? "undo"
                let t = LedgerTransaction(id: LedgerTransaction.undoID(for: original.id), childID: original.childID,
                                          amountCents: amount, createdAtMillis: hlc.millis, note: note,
                                          source: "undo", reverses: original.id)
                entries.append(UndoEntry(undo: t, original: original,
                                         childName: effective[original.childID].flatMap { children[$0]?.name } ?? "?", balanceCents: 0))
            }
            // Each balance is the (effective) child's after the whole change.
            for i in entries.indices {
                entries[i].balanceCents = effective[entries[i].original.childID].flatMap { children[$0]?.balanceCents } ?? 0
            }
            let first = entries[0]
            return (entries.map { .addTransaction($0.undo) },
                    UndoResult(undo: first.undo, original: first.original, childName: first.childName,
                               balanceCents: first.balanceCents, originalAuthor: author, entries: entries))
        }
        return result
    }

    /// What ``undo(_:)`` would reverse now, by the same rule, each entry with its child's name and
    /// its author (the started-from entry first); throws what ``undo(_:)`` would throw. Changes nothing.
    public func undoPreview(_ target: UndoTarget = .newest) throws -> [HistoryEntry] {
        let mine = mineFilter
        return try store.read { r in
            _ = try Self.requireHousehold(r)
            let plan = try Self.undoPlan(target, mine: mine, r)
            var authors = AuthorNames(r)
            var names: [RecordID: String] = [:]
            let stored = try Self.childRowsAndKeys(r)
            return try plan.originals.map { t in
                try Self.historyEntry(t, origin: plan.origin, reversed: false, r, stored, &authors, &names)
            }
        }
    }

    /// Whether an origin's entries are this member's: its claimed key is the signer's, or it is
    /// this device's own origin.
    private var mineFilter: @Sendable (ReplicaID, any KeyValueReader) throws -> Bool {
        let own = replicaID
        let key = signer?.key
        return { origin, r in
            if origin == own { return true }
            guard let key else { return false }
            return try r.get(Tables.claims, Keys.origin(origin)) == key
        }
    }

    /// The entries an undo reverses: the started-from entry first, then the other remaining
    /// entries of its batch (same time, same author, same batch source, not an undo, not already
    /// undone) in time-index order.
    struct UndoPlan {
        var origin: ReplicaID
        var originals: [LedgerTransaction]
    }

    static func undoPlan(_ target: UndoTarget, mine: (ReplicaID, any KeyValueReader) throws -> Bool,
                         _ r: any KeyValueReader) throws -> UndoPlan {
        let first: LedgerTransaction, origin: ReplicaID
        switch target {
        case .newest:
            guard let found = try newestUndoable(r, where: { _ in true }) else { throw LedgerError.nothingToUndo }
            (first, origin) = found
        case .mine:
            guard let found = try newestUndoable(r, where: { try mine($0, r) }) else { throw LedgerError.nothingOfYoursToUndo }
            (first, origin) = found
        case .entry(let id):
            guard let raw = try r.get(Tables.transactions, Keys.id(id)) else { throw LedgerError.unknownEntry(id.description) }
            let t = try decodeStoredTransaction(raw)
            if t.isUndo { throw LedgerError.cannotUndo("entry \(id) is itself an undo: an undo cannot be undone") }
            if try isUndone(t.id, r) { throw LedgerError.cannotUndo("entry \(id) is already undone") }
            guard let value = try r.get(Tables.byTime, Keys.byTime(t)) else {
                throw LedgerError.cannotUndo("entry \(id) waits for its child to arrive by sync")
            }
            guard let author = Bytes.u64(value) else { throw LedgerError.corrupted("transaction \(id) without its author") }
            (first, origin) = (t, ReplicaID(author))
        }
        var originals = [first]
        if batchSources.contains(first.source) {
            // The batch's other entries: placed ones (the time index, by that millisecond), then
            // those waiting for their child (a child created elsewhere, not arrived here yet):
            // their compensations wait with them, so every replica ends up with the whole batch undone.
            func consider(_ key: [UInt8], _ value: [UInt8]) throws {
                let id = try Keys.trailingID(key)
                guard id != first.id, Bytes.u64(value) == origin.rawValue else { return }
                guard let raw = try r.get(Tables.transactions, Keys.id(id)) else {
                    throw LedgerError.corrupted("indexed transaction \(id) missing")
                }
                let t = try decodeStoredTransaction(raw)
                if t.createdAtMillis == first.createdAtMillis, t.source == first.source, !t.isUndo, try !isUndone(t.id, r) {
                    originals.append(t)
                }
            }
            try r.scan(Tables.byTime, prefix: Keys.byTimePrefix(first.createdAtMillis), from: nil, reverse: false) { key, value in
                try consider(key, value)
                return true
            }
            try r.scan(Tables.deferred, prefix: [], from: nil, reverse: false) { key, value in
                try consider(key, value)
                return true
            }
            guard originals.count <= Limits.operationsPerChangeMax else {
                throw LedgerError.cannotUndo("its batch has more than \(Limits.operationsPerChangeMax) entries; undo them by id")
            }
        }
        return UndoPlan(origin: origin, originals: originals)
    }

    /// Whether an undo entry for `id` exists.
    static func isUndone(_ id: RecordID, _ r: any KeyValueReader) throws -> Bool {
        try r.get(Tables.transactions, Keys.id(LedgerTransaction.undoID(for: id))) != nil
    }

    /// The newest transaction not yet undone (and not an undo) whose author's origin passes
    /// `accept`, with that origin. Entries of the same millisecond are ordered by id (the
    /// time index's key order), the same on every replica.
    static func newestUndoable(_ r: any KeyValueReader,
                               where accept: (ReplicaID) throws -> Bool) throws -> (LedgerTransaction, ReplicaID)? {
        var found: (LedgerTransaction, ReplicaID)?
        try r.scan(Tables.byTime, prefix: [], from: nil, reverse: true) { key, value in
            let id = try Keys.trailingID(key)
            guard let origin = Bytes.u64(value) else { throw LedgerError.corrupted("transaction \(id) without its author") }
            guard try accept(ReplicaID(origin)) else { return true }
            guard let raw = try r.get(Tables.transactions, Keys.id(id)) else {
                throw LedgerError.corrupted("indexed transaction \(id) missing")
            }
            let t = try decodeStoredTransaction(raw)
            if t.isUndo { return true }
            if try isUndone(t.id, r) { return true }
            found = (t, ReplicaID(origin))
            return false
        }
        return found
    }
}

import KidLedgerDomain

/// A household as users see it.
public struct HouseholdSummary: Equatable, Sendable {
    /// Stable id.
    public var id: RecordID
    /// Current name (the register's winner).
    public var name: String
    /// Creation time, Unix milliseconds.
    public var createdAtMillis: Int64
}

/// A child as users see it: merged registers plus derived balance.
public struct ChildSummary: Equatable, Sendable {
    /// Stable id.
    public var id: RecordID
    /// Current name.
    public var name: String
    /// Whether archived.
    public var isArchived: Bool
    /// Position in lists.
    public var sortOrder: Int64
    /// Creation time, Unix milliseconds.
    public var createdAtMillis: Int64
    /// Sum of the child's applied transactions.
    public var balanceCents: Int128
    /// How many applied transactions.
    public var transactionCount: UInt64
    /// The child's allowance registers, as stored (``AllowanceSchedule``).
    var allowance = AllowanceRegisters()
    /// For a child merged into another (`kidledger child merge`): the child it counts in now,
    /// the end of its merge links (docs/CRDT.md, "Child merges"); nil for a child that keeps its
    /// own identity. A merged child's summary holds its own totals; its effective child's holds
    /// the sum of every child merged into it and its own.
    public var mergedInto: RecordID? = nil
    /// The child's merge register as stored (the child it was merged into), if it names one.
    var mergeLink: RecordID? = nil
}

/// One line of history.
public struct HistoryEntry: Equatable, Sendable {
    /// The transaction.
    public var transaction: LedgerTransaction
    /// Its child's current name.
    public var childName: String
    /// Whether an undo entry for it exists.
    public var isReversed: Bool
    /// Who wrote the version kept (the origin of its change, that origin's member and name).
    public var author: Author
    /// The versions with the same id that lost to it (same-id conflicts; not the designed
    /// merge of two undo entries), each with its author.
    public var conflicting: [ConflictVersion] = []
}

extension Replica {
    /// The household, or nil before `init`.
    public func household() throws -> HouseholdSummary? {
        try store.read { r in try Self.household(r) }
    }

    /// The household's genesis record as its owner signed it (owner, salt, recovery key,
    /// signature), or nil before `init` or `join`.
    public func genesis() throws -> Household? {
        try store.read { r in
            guard let pin = try Self.pinnedHousehold(r), let raw = try r.get(Tables.households, Keys.id(pin.id)) else { return nil }
            do { return try RecordCodec.decodeHousehold(raw) } catch { throw LedgerError.corrupted("household record") }
        }
    }

    static func household(_ r: any KeyValueReader) throws -> HouseholdSummary? {
        // Only the pinned household's genesis is ever applied (any other is forged), so the
        // households table holds at most its record.
        guard let (pin, raw) = try pinnedHouseholdRecord(r) else { return nil }
        let h: Household
        do { h = try RecordCodec.decodeHousehold(raw) } catch { throw LedgerError.corrupted("household record") }
        let name = try register(pin.id, .householdName, r).flatMap { if case .text(let s) = $0 { s } else { nil } } ?? h.name
        return HouseholdSummary(id: pin.id, name: name, createdAtMillis: h.createdAtMillis)
    }

    /// The household this replica belongs to (see `Keys.household`), or nil before it knows one.
    /// Its pin never changes once set (but for `join`'s, which learns its owner from the genesis
    /// in the transaction that stores it, and a pin that learns its genesis's hash with the first
    /// genuine genesis it applies), and is set in the transaction that stores the first
    /// household record or before it, so ``household(_:)`` may keep its answer on the households
    /// and registers tables alone. `ownerPending`: the owner is not known yet (then `owner` is empty),
    /// only that the household has one. `genesis`: the ``Membership/genesisHash(_:)`` of the one
    /// genesis this replica applies (owned households; nil until known, see ``HouseholdPin``).
    static func pinnedHousehold(_ r: any KeyValueReader) throws -> HouseholdPin? {
        guard let raw = try r.get(Tables.meta, Keys.household) else { return nil }
        return try HouseholdPin(decoding: raw)
    }

    /// The pin and the stored record (undecoded) of the pinned household, or nil until both are
    /// here: only the pinned household's genesis is ever applied.
    static func pinnedHouseholdRecord(_ r: any KeyValueReader) throws -> (pin: HouseholdPin, record: [UInt8])? {
        guard let pin = try pinnedHousehold(r), let record = try r.get(Tables.households, Keys.id(pin.id)) else { return nil }
        return (pin, record)
    }

    /// The ``Membership/genesisHash(_:)`` of this replica's household's genesis (what an
    /// invitation carries), or nil for a household without membership or before `init`/`join`.
    public func genesisHash() throws -> [UInt8]? {
        try store.read { r in
            guard let pin = try Self.pinnedHousehold(r), pin.ownerPending || !pin.owner.isEmpty else { return nil }
            if let hash = pin.genesis { return hash }
            guard let raw = try r.get(Tables.households, Keys.id(pin.id)) else { return nil }
            do { return Membership.genesisHash(try RecordCodec.decodeHousehold(raw)) } catch {
                throw LedgerError.corrupted("household record")
            }
        }
    }

    /// Pins the household this replica belongs to: from then on only the genesis of `id`, owned by
    /// `owner` (empty: a household without membership), signed by it and, with `genesis`, whose
    /// ``Membership/genesisHash(_:)`` is `genesis` (without: the first genuine one it applies), is
    /// applied; every other household record is forged.
    ///
    /// - Throws: ``LedgerError/invalid(_:)`` when the replica already belongs to another household.
    public func pinHousehold(_ id: RecordID, owner: [UInt8], genesis: [UInt8]? = nil) throws {
        try store.write { w in try Self.pin(id, owner: owner, genesis: genesis, in: w) }
    }

    /// Pins an owned household whose owner this replica learns from its genesis (`join` does,
    /// before its first sync, from the invitation: the inviting device is the current owner,
    /// which an owner transfer may have made another key than the genesis owner). Only the genesis
    /// of `id` whose ``Membership/genesisHash(_:)`` is `genesis` (the invitation's) is then
    /// applied, and only if genuine: its id is derived from its owner key and salt and it is
    /// signed by that owner; it completes the pin. Any other creation record of `id`, even one the
    /// owner key signed, is forged (a second genesis: the owner key is compromised).
    public func pinOwnedHousehold(_ id: RecordID, genesis: [UInt8]) throws {
        guard genesis.count == Membership.genesisHashBytes else { throw LedgerError.invalid("a genesis hash is 32 bytes") }
        try store.write { w in
            if let pin = try Self.pinnedHousehold(w) {
                guard pin.id == id, pin.ownerPending || !pin.owner.isEmpty, pin.genesis == nil || pin.genesis == genesis else {
                    throw LedgerError.invalid("this replica belongs to household \(pin.id), not \(id)")
                }
                if pin.genesis == nil { try w.put(Tables.meta, Keys.household, HouseholdPin(id: id, owner: pin.owner, ownerPending: pin.ownerPending, genesis: genesis).encoded) }
                return
            }
            try w.put(Tables.meta, Keys.household, HouseholdPin(id: id, owner: [], ownerPending: true, genesis: genesis).encoded)
        }
    }

    static func pin(_ id: RecordID, owner: [UInt8], genesis: [UInt8]? = nil, in w: any KeyValueWriter) throws {
        var genesis = owner.isEmpty ? nil : genesis
        if let pin = try pinnedHousehold(w) {
            guard pin.id == id && (pin.owner == owner || (pin.ownerPending && !owner.isEmpty)),
                  pin.genesis == nil || genesis == nil || pin.genesis == genesis else {
                throw LedgerError.invalid("this replica belongs to household \(pin.id), not \(id)")
            }
            if !pin.ownerPending && (pin.genesis != nil || genesis == nil) { return }
            genesis = genesis ?? pin.genesis
        }
        try w.put(Tables.meta, Keys.household, HouseholdPin(id: id, owner: owner, ownerPending: false, genesis: genesis).encoded)
    }

    /// Completes a pin that does not name its genesis yet while the households table holds the
    /// pinned household's record: a store written before genesis pinning (issue 39) pins the
    /// genesis it holds, the one it shows today. When its log holds other versions of that genesis
    /// (kept as same-id conflicts before: someone holding the owner key signed a second one), the
    /// version this replica's own origin wrote (the laptop that created the household) is pinned
    /// if there is one (`origin` nil: the stored one). Returns whether another version than the stored one was pinned, or the
    /// log holds several (then the caller rebuilds: they are judged again, as forged).
    static func completeGenesisPin(replica origin: ReplicaID?, in w: any KeyValueWriter) throws -> Bool {
        guard let pin = try pinnedHousehold(w), !pin.ownerPending, !pin.owner.isEmpty, pin.genesis == nil,
              let stored = try w.get(Tables.households, Keys.id(pin.id)) else { return false }
        var chosen = stored
        var others = false
        try w.scan(Tables.conflicts, prefix: [Conflict.household] + Keys.id(pin.id)) { _, value in
            others = true
            let loser = try decodeConflictValue(value)
            if loser.origin == origin { chosen = loser.payload }
            return true
        }
        let genesis: Household
        do { genesis = try RecordCodec.decodeHousehold(chosen) } catch { throw LedgerError.corrupted("household record") }
        try w.put(Tables.meta, Keys.household,
                  HouseholdPin(id: pin.id, owner: pin.owner, ownerPending: false, genesis: Membership.genesisHash(genesis)).encoded)
        return others
    }

    static func requireHousehold(_ r: any KeyValueReader) throws -> HouseholdSummary {
        guard let h = try household(r) else { throw LedgerError.noHousehold }
        return h
    }

    static func register(_ entity: RecordID, _ field: Field, _ r: any KeyValueReader) throws -> FieldValue? {
        guard let raw = try r.get(Tables.registers, Keys.register(entity, field)) else { return nil }
        return try StoredRegister.decode(raw).value
    }

    static func child(_ id: RecordID, _ r: any KeyValueReader) throws -> ChildSummary? {
        guard var summary = try childRowWithRegisters(Keys.id(id), r) else { return nil }
        let aggregate = try Aggregate.load(id, r)
        summary.balanceCents = aggregate.sumCents
        summary.transactionCount = aggregate.count
        return summary
    }

    /// The row of the child stored under `key` with its registers (names, flags, order), before
    /// its totals; nil when there is no such child.
    private static func childRowWithRegisters(_ key: [UInt8], _ r: any KeyValueReader) throws -> ChildSummary? {
        guard let raw = try r.get(Tables.children, key) else { return nil }
        var row = try childRow(Keys.id(in: key, at: 0), record: raw)
        // The child's registers are adjacent (entity + field): one range read, not a lookup per field.
        try r.scan(Tables.registers, prefix: key) { key, value in
            if key.count == 17 { try applyRegister(key[16], value, to: &row) }
            return true
        }
        return row
    }

    /// The row of child `id` with stored record `raw`, before its registers and totals.
    private static func childRow(_ id: RecordID, record raw: [UInt8]) throws -> ChildSummary {
        let record: ChildRecord
        do { record = try RecordCodec.decodeChild(raw) } catch { throw LedgerError.corrupted("child record") }
        return ChildSummary(id: id, name: "(unnamed)", isArchived: false, sortOrder: 0,
                            createdAtMillis: record.createdAtMillis, balanceCents: 0, transactionCount: 0)
    }

    /// Sets what register `field` of a child holds (its name, archived flag or sort order; other
    /// fields are ignored) in `summary`.
    private static func applyRegister(_ field: UInt8, _ raw: [UInt8], to summary: inout ChildSummary) throws {
        switch field {
        case Field.childName.rawValue:
            if case .text(let s) = try StoredRegister.decode(raw).value { summary.name = s }
        case Field.childArchived.rawValue:
            if case .flag(let b) = try StoredRegister.decode(raw).value { summary.isArchived = b }
        case Field.childSortOrder.rawValue:
            if case .integer(let i) = try StoredRegister.decode(raw).value { summary.sortOrder = i }
        case Field.allowanceAmount.rawValue...Field.allowanceStoppedAt.rawValue:
            summary.allowance.apply(field, try StoredRegister.decode(raw).value)
        case Field.childMergedInto.rawValue:
            if case .text(let s) = try StoredRegister.decode(raw).value { summary.mergeLink = RecordID(string: s) }
        default:
            break
        }
    }

    /// Every child with its registers but not its totals (balance and count are zero), in id
    /// order: the child records and the registers are each read in one pass, joined on the id.
    static func childRows(_ r: any KeyValueReader) throws -> [ChildSummary] {
        try childRowsAndKeys(r).rows
    }

    /// ``childRows(_:)`` and each row's key in the children table.
    final class ChildRows {
        let rows: [ChildSummary]
        let keys: [[UInt8]]
        /// Indexes of `rows` in list order (``listOrder(_:_:)``), sorted once. The
        /// rows are compared in place, through a buffer pointer valid for the whole sort (the
        /// array's own subscript copied both rows for every comparison).
        private(set) lazy var order: [Int] = rows.withUnsafeBufferPointer { rows in
            rows.indices.sorted { Replica.listOrder(rows[$0], rows[$1]) }
        }
        /// `rows` in list order, built once.
        private(set) lazy var ordered: [ChildSummary] = order.map { rows[$0] }
        /// The rows' names, built once: every resolved query compares them all
        /// (reading a name from `rows` copied the whole row each time).
        private(set) lazy var names: [String] = rows.map(\.name)
        /// The index of each row's effective child (itself unless it was merged into another):
        /// ``Replica/mergeRoots(_:)``, computed once.
        private(set) lazy var roots: [Int] = Replica.mergeRoots(rows)
        /// Whether any child was merged into another.
        private(set) lazy var hasMerges: Bool = roots.indices.contains { roots[$0] != $0 }
        /// For each effective child with others merged into it: its index, and the indexes of
        /// every child whose effective child it is (itself first).
        private(set) lazy var members: [Int: [Int]] = {
            var members: [Int: [Int]] = [:]
            guard hasMerges else { return members }
            for i in roots.indices where roots[i] != i { members[roots[i], default: [roots[i]]].append(i) }
            return members
        }()
        /// The index of each child's row, by id.
        private(set) lazy var index: [RecordID: Int] = Dictionary(uniqueKeysWithValues: rows.indices.map { (rows[$0].id, $0) })
        init(_ rows: [ChildSummary], _ keys: [[UInt8]]) { self.rows = rows; self.keys = keys }

        /// The indexes of the children whose effective child is the row at `root` (itself first).
        func members(of root: Int) -> [Int] { members[root] ?? [root] }

        /// The row index of the effective child of the child `id`, or nil for an unknown child.
        func root(of id: RecordID) -> Int? { index[id].map { roots[$0] } }
    }

    /// ``childRows(_:)`` and each row's key in the children table.
    static func childRowsAndKeys(_ r: any KeyValueReader) throws -> ChildRows {
        let (rows, keys) = try readChildRowsAndKeys(r)
        return ChildRows(rows, keys)
    }

    static func readChildRowsAndKeys(_ r: any KeyValueReader) throws -> (rows: [ChildSummary], keys: [[UInt8]]) {
        var keys: [[UInt8]] = []
        var rows: [ChildSummary] = []
        try r.scan(Tables.children) { key, value in
            let id = try Keys.storedID(key)
            keys.append(key)
            rows.append(try childRow(id, record: value))
            return true
        }
        guard let first = keys.first else { return (rows, keys) }
        // Registers are keyed entity (16) + field (1), in the children's key order: walk both.
        var j = 0
        try r.scan(Tables.registers, prefix: [], from: first, reverse: false) { key, value in
            guard key.count == 17 else { return true }
            var order = 0
            while j < keys.count {
                order = keys[j].withUnsafeBytes { c in
                    key.withUnsafeBytes { k in KeyBytes.compare(c, UnsafeRawBufferPointer(rebasing: k[0..<16])) }
                }
                if order >= 0 { break }
                j += 1
            }
            if j == keys.count { return false }
            if order == 0 { try applyRegister(key[16], value, to: &rows[j]) }  // else another entity's
            return true
        }
        return (rows, keys)
    }

    /// The order of child lists: sort order, then name, then id. Compared field by field as the
    /// tuple `(sortOrder, name, id)` compares, without building tuples of copies.
    static func listOrder(_ a: ChildSummary, _ b: ChildSummary) -> Bool {
        if a.sortOrder != b.sortOrder { return a.sortOrder < b.sortOrder }
        if a.name != b.name { return a.name < b.name }
        return a.id < b.id
    }

    /// Every child (or only active ones), ordered by sort order, then name, then id. A child
    /// merged into another is left out unless `includeMerged` (then with ``ChildSummary/mergedInto``
    /// set and its own totals); every other child's totals are the sums over the children merged
    /// into it and its own (docs/CRDT.md, "Child merges").
    public func children(includeArchived: Bool = false, includeMerged: Bool = false) throws -> [ChildSummary] {
        try store.read { r in try Self.children(r, includeArchived: includeArchived, includeMerged: includeMerged) }
    }

    /// Every child's row, merged children too, in the order ``children(includeArchived:includeMerged:)``
    /// lists them with archived and merged children, but without reading the totals (every
    /// balance and count is zero, and ``ChildSummary/mergedInto`` is not set): names, flags and order only.
    public func childrenWithoutTotals() throws -> [ChildSummary] {
        try store.read { r in
            try Self.childRowsAndKeys(r).ordered
        }
    }

    /// Walks the stored totals of the children whose keys are `keys` (ascending) in one pass over
    /// the totals table, calling `body` with the index in `keys` and the raw totals of each child
    /// that has an entry.
    static func joinTotals(_ keys: [[UInt8]], _ r: any KeyValueReader, _ body: (Int, [UInt8]) throws -> Void) throws {
        guard let first = keys.first else { return }
        var j = 0
        try r.scan(Tables.aggregates, prefix: [], from: first, reverse: false) { key, value in
            var order = 0
            while j < keys.count {
                order = KeyBytes.compare(keys[j], key)
                if order >= 0 { break }
                j += 1
            }
            if j == keys.count { return false }
            if order == 0 { try body(j, value) }
            return true
        }
    }

    static func children(_ r: any KeyValueReader, includeArchived: Bool,
                         includeMerged: Bool = false) throws -> [ChildSummary] {
        let stored = try childRowsAndKeys(r)
        var rows = stored.rows
        let keys = stored.keys
        guard stored.hasMerges else {
            // The totals are keyed by child id too: one pass over them, joined like the registers
            // (a child without an entry has zero totals).
            try joinTotals(keys, r) { j, value in
                guard includeArchived || !rows[j].isArchived else { return }
                let aggregate = try Aggregate.decode(value)
                rows[j].balanceCents = aggregate.sumCents
                rows[j].transactionCount = aggregate.count
            }
            return stored.order.compactMap { includeArchived || !rows[$0].isArchived ? rows[$0] : nil }
        }
        // Each child's totals go to its effective child's; a merged child keeps its own too.
        let roots = stored.roots
        var sums = [Int128](repeating: 0, count: rows.count), counts = [UInt64](repeating: 0, count: rows.count)
        try joinTotals(keys, r) { j, value in
            guard includeArchived || !rows[roots[j]].isArchived else { return }
            let aggregate = try Aggregate.decode(value)
            sums[roots[j]] &+= aggregate.sumCents
            counts[roots[j]] &+= aggregate.count
            if roots[j] != j {
                rows[j].balanceCents = aggregate.sumCents
                rows[j].transactionCount = aggregate.count
            }
        }
        for i in rows.indices {
            if roots[i] == i {
                rows[i].balanceCents = sums[i]
                rows[i].transactionCount = counts[i]
            } else {
                rows[i].mergedInto = rows[roots[i]].id
            }
        }
        return stored.order.compactMap { i in
            (includeMerged || roots[i] == i) && (includeArchived || !rows[roots[i]].isArchived) ? rows[i] : nil
        }
    }

    /// Finds a child by name or by id prefix (at least 4 hex digits): an exact name match wins,
    /// else a match up to case and accents (``Text/folded(_:)``); of several matches an active
    /// child beats archived ones (docs/CRDT.md, "Child names").
    ///
    /// - Throws: ``LedgerError/unknownChild(_:nearest:)`` (with the nearest name, if one is near
    ///   enough to be a typo) or ``LedgerError/ambiguousChild(_:candidates:)``.
    public func resolveChild(_ query: String) throws -> ChildSummary {
        try store.read { r in try Self.resolveChild(query, r) }
    }

    static func resolveChild(_ query: String, _ r: any KeyValueReader) throws -> ChildSummary {
        try resolveChildMatch(query, r).child
    }

    /// What a query names: the row it matched (`named`, a merged child's when it named one) and
    /// its effective child (`child`, with its totals: the sums over every child merged into it).
    struct ChildMatch {
        var named: ChildSummary
        var child: ChildSummary
        /// Whether the query named a child merged into another.
        var namedMerged: Bool { named.id != child.id }
    }

    /// ``resolveChild(_:_:_:)``, with the row the query matched. At each step (exact name, folded
    /// name, id prefix), children that keep their own identity beat children merged into another;
    /// a merged child stands for its effective child (docs/CRDT.md, "Child names" and "Child merges").
    static func resolveChildMatch(_ query: String, _ r: any KeyValueReader) throws -> ChildMatch {
        // Names, flags and ids decide the match; only the match's totals are read, and only the
        // matches are put in list order (the candidates of an ambiguous query).
        let stored = try childRowsAndKeys(r)
        let all = stored.rows, names = stored.names
        let roots = stored.hasMerges ? stored.roots : nil
        func isRoot(_ i: Int) -> Bool { roots.map { $0[i] == i } ?? true }
        let trimmed = Text.trimmed(query)
        // Indexes first, so only the matches are copied; the ids are read in place (the array's
        // subscript copied each whole row), through a pointer used only in the closure.
        func preferRoots(_ indexes: [Int]) -> [Int] {
            let own = indexes.filter(isRoot)
            return own.isEmpty ? indexes : own
        }
        var indexes = preferRoots(names.indices.filter { names[$0] == trimmed })
        if indexes.isEmpty {
            let wanted = Text.folded(trimmed)
            indexes = preferRoots(names.indices.filter { Self.equalFolded(names[$0], folded: wanted) })
        }
        if indexes.isEmpty, let digits = hexDigits(trimmed.lowercased()), digits.count >= 4 {
            indexes = preferRoots(all.withUnsafeBufferPointer { rows in
                rows.indices.filter { Self.hex(of: rows[$0].id, hasPrefix: digits) }
            })
        }
        // Each match stands for its effective child (once).
        var candidates: [Int] = []
        for i in indexes {
            let root = roots?[i] ?? i
            if !candidates.contains(root) { candidates.append(root) }
        }
        if candidates.count > 1 {
            let active = candidates.filter { !all[$0].isArchived }
            if !active.isEmpty { candidates = active }
        }
        switch candidates.count {
        case 1:
            let root = candidates[0]
            var match = all[root]
            let totals = try mergedTotals(root, stored, r)
            match.balanceCents = totals.sumCents
            match.transactionCount = totals.count
            var named = match
            if !indexes.contains(root), let i = indexes.first(where: { (roots?[$0] ?? $0) == root }) {
                named = all[i]
                named.mergedInto = match.id
                let own = try Aggregate.load(named.id, r)
                named.balanceCents = own.sumCents
                named.transactionCount = own.count
            }
            return ChildMatch(named: named, child: match)
        case 0:
            throw LedgerError.unknownChild(query, nearest: nearestName(trimmed, all.indices.filter(isRoot).map { all[$0] }))
        default:
            let matches = candidates.map { all[$0] }.sorted(by: listOrder)
            throw LedgerError.ambiguousChild(query, candidates: matches.map {
                "\($0.name) (\(String($0.id.hex.prefix(8)))\($0.isArchived ? ", archived" : ""))"
            })
        }
    }

    /// The totals of the child at `root` of `stored`: the sums over every child whose effective
    /// child it is (its own alone when none was merged into it).
    static func mergedTotals(_ root: Int, _ stored: ChildRows, _ r: any KeyValueReader) throws -> (sumCents: Int128, count: UInt64) {
        var sum: Int128 = 0, count: UInt64 = 0
        for i in stored.members(of: root) {
            let aggregate = try Aggregate.load(stored.rows[i].id, r)
            sum &+= aggregate.sumCents
            count &+= aggregate.count
        }
        return (sum, count)
    }

    /// The effective child of the child `id` (itself unless it was merged into another) with its
    /// totals (the sums over every child merged into it), or nil for a child this replica does
    /// not hold.
    static func effectiveChild(_ id: RecordID, _ r: any KeyValueReader) throws -> ChildSummary? {
        let stored = try childRowsAndKeys(r)
        guard let root = stored.root(of: id) else { return nil }
        var child = stored.rows[root]
        let totals = try mergedTotals(root, stored, r)
        child.balanceCents = totals.sumCents
        child.transactionCount = totals.count
        return child
    }

    /// The active children that keep their own identity (not merged into another): the ones
    /// whose names `child add`, `child rename` and `child restore` keep apart.
    static func activeNameHolders(_ r: any KeyValueReader) throws -> [ChildSummary] {
        let stored = try childRowsAndKeys(r)
        guard stored.hasMerges else { return stored.rows.filter { !$0.isArchived } }
        return stored.rows.indices.filter { stored.roots[$0] == $0 && !stored.rows[$0].isArchived }.map { stored.rows[$0] }
    }

    /// The name of the child `query` (which matched none) most likely meant: the nearest by
    /// ``Suggestions/nearest(_:in:)`` of the folded names, active children first.
    static func nearestName(_ query: String, _ rows: [ChildSummary]) -> String? {
        let ordered = rows.filter { !$0.isArchived } + rows.filter(\.isArchived)
        let folded = ordered.map { Text.folded($0.name) }
        guard let near = Suggestions.nearest(Text.folded(query), in: folded), let i = folded.firstIndex(of: near) else { return nil }
        return ordered[i].name
    }

    /// Whether `Text.folded(name) == wanted` (`wanted` already folded), without folding `name`
    /// while both are ASCII: folding maps A–Z to a–z and nothing else there, and an ASCII letter
    /// followed by other ASCII folds to itself. At the first non-ASCII byte it folds the whole
    /// name.
    static func equalFolded(_ name: String, folded wanted: String) -> Bool {
        var a = name.utf8.makeIterator(), b = wanted.utf8.makeIterator()
        while true {
            switch (a.next(), b.next()) {
            case (nil, nil):
                return true
            case (let x?, let y?) where x < 0x80 && y < 0x80:
                let lower = x &- 0x41 < 26 ? x | 0x20 : x
                if lower != y { return false }
            case (let x?, _) where x >= 0x80:
                return Text.folded(name) == wanted
            case (_, let y?) where y >= 0x80:
                return Text.folded(name) == wanted
            default:
                return Text.folded(name) == wanted  // one ended first: rare, so no shortcut
            }
        }
    }

    /// The active children of `children` whose names are equal up to case and accents, in groups
    /// of two or more (in the order listed): children added under one name on two laptops apart,
    /// flagged by `children` and `status` (docs/CRDT.md, "Child names").
    public static func sameNameGroups(_ children: [ChildSummary]) -> [[ChildSummary]] {
        var groups: [[ChildSummary]] = []
        var byName: [String: Int] = [:]
        for child in children where !child.isArchived {
            let key = Text.folded(child.name)
            if let i = byName[key] { groups[i].append(child) } else { byName[key] = groups.count; groups.append([child]) }
        }
        return groups.filter { $0.count > 1 }
    }

    /// The UTF-8 of `text` without its dashes when the rest is all ASCII hex digits, else nil
    /// (other hex-like characters, such as fullwidth digits, can't match an id's ASCII hex).
    static func hexDigits(_ text: String) -> [UInt8]? {
        var digits: [UInt8] = []
        digits.reserveCapacity(text.utf8.count)
        for byte in text.utf8 where byte != UInt8(ascii: "-") {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"):
                digits.append(byte)
            default:
                return nil
            }
        }
        return digits
    }

    /// Whether `id.hex.hasPrefix(String(decoding: digits, as: UTF8.self))`, without building the
    /// hex string: `id.hex` is 32 ASCII lowercase digits, so the prefix must be those bytes.
    static func hex(of id: RecordID, hasPrefix digits: [UInt8]) -> Bool {
        guard digits.count <= 32 else { return false }
        for (i, byte) in digits.enumerated() {
            let word = i < 16 ? id.high : id.low
            let nibble = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (i % 16))) & 0xF
            if byte != (nibble < 10 ? 0x30 + nibble : 0x57 + nibble) { return false }
        }
        return true
    }

    /// The ids of the stored transactions whose hex form ends with `digits` (dashes ignored,
    /// case-insensitive), in id order, at most `limit`; empty when `digits` is not hex. What
    /// `undo ID` resolves a short id with: `history` shows an id's last 8 digits, its random
    /// tail (the first digits are its creation time, shared by the entries of a minute). One
    /// pass over the transactions' keys, for a command a person types.
    public func transactionIDs(endingWith digits: String, limit: Int = 10) throws -> [RecordID] {
        guard let wanted = Self.hexDigits(digits.lowercased()), !wanted.isEmpty, wanted.count <= 32 else { return [] }
        var ids: [RecordID] = []
        try store.read { r in
            try r.scan(Tables.transactions, prefix: []) { key, _ in
                let id = RecordID(bytes: key)
                if id.hex.utf8.reversed().starts(with: wanted.reversed()) { ids.append(id) }
                return ids.count < limit
            }
        }
        return ids
    }

    /// The sum of a child's own applied transactions (without the children merged into it:
    /// ``children(includeArchived:includeMerged:)`` and ``resolveChild(_:)`` give those sums).
    public func balance(of child: RecordID) throws -> Int128 {
        try store.read { r in try Aggregate.load(child, r).sumCents }
    }

    /// Newest-first history of one child or of all, at most `limit` entries, each with its
    /// author and the same-id versions that lost to it. A child's history is its effective
    /// child's: the entries of every child merged into it and its own, in one time order. Each
    /// entry names the effective child of the child it was written for.
    public func history(child: RecordID? = nil, limit: Int = .max) throws -> [HistoryEntry] {
        try store.read { r in
            let stored = try Self.childRowsAndKeys(r)
            var names: [RecordID: String] = [:]
            var authors = AuthorNames(r)
            var entries: [HistoryEntry] = []
            var members: [RecordID] = child.map { [$0] } ?? []
            if let child, let root = stored.root(of: child) { members = stored.members(of: root).map { stored.rows[$0].id } }
            if members.count > 1 {
                // Each member's newest `limit` entries, then the newest `limit` of them all, in
                // the time index's order (created at, then id).
                var found: [(order: ArraySlice<UInt8>, id: RecordID, origin: UInt64)] = []
                for member in members {
                    var taken = 0
                    try r.scan(Tables.byChild, prefix: Keys.id(member), from: nil, reverse: true) { key, value in
                        guard taken < limit else { return false }
                        guard let origin = Bytes.u64(value) else { throw LedgerError.corrupted("transaction without its author") }
                        found.append((key.dropFirst(16), try Keys.trailingID(key), origin))
                        taken += 1
                        return true
                    }
                }
                found.sort { $1.order.lexicographicallyPrecedes($0.order) }
                for f in found.prefix(limit) {
                    guard let raw = try r.get(Tables.transactions, Keys.id(f.id)) else {
                        throw LedgerError.corrupted("indexed transaction \(f.id) missing")
                    }
                    let t = try Self.decodeStoredTransaction(raw)
                    entries.append(try Self.historyEntry(t, origin: ReplicaID(f.origin), reversed: Self.isUndone(t.id, r), r, stored, &authors, &names))
                }
                return entries
            }
            let table = child == nil ? Tables.byTime : Tables.byChild
            let prefix = child.map(Keys.id) ?? []
            try r.scan(table, prefix: prefix, from: nil, reverse: true) { key, value in
                guard entries.count < limit else { return false }
                let id = try Keys.trailingID(key)
                guard let raw = try r.get(Tables.transactions, Keys.id(id)) else {
                    throw LedgerError.corrupted("indexed transaction \(id) missing")
                }
                guard let origin = Bytes.u64(value) else { throw LedgerError.corrupted("transaction \(id) without its author") }
                let t = try Self.decodeStoredTransaction(raw)
                entries.append(try Self.historyEntry(t, origin: ReplicaID(origin), reversed: Self.isUndone(t.id, r), r, stored, &authors, &names))
                return true
            }
            return entries
        }
    }

    /// One entry of ``history(child:limit:)``: the transaction with the name of its child's
    /// effective child, its author and the same-id versions that lost to it.
    static func historyEntry(_ t: LedgerTransaction, origin: ReplicaID, reversed: Bool, _ r: any KeyValueReader,
                             _ stored: ChildRows, _ authors: inout AuthorNames, _ names: inout [RecordID: String]) throws -> HistoryEntry {
        if names[t.childID] == nil { names[t.childID] = stored.root(of: t.childID).map { stored.rows[$0].name } ?? "?" }
        var conflicting: [ConflictVersion] = []
        try r.scan(Tables.conflicts, prefix: [Conflict.transaction] + Keys.id(t.id)) { _, value in
            let (loserOrigin, payload) = try decodeConflictValue(value)
            conflicting.append(ConflictVersion(transaction: try decodeStoredTransaction(payload),
                                               author: try authors.author(loserOrigin)))
            return true
        }
        return HistoryEntry(transaction: t, childName: names[t.childID]!, isReversed: reversed,
                            author: try authors.author(origin), conflicting: conflicting)
    }

    /// Everything ``allTransactions()`` reads (`QueryTablesTests` checks).
    public static let allTransactionsTables: [Table] = [Tables.transactions]

    /// Every transaction in the set (applied or deferred), in id order: for export.
    public func allTransactions() throws -> [LedgerTransaction] {
        try store.read { r in
            var result: [LedgerTransaction] = []
            try r.scan(Tables.transactions) { _, value in
                result.append(try Self.decodeStoredTransaction(value))
                return true
            }
            return result
        }
    }

    /// The state digest: equal on two replicas exactly when their merged ledgers are equal.
    public func digest() throws -> Digest256 {
        try store.read { r in Digest256(bytes: try r.get(Tables.meta, Keys.digest)) ?? .zero }
    }

    /// How much of `origin`'s history this replica holds: its version vector entry (0 when none),
    /// read alone.
    public func heldSequence(of origin: ReplicaID) throws -> UInt64 {
        try store.read { r in Bytes.u64(try r.get(Tables.vector, Keys.origin(origin))) ?? 0 }
    }

    /// The log entries of `origin` after `sequence` (every version, in key order): what
    /// ``encodedChanges(notCoveredBy:limit:)`` lists of that origin for a vector holding
    /// `sequence` of it, in one range read of that origin alone.
    public func encodedChanges(of origin: ReplicaID, after sequence: UInt64) throws -> [EncodedChange] {
        try store.read { r in
            var result: [EncodedChange] = []
            try r.scan(Tables.changes, prefix: Keys.origin(origin), from: Keys.change(origin, sequence + 1),
                       reverse: false) { key, value in
                guard key.count == 24, let held = Bytes.u64(Array(key[8..<16])) else {
                    throw LedgerError.corrupted("change log key")
                }
                result.append(EncodedChange(origin: origin, sequence: held, bytes: value))
                return true
            }
            return result
        }
    }

    /// Counts for status displays.
    public func counts() throws -> ReplicaCounts {
        try store.read { r in
            var conflicts = 0
            try r.scan(Tables.conflicts) { key, _ in
                if key.first != Conflict.undoMerge { conflicts += 1 }
                return true
            }
            return ReplicaCounts(transactions: try r.count(Tables.transactions), children: try r.count(Tables.children),
                                 deferred: try r.count(Tables.deferred), conflicts: conflicts,
                                 changes: try r.count(Tables.changes))
        }
    }
}

/// Sizes of the replica's state.
public struct ReplicaCounts: Equatable, Sendable {
    /// Transactions in the set (applied and deferred).
    public var transactions: Int
    /// Children.
    public var children: Int
    /// Transactions waiting for their child.
    public var deferred: Int
    /// Same-id payload conflicts seen (excluding merged concurrent undos).
    public var conflicts: Int
    /// Changes in the log.
    public var changes: Int
}

/// Text helpers that need no Foundation.
public enum Text {
    /// `s` without leading and trailing white space.
    public static func trimmed(_ s: String) -> String {
        // Printable ASCII other than the space is no white space: starting and ending with such
        // bytes, `s` is its own trimmed form (found without walking its scalars).
        if let first = s.utf8.first, let last = s.utf8.last, (0x21...0x7E).contains(first), (0x21...0x7E).contains(last) {
            return s
        }
        let scalars = s.unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        return String(scalars[first...last])
    }
}

extension Replica {
    /// Whether the transaction set holds `id` (applied or deferred).
    public func containsTransaction(_ id: RecordID) throws -> Bool {
        try store.read { r in try r.get(Tables.transactions, Keys.id(id)) != nil }
    }
}

extension Replica {
    /// Every child's running totals (count, sum, id hash), for comparing two replicas.
    public func aggregates() throws -> [RecordID: Aggregate] {
        try store.read { r in try Self.readAggregates(r) }
    }

    static func readAggregates(_ r: any KeyValueReader) throws -> [RecordID: Aggregate] {
        var keys: [[UInt8]] = []
        var result: [RecordID: Aggregate] = [:]
        try r.scan(Tables.children) { key, _ in
            result[try Keys.storedID(key)] = Aggregate()  // zero totals unless stored
            keys.append(key)
            return true
        }
        // The totals are keyed by child id, in the same order: one pass, joined on the id.
        try Self.joinTotals(keys, r) { j, value in result[Keys.id(in: keys[j], at: 0)] = try Aggregate.decode(value) }
        return result
    }
}

/// The household a replica belongs to, as `Keys.household` stores it: the household id (16),
/// then for an owned household the owner key (32) or, while `join` waits for the genesis, one
/// byte (``ownerPendingMark``), then the genesis hash (32) once known. A store written before
/// genesis pinning holds no hash: ``Replica/completeGenesisPin(replica:in:)`` adds it when it is
/// opened. Unowned households (no membership) pin their id alone.
struct HouseholdPin: Equatable {
    var id: RecordID
    /// The genesis owner; empty while pending or without membership.
    var owner: [UInt8]
    var ownerPending: Bool
    /// ``Membership/genesisHash(_:)`` of the one genesis applied, or nil until known.
    var genesis: [UInt8]?

    /// The byte that stands for the owner while `join` waits for the genesis.
    static let ownerPendingMark: UInt8 = 1

    init(id: RecordID, owner: [UInt8], ownerPending: Bool, genesis: [UInt8]?) {
        self.id = id
        self.owner = owner
        self.ownerPending = ownerPending
        self.genesis = genesis
    }

    init(decoding raw: [UInt8]) throws {
        let hash = Membership.genesisHashBytes, key = Membership.keyBytes
        guard raw.count >= 16 else { throw LedgerError.corrupted("household pin") }
        id = Keys.id(in: raw, at: 0)
        switch raw.count {
        case 16: (owner, ownerPending, genesis) = ([], false, nil)
        case 17 where raw[16] == Self.ownerPendingMark: (owner, ownerPending, genesis) = ([], true, nil)
        case 17 + hash where raw[16] == Self.ownerPendingMark: (owner, ownerPending, genesis) = ([], true, Array(raw.suffix(hash)))
        case 16 + key: (owner, ownerPending, genesis) = (Array(raw[16..<16 + key]), false, nil)
        case 16 + key + hash: (owner, ownerPending, genesis) = (Array(raw[16..<16 + key]), false, Array(raw.suffix(hash)))
        default: throw LedgerError.corrupted("household pin")
        }
    }

    var encoded: [UInt8] {
        Keys.id(id) + (ownerPending ? [Self.ownerPendingMark] : owner) + (genesis ?? [])
    }
}

import KidLedgerDomain

/// The result of giving to or taking from one child.
public struct Posting: Equatable, Sendable {
    /// The written transaction.
    public var transaction: LedgerTransaction
    /// The child's name.
    public var childName: String
    /// The child's balance after it.
    public var balanceCents: Int128
}

extension Replica {
    /// Creates the household this replica holds, and pins this replica to it.
    ///
    /// - Throws: ``LedgerError/householdExists(name:)``, ``LedgerError/badName(_:)``,
    ///   ``LedgerError/invalid(_:)`` for an owner without `sign` or ``signer``, or a replica pinned to
    ///   another household.
    /// With `owner` (an account key), `salt` and `sign` (the owner's Ed25519 signature of a
    /// message), the household has membership: its id is derived from owner and salt, its genesis
    /// is signed by the owner (``Membership/genesisMessage(_:)``), and only the owner can grant
    /// and revoke. `recovery` (with an owner) is the public key of the recovery secret: the one
    /// key that can sign an owner transfer (``transferOwnership(to:recoveryKey:atMillis:sign:)``).
    @discardableResult
    public func createHousehold(name: String, owner: [UInt8] = [], salt: [UInt8] = [], recovery: [UInt8] = [],
                                timeZone: String? = nil, sign: (([UInt8]) -> [UInt8])? = nil) throws -> HouseholdSummary {
        let name = try Self.validName(name, what: "household name")
        if let timeZone { try checkZone(timeZone) }
        if !owner.isEmpty && sign == nil { throw LedgerError.invalid("an owned household needs its owner's signature") }
        // Its genesis change carries the owner's claim of the origin it is written under.
        if !owner.isEmpty && signer?.key != owner { throw LedgerError.invalid("an owned household is created with its owner as the signer") }
        let id = owner.isEmpty ? newID() : Membership.householdID(owner: owner, salt: salt)
        try commitLocal { w, hlc in
            if let existing = try Self.household(w) { throw LedgerError.householdExists(name: existing.name) }
            if let pin = try Self.pinnedHousehold(w), pin.id != id || pin.owner != owner || pin.ownerPending {
                throw LedgerError.invalid("this replica belongs to household \(pin.id)")
            }
            var genesis = Household(id: id, createdAtMillis: hlc.millis, owner: owner, salt: salt, name: name, recovery: recovery)
            if let sign { genesis.signature = sign(Membership.genesisMessage(genesis)) }
            // Applying it pins the replica; a genesis that would be forged is not committed.
            if let problem = Membership.genesisProblem(genesis, verifier: verifier) { throw LedgerError.invalid(problem) }
            var ops: [Operation] = [.createHousehold(genesis), .setField(entity: id, field: .householdName, value: .text(name))]
            if let timeZone { ops.append(.setField(entity: id, field: .householdTimeZone, value: .text(timeZone))) }
            return (ops, ())
        }
        return HouseholdSummary(id: id, name: name, createdAtMillis: try household()?.createdAtMillis ?? 0)
    }

    /// Adds a child (refusing a second active child with the same name).
    @discardableResult
    public func addChild(name: String) throws -> ChildSummary {
        let name = try Self.validName(name, what: "child name")
        let id = newID()
        try commitLocal { w, hlc in
            _ = try Self.requireHousehold(w)
            // Names, flags and sort orders decide: the rows without their totals.
            let existing = try Self.childRows(w)
            let wanted = Text.folded(name)
            // A child merged into another holds no name of its own (docs/CRDT.md, "Child merges").
            if try Self.activeNameHolders(w).contains(where: { Self.equalFolded($0.name, folded: wanted) }) {
                throw LedgerError.badName("there is already a child named \"\(name)\"")
            }
            let order = (existing.map(\.sortOrder).max() ?? -1) + 1
            return ([.createChild(ChildRecord(id: id, createdAtMillis: hlc.millis)),
                     .setField(entity: id, field: .childName, value: .text(name)),
                     .setField(entity: id, field: .childArchived, value: .flag(false)),
                     .setField(entity: id, field: .childSortOrder, value: .integer(order))], ())
        }
        return try store.read { r in try Self.applied(Self.effectiveChild(id, r)) { $0.id == id } }
    }

    /// Renames a child.
    @discardableResult
    public func renameChild(_ query: String, to newName: String) throws -> ChildSummary {
        let name = try Self.validName(newName, what: "child name")
        let (_, id) = try commitLocal { w, _ in
            _ = try Self.requireHousehold(w)
            let child = try Self.resolveChild(query, w)
            if child.name == name { throw LedgerError.unchanged("\(child.name) is already called \(name)") }
            let wanted = Text.folded(name)
            if try Self.activeNameHolders(w).contains(where: {
                $0.id != child.id && Self.equalFolded($0.name, folded: wanted)
            }) {
                throw LedgerError.badName("there is already a child named \"\(name)\"")
            }
            return ([.setField(entity: child.id, field: .childName, value: .text(name),
                               base: try Self.registerStamp(child.id, .childName, w))], child.id)
        }
        return try store.read { r in try Self.applied(Self.effectiveChild(id, r)) { $0.id == id } }
    }

    /// Archives (`true`) or restores (`false`) a child. History is kept either way.
    @discardableResult
    public func setArchived(_ query: String, _ archived: Bool) throws -> ChildSummary {
        let (_, id) = try commitLocal { w, hlc in
            _ = try Self.requireHousehold(w)
            let child = try Self.resolveChild(query, w)
            if child.isArchived == archived {
                throw LedgerError.unchanged("\(child.name) is already \(archived ? "archived" : "active")")
            }
            // One active child per name: restoring one whose name an active child took meanwhile
            // would make the name ambiguous (docs/CRDT.md, "Child names").
            if !archived {
                let wanted = Text.folded(child.name)
                if let taken = try Self.activeNameHolders(w).first(where: {
                    $0.id != child.id && Self.equalFolded($0.name, folded: wanted)
                }) {
                    throw LedgerError.restoreNameTaken(child.name, id: child.id, active: taken.name)
                }
            }
            var ops: [Operation] = [.setField(entity: child.id, field: .childArchived, value: .flag(archived),
                                              base: try Self.registerStamp(child.id, .childArchived, w))]
            // Archiving stops the child's allowance (restoring does not start it again), so the
            // periods it spends archived are never paid (docs/CRDT.md, "Allowance schedules").
            if archived, child.allowance.rule != nil, child.allowance.amountCents != nil, child.allowance.stoppedAtMillis == 0 {
                ops.append(.setField(entity: child.id, field: .allowanceStoppedAt, value: .integer(hlc.millis),
                                     base: try Self.registerStamp(child.id, .allowanceStoppedAt, w)))
            }
            return (ops, child.id)
        }
        return try store.read { r in try Self.applied(Self.effectiveChild(id, r)) { $0.id == id } }
    }

    /// Adds `signedCents` to one active child, checking that the balance stays within Int64.
    @discardableResult
    public func post(_ query: String, signedCents: Int64, note: String, source: String) throws -> Posting {
        guard note.utf8.count <= Limits.noteBytesMax else { throw LedgerError.badNote }
        precondition(signedCents != 0 && signedCents != .min, "amounts are validated by Money.parseAmount")
        var generator = random
        let (_, posting) = try commitLocal { w, hlc in
            _ = try Self.requireHousehold(w)
            let child = try Self.resolveChild(query, w)
            if child.isArchived { throw LedgerError.archived(child.name) }
            let balance = try Self.checkedBalance(child, adding: signedCents)
            let t = LedgerTransaction(id: entryID(RecordID.timeOrdered(millis: hlc.millis, using: &generator)), childID: child.id,
                                      amountCents: signedCents, createdAtMillis: hlc.millis, note: note, source: source)
            if let problem = Validation.problem(with: t) { throw LedgerError.invalid(problem) }
            return ([.addTransaction(t)], Posting(transaction: t, childName: child.name, balanceCents: balance))
        }
        random = generator
        return posting
    }

    /// One transaction of ``postBatch(_:source:)``: a child (by id), signed cents and a note.
    public struct Draft: Equatable, Sendable {
        /// The child, which must exist and be active.
        public var childID: RecordID
        /// Signed cents, never zero and never `Int64.min`.
        public var signedCents: Int64
        /// The note.
        public var note: String

        /// Creates a draft.
        public init(childID: RecordID, signedCents: Int64, note: String) {
            self.childID = childID
            self.signedCents = signedCents
            self.note = note
        }
    }

    /// Posts many transactions at once, each its own local change (exactly what as many
    /// ``post(_:signedCents:note:source:)`` calls would write, with consecutive HLC readings), in
    /// one write transaction: all or nothing. Every child must be active and every running
    /// balance must stay within Int64. For bulk loading and benchmarks.
    @discardableResult
    public func postBatch(_ drafts: [Draft], source: String) throws -> [Change] {
        var generator = random
        let (changes, _) = try commitLocalBatch { w, first in
            _ = try Self.requireHousehold(w)
            var children: [RecordID: ChildSummary] = [:], rootOf: [RecordID: RecordID] = [:]
            var hlc = first
            var batches: [[Operation]] = []
            batches.reserveCapacity(drafts.count)
            for draft in drafts {
                guard draft.note.utf8.count <= Limits.noteBytesMax else { throw LedgerError.badNote }
                guard draft.signedCents != 0 && draft.signedCents != .min else { throw LedgerError.invalid("amount \(draft.signedCents)") }
                // A child merged into another stands for its effective child (docs/CRDT.md, "Child merges").
                if rootOf[draft.childID] == nil {
                    guard let child = try Self.effectiveChild(draft.childID, w) else { throw LedgerError.unknownChild(draft.childID.description) }
                    rootOf[draft.childID] = child.id
                    if children[child.id] == nil { children[child.id] = child }
                }
                let root = rootOf[draft.childID]!
                var child = children[root]!
                if child.isArchived { throw LedgerError.archived(child.name) }
                child.balanceCents = try Self.checkedBalance(child, adding: draft.signedCents)
                children[root] = child
                let t = LedgerTransaction(id: entryID(RecordID.timeOrdered(millis: hlc.millis, using: &generator)), childID: child.id,
                                          amountCents: draft.signedCents, createdAtMillis: hlc.millis,
                                          note: draft.note, source: source)
                if let problem = Validation.problem(with: t) { throw LedgerError.invalid(problem) }
                batches.append([.addTransaction(t)])
                // The same readings commitLocalBatch stamps its changes with (each local change
                // takes the next millisecond; `now` is never later than the first reading).
                hlc = hlc.tickLocal(now: first.millis)
            }
            return (batches, ())
        }
        random = generator
        return changes
    }

    /// Adds `signedCents` to every active child as one atomic change: every balance is validated
    /// before anything is written, and replicas apply the batch all or nothing.
    @discardableResult
    public func postAll(signedCents: Int64, note: String, source: String) throws -> [Posting] {
        guard note.utf8.count <= Limits.noteBytesMax else { throw LedgerError.badNote }
        precondition(signedCents != 0 && signedCents != .min, "amounts are validated by Money.parseAmount")
        var generator = random
        let (_, postings) = try commitLocal { w, hlc in
            _ = try Self.requireHousehold(w)
            let active = try Self.children(w, includeArchived: false)
            if active.isEmpty { throw LedgerError.noActiveChildren }
            guard active.count <= Limits.operationsPerChangeMax else {
                throw LedgerError.invalid("give-all covers at most \(Limits.operationsPerChangeMax) children")
            }
            var postings: [Posting] = []
            for child in active {
                let balance = try Self.checkedBalance(child, adding: signedCents)
                let t = LedgerTransaction(id: entryID(RecordID.timeOrdered(millis: hlc.millis, using: &generator)), childID: child.id,
                                          amountCents: signedCents, createdAtMillis: hlc.millis,
                                          note: note, source: source)
                if let problem = Validation.problem(with: t) { throw LedgerError.invalid(problem) }
                postings.append(Posting(transaction: t, childName: child.name, balanceCents: balance))
            }
            return (postings.map { .addTransaction($0.transaction) }, postings)
        }
        random = generator
        return postings
    }

    /// The stamp of a register's current value: the base of a write that replaces it.
    static func registerStamp(_ entity: RecordID, _ field: Field, _ r: any KeyValueReader) throws -> Stamp? {
        guard let raw = try r.get(Tables.registers, Keys.register(entity, field)) else { return nil }
        return try StoredRegister.decode(raw).stamp
    }

    /// Commits membership records (a grant or a revocation signed elsewhere) as a local change.
    public func commitMembership(_ operations: [Operation]) throws {
        precondition(operations.allSatisfy(\.isMembership), "membership operations only")
        try commitLocal { _, _ in (operations, ()) }
    }

    static func checkedBalance(_ child: ChildSummary, adding cents: Int64) throws -> Int128 {
        let result = child.balanceCents + Int128(cents)
        guard result >= Int128(Int64.min), result <= Int128(Int64.max) else {
            throw LedgerError.overflow(child: child.name)
        }
        return result
    }

    static func validName(_ raw: String, what: String) throws -> String {
        let name = Text.trimmed(raw)
        if let problem = Validation.nameProblem(name, what: what, bytesMax: Limits.nameBytesMax) { throw LedgerError.badName(problem) }
        return name
    }
}

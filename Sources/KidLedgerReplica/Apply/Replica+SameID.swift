import KidLedgerDomain

extension Tables {
    /// The origin that wrote the stored (winning) creation record of a household or child:
    /// id (16) → origin (8). A transaction's is the value of its index entries (`byTime`,
    /// `byChild`, or `deferred` before its child arrives). Derived, like the records.
    public static let creators = Table("creators")
    /// The children each member key's changes create, whether the membership rule lets them
    /// count or not: member (32) + child id (16) → nothing (``Limits/childrenPerMemberMax``).
    /// Derived from the log.
    public static let childCreations = Table("childCreations")
}

/// One version of a record that others share an id with: its canonical payload and the origin
/// whose change wrote it.
struct AuthoredVersion {
    var payload: [UInt8]
    var origin: ReplicaID
}

/// What ``Replica/settleSameID(kind:id:incoming:existing:in:)`` decided.
enum SameIDOutcome: Equatable {
    /// The stored version stays, with its author.
    case unchanged
    /// The stored payload stays, but its author is now `origin` (the same payload written by a
    /// better-ranked author).
    case author(ReplicaID)
    /// The incoming payload replaces the stored one; its author is `origin`.
    case replaced(ReplicaID)
}

/// Who wrote a version: the origin, and the member key that claimed it (nil: unclaimed).
public struct Author: Equatable, Sendable {
    /// The replica (device) whose change wrote it.
    public var origin: ReplicaID
    /// The member key that claimed that origin, or nil when none did (a household without
    /// membership).
    public var key: [UInt8]?
    /// The member's display name (``Replica/members()``), or nil.
    public var name: String?
}

/// One side of a same-id conflict.
public struct ConflictVersion: Equatable, Sendable {
    /// The transaction version (for a transaction conflict).
    public var transaction: LedgerTransaction?
    /// The child creation record version (for a child conflict).
    public var child: ChildRecord?
    /// Who wrote it.
    public var author: Author

    /// Creates a version.
    public init(transaction: LedgerTransaction? = nil, child: ChildRecord? = nil, author: Author) {
        self.transaction = transaction
        self.child = child
        self.author = author
    }
}

/// Two records with one id and different payloads: the version every replica keeps and one that
/// lost (a fork of one author's history, or a member reusing another's id).
public struct SameIDConflict: Equatable, Sendable {
    /// "transaction" or "child".
    public var kind: String
    /// The shared id.
    public var id: RecordID
    /// The version kept (in balances and history).
    public var winner: ConflictVersion
    /// The version that lost.
    public var loser: ConflictVersion
}

extension Replica {
    /// Decides between two versions of one record id (`incoming` just arrived, `existing` is
    /// stored) and keeps the loser, with its author, in the conflicts table (under
    /// `kind(loser payload)`).
    ///
    /// The order, the same on every replica whatever the arrival order: first whether the author
    /// made the id (the ids a member's client creates carry its mark,
    /// ``Membership/entryID(_:madeBy:)``, so a member who reuses another's id always loses to the
    /// maker), then the author's rank (the household's owner; then members by key, smaller first;
    /// then origins nobody claimed, all equal), then the smaller canonical payload. A version
    /// never wins silently: both versions and both authors are shown. Versions of one author (a fork after a restore), and records of a
    /// household without membership, fall back to the payload rule. Of several origins that wrote
    /// one payload, the best-ranked (then the smaller origin) is its author.
    ///
    /// A rank depends on the claims held; a claim recorded after a version it ranks was merged
    /// makes the caller rebuild (``claimTouchesConflicts(_:in:)``).
    static func settleSameID(kind: ([UInt8]) throws -> UInt8, id: RecordID, incoming: AuthoredVersion, existing: AuthoredVersion,
                             in context: ApplyContext) throws -> SameIDOutcome {
        if KeyBytes.equal(incoming.payload, existing.payload) {
            return try precedes(incoming.origin, existing.origin, id: id, in: context) ? .author(incoming.origin) : .unchanged
        }
        let byAuthor = try compareRanks(incoming.origin, existing.origin, id: id, in: context)
        let incomingWins = byAuthor != 0 ? byAuthor < 0 : KeyBytes.compare(incoming.payload, existing.payload) < 0
        let (winner, loser) = incomingWins ? (incoming, existing) : (existing, incoming)
        try keepLoser(loser, kind: try kind(loser.payload), id: id, in: context)
        guard incomingWins else { return .unchanged }
        // The new winner may have lost before under another author: it is no loser now.
        let winnerKey = Keys.conflict(kind: try kind(winner.payload), id: id, payload: winner.payload)
        var author = winner.origin
        if let raw = try context.store.get(Tables.conflicts, winnerKey) {
            let earlier = try decodeConflictValue(raw).origin
            if try precedes(earlier, author, id: id, in: context) { author = earlier }
            try context.store.delete(Tables.conflicts, winnerKey)
        }
        return .replaced(author)
    }

    /// Stores `loser` in the conflicts table; of two authors of one losing payload, the
    /// better-ranked stays.
    private static func keepLoser(_ loser: AuthoredVersion, kind: UInt8, id: RecordID, in context: ApplyContext) throws {
        let key = Keys.conflict(kind: kind, id: id, payload: loser.payload)
        if let raw = try context.store.get(Tables.conflicts, key),
           try !precedes(loser.origin, decodeConflictValue(raw).origin, id: id, in: context) { return }
        try context.store.put(Tables.conflicts, key, Bytes.u64(loser.origin.rawValue) + loser.payload)
    }

    /// The conflicts-table value: the loser's origin (8), then its payload.
    static func decodeConflictValue(_ raw: [UInt8]) throws -> (origin: ReplicaID, payload: [UInt8]) {
        guard raw.count > 8, let origin = Bytes.u64(Array(raw.prefix(8))) else {
            throw LedgerError.corrupted("a same-id conflict entry of \(raw.count) bytes")
        }
        return (ReplicaID(origin), Array(raw.dropFirst(8)))
    }

    /// The rank of the author of a version of record `id` written under `origin`, best first:
    /// whether the id carries its member's mark (``Membership/isEntryID(_:madeBy:)``: 0, the
    /// member made the id; 1, not), then 0 for the household's owner, 1 for another member (with
    /// its key), 2 for an origin nobody claimed (all equal).
    private static func rank(_ origin: ReplicaID, id: RecordID, in context: ApplyContext) throws -> (maker: Int, tier: Int, key: [UInt8]) {
        guard let member = try context.claim(origin) else { return (1, 2, []) }
        let maker = Membership.isEntryID(id, madeBy: member) ? 0 : 1
        if let (_, ownerKey) = try owner(context.store), ownerKey == member { return (maker, 0, member) }
        return (maker, 1, member)
    }

    /// Negative when `a`'s author ranks before `b`'s for record `id`, zero when they rank equal
    /// (one member, or both unclaimed), positive after.
    private static func compareRanks(_ a: ReplicaID, _ b: ReplicaID, id: RecordID, in context: ApplyContext) throws -> Int {
        let ra = try rank(a, id: id, in: context), rb = try rank(b, id: id, in: context)
        if ra.maker != rb.maker { return ra.maker < rb.maker ? -1 : 1 }
        if ra.tier != rb.tier { return ra.tier < rb.tier ? -1 : 1 }
        return KeyBytes.compare(ra.key, rb.key)
    }

    /// Whether origin `a` is the better author of one payload of `id` than `b`: a better rank,
    /// then the smaller origin.
    private static func precedes(_ a: ReplicaID, _ b: ReplicaID, id: RecordID, in context: ApplyContext) throws -> Bool {
        let order = try compareRanks(a, b, id: id, in: context)
        return order != 0 ? order < 0 : a.rawValue < b.rawValue
    }

    /// Whether a version merged under `origin` is part of a same-id conflict (the stored loser, or
    /// the winner of an id that has one): a claim of `origin` recorded now changes its rank, so the
    /// state is rebuilt with every claim known (a claim rides in its origin's first change, so
    /// this happens only to claims that waited, for their household or grant, or that a fork
    /// replaced).
    static func claimTouchesConflicts(_ origin: ReplicaID, in context: ApplyContext) throws -> Bool {
        let r = context.store
        var touches = false
        try r.scan(Tables.conflicts) { key, value in
            guard key.count == 33 else { throw LedgerError.corrupted("a same-id conflict key of \(key.count) bytes") }
            if try decodeConflictValue(value).origin == origin { touches = true; return false }
            let id = Keys.id(in: key, at: 1)
            let winner: ReplicaID?
            if key[0] == Conflict.child || key[0] == Conflict.household {
                winner = Bytes.u64(try r.get(Tables.creators, Keys.id(id))).map(ReplicaID.init)
            } else if let raw = try r.get(Tables.transactions, Keys.id(id)) {
                winner = try transactionOrigin(try decodeStoredTransaction(raw), r)
            } else {
                winner = nil
            }
            if winner == origin { touches = true; return false }
            return true
        }
        return touches
    }

    /// Everything ``sameIDConflicts()`` reads.
    public static let sameIDConflictTables: [Table] = [Tables.conflicts, Tables.transactions, Tables.children, Tables.creators,
                                                       Tables.byTime, Tables.deferred, Tables.claims, Tables.registerHistory,
                                                       Tables.grants, Tables.meta, Tables.households]

    /// Every same-id conflict of a transaction or a child creation (not the designed merge of two
    /// undo entries of one original), with both versions and both authors, by id then loser.
    public func sameIDConflicts() throws -> [SameIDConflict] {
        try store.read { r in
            var result: [SameIDConflict] = []
            var authors = AuthorNames(r)
            try r.scan(Tables.conflicts) { key, value in
                guard key.count == 33 else { throw LedgerError.corrupted("a same-id conflict key of \(key.count) bytes") }
                let id = Keys.id(in: key, at: 1)
                let (origin, payload) = try Self.decodeConflictValue(value)
                switch key[0] {
                case Conflict.transaction:
                    guard let raw = try r.get(Tables.transactions, Keys.id(id)) else { return true }
                    let kept = try Self.decodeStoredTransaction(raw)
                    result.append(SameIDConflict(
                        kind: "transaction", id: id,
                        winner: ConflictVersion(transaction: kept, author: try authors.author(try Self.transactionOrigin(kept, r))),
                        loser: ConflictVersion(transaction: try Self.decodeStoredTransaction(payload), author: try authors.author(origin))))
                case Conflict.child:
                    guard let raw = try r.get(Tables.children, Keys.id(id)),
                          let creator = Bytes.u64(try r.get(Tables.creators, Keys.id(id))) else { return true }
                    func child(_ bytes: [UInt8]) throws -> ChildRecord {
                        do { return try RecordCodec.decodeChild(bytes) } catch { throw LedgerError.corrupted("child record") }
                    }
                    result.append(SameIDConflict(
                        kind: "child", id: id,
                        winner: ConflictVersion(child: try child(raw), author: try authors.author(ReplicaID(creator))),
                        loser: ConflictVersion(child: try child(payload), author: try authors.author(origin))))
                default:
                    break
                }
                return true
            }
            return result
        }
    }
}

/// Resolves origins to authors (claim, then display name) for one read, remembering each.
struct AuthorNames {
    let r: any KeyValueReader
    private var known: [ReplicaID: Author] = [:]
    private var names: [[UInt8]: String?] = [:]

    init(_ r: any KeyValueReader) { self.r = r }

    mutating func author(_ origin: ReplicaID) throws -> Author {
        if let author = known[origin] { return author }
        let key = try r.get(Tables.claims, Keys.origin(origin))
        var name: String?
        if let key {
            if let cached = names[key] {
                name = cached
            } else {
                name = try Replica.shownName(of: key, r)
                names[key] = .some(name)
            }
        }
        let author = Author(origin: origin, key: key, name: name)
        known[origin] = author
        return author
    }
}

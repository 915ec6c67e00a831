
/// Limits on user-supplied text and batches (TigerBeetle style: a limit on everything).
public enum Limits {
    /// Longest household or child name, in UTF-8 bytes.
    public static let nameBytesMax = 200
    /// Longest member display name, in UTF-8 bytes.
    public static let memberNameBytesMax = 64
    /// Longest transaction note, in UTF-8 bytes.
    public static let noteBytesMax = 1_000
    /// Longest transaction source tag, in UTF-8 bytes.
    public static let sourceBytesMax = 32
    /// Most operations in one change (a give-all batch over many children).
    public static let operationsPerChangeMax = 10_000
    /// The highest sequence number of a change, a version vector entry or a receipt entry: 2^62.
    /// Decoders refuse anything above it, so no count or sum of sequences a peer sends can come
    /// near `Int.max` by one entry (sums of several are clamped: ``changesMissing``). Reaching it
    /// would take 2^62 changes of one replica.
    public static let sequenceMax: UInt64 = 1 << 62
    /// How far ahead of this replica's wall clock a received change may be stamped: one hour.
    /// A change stamped later is held back, not applied (nor anything after it from its origin),
    /// until this clock comes within the bound; its sender offers it again in later sessions. So
    /// no stamp drags this replica's hybrid clock, or the dates of its next entries, more than
    /// this far ahead of its wall clock (docs/CRDT.md, "Clock skew").
    public static let clockAheadMillisMax: Int64 = 3_600_000
    /// Most entries in the cut (`seen`) of a revocation or an owner transfer. A revocation's cut
    /// names only the origins of the member it ends (`Replica.cut(of:)`), so a member that floods
    /// the household with origins of its own cannot make its revocation too large to decode. A
    /// transfer's names only the origins that carry owner-signed records (`Replica.transferSeen`:
    /// the owners' own origins, then those whose changes relay a grant or revocation), so a
    /// recovery works in a household of any number of origins.
    public static let cutEntriesMax = 10_000
    /// Most origins one member key may claim. A laptop takes one when it joins and one more each
    /// time its files are restored from an older copy; a member with more is flooding the
    /// household, and every ledger change it made, under any of its origins, is rejected on every
    /// replica (its membership records still apply). Decided by the claims in the log alone, so
    /// every replica holding them agrees.
    public static let originsPerMemberMax = 256
    /// Most origins of one member key a replica stores: ``originsPerMemberMax`` and one more, the
    /// evidence that the member crossed the limit (then every ledger change it made is rejected,
    /// and its claims are left out of the state digest, so replicas holding different ones
    /// agree). Claims past it are refused, not stored, like a stranger's: so the version vector
    /// holds at most (members × this) origins (docs/SECURITY.md, "Only members take space").
    public static let originsPerMemberStoredMax = originsPerMemberMax + 1
    /// Most bytes of change log (the changes' canonical encodings, every version) that one member
    /// key other than the current owner may make a replica store: 64 MiB, about half a million
    /// transactions with short notes (a family writes a few thousand a year). The change that
    /// takes a member past it is stored (the evidence), every ledger change that member made is
    /// then rejected on every replica (as for ``originsPerMemberMax``), and a replica refuses its
    /// later changes, not stored. The current owner is not held to it (the owner is trusted: it
    /// grants the members); a former owner is.
    public static let bytesPerMemberMax: UInt64 = 64 << 20
    /// Most times one sync session may make a replica recompute its whole merged state (a
    /// revocation, an owner transfer, a member crossing a per-member limit): at most once per
    /// received batch, and at most this many batches that need it in one session; past it the
    /// session ends (what was applied stays) and the rest comes in later sessions. An honest
    /// household needs one or two in a session (a few revocations arrive in one batch).
    public static let recomputationsPerSessionMax = 8
    /// Most children one member key's changes may create. A member whose changes create more
    /// (counted whether the rule lets them count or not) is flooding the household: every ledger
    /// change it made is rejected on every replica, as for ``originsPerMemberMax``.
    public static let childrenPerMemberMax = 1_000
    /// Most versions of one change (one origin and sequence) that count as a fork. A laptop forks
    /// a sequence once each time its files are restored from an older copy before it syncs again
    /// (then it takes a fresh replica id); an origin with more versions at a sequence belongs to
    /// a member forking on purpose, whose every ledger change is then rejected on every replica,
    /// as for ``originsPerMemberMax``. A replica keeps one version more than this at a sequence,
    /// the first it receives (the evidence), and takes no more; the chain link there then names
    /// the flood instead of the versions, so replicas holding different ones agree. Each version
    /// costs a receiver one rechain at most this often.
    public static let forkVersionsPerSequenceMax = 8
    /// Most allowance periods one call of `Replica.payDueAllowances(now:)` pays (one change, all
    /// schedules together, oldest periods first); the rest are paid by the next calls. A schedule
    /// hangs on its child (one per child), so the schedules one member's changes can make are
    /// bounded by ``childrenPerMemberMax``.
    public static let allowancePaymentsPerCallMax = 500
    /// Longest allowance note, in UTF-8 bytes (a register value, like a name).
    public static let allowanceNoteBytesMax = nameBytesMax
    /// Most addresses a relay grant names.
    public static let relayAddressesMax = 4
    /// Longest relay address ("host:port"), in bytes.
    public static let relayAddressBytesMax = 255
    /// Longest epoch record a `relayEpoch` operation carries: the format's largest (version 1,
    /// epoch varint ≤ 5, member count varint ≤ 2, 1,000 members × 176, previous key 72).
    public static let relayEpochRecordBytesMax = 1 + 5 + 2 + 1_000 * 176 + 72
}

/// The household's genesis: created once by its owner, who signs it; only its name (a register)
/// changes later.
public struct Household: Hashable, Sendable {
    /// Stable id; for an owned household, ``Membership/householdID(owner:salt:)``.
    public var id: RecordID
    /// Creation time, Unix milliseconds.
    public var createdAtMillis: Int64
    /// The owner's Ed25519 public key (32 bytes), or empty for a household without membership.
    public var owner: [UInt8]
    /// Random bytes that make the id unique per household of one owner.
    public var salt: [UInt8]
    /// The name at creation (the household's name register holds the current one).
    public var name: String
    /// The household's recovery public key (Ed25519, 32 bytes), or empty: the key of the
    /// recovery secret `init` prints for paper. Only it signs an ``OwnerTransfer``.
    public var recovery: [UInt8]
    /// The owner's signature over ``Membership/genesisMessage(_:)`` (empty without an owner).
    public var signature: [UInt8]

    /// Creates a household record.
    public init(id: RecordID, createdAtMillis: Int64, owner: [UInt8] = [], salt: [UInt8] = [], name: String = "",
                recovery: [UInt8] = [], signature: [UInt8] = []) {
        self.id = id
        self.createdAtMillis = createdAtMillis
        self.owner = owner
        self.salt = salt
        self.name = name
        self.recovery = recovery
        self.signature = signature
    }

    /// Whether the record is self-consistent: no owner (and no salt, recovery key or signature),
    /// or an id derived from owner and salt and a recovery key that is none or 32 bytes. A well-formed owned record still needs its signature checked
    /// (``Membership/genesisProblem(_:verifier:)``).
    public var isWellFormed: Bool {
        owner.isEmpty ? salt.isEmpty && signature.isEmpty && recovery.isEmpty
                      : (owner.count == Membership.keyBytes && id == Membership.householdID(owner: owner, salt: salt)
                         && (recovery.isEmpty || recovery.count == Membership.keyBytes))
    }
}

/// A child's immutable creation record. Its mutable fields are registers (``ChildField``).
public struct ChildRecord: Hashable, Sendable {
    /// Stable id, random at creation.
    public var id: RecordID
    /// Creation time, Unix milliseconds.
    public var createdAtMillis: Int64

    /// Creates a child creation record.
    public init(id: RecordID, createdAtMillis: Int64) {
        self.id = id
        self.createdAtMillis = createdAtMillis
    }
}

/// A last-writer-wins register of a record: which field of which entity.
public enum Field: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// The household's display name (text).
    case householdName = 1
    /// A child's name (text).
    case childName = 2
    /// Whether a child is archived (flag).
    case childArchived = 3
    /// A child's position in lists (integer).
    case childSortOrder = 4
    /// A member's display name (text), on the member's entity (``Membership/memberEntity(_:)``).
    /// Only writes under origins that member claimed count (see `Replica+Names`).
    case memberName = 5
    /// A child's allowance amount, in cents (integer, positive): ``Allowance``.
    case allowanceAmount = 6
    /// A child's allowance rule: period kind, day and first day (integer, ``AllowanceRule/packed``).
    case allowanceRule = 7
    /// A child's allowance note (text, possibly empty, at most ``Limits/nameBytesMax`` bytes).
    case allowanceNote = 8
    /// When a child's allowance stopped (integer, Unix ms; 0: it runs). Periods starting at or
    /// after it are not paid.
    case allowanceStoppedAt = 9
    /// The child this child was merged into (text: that child's id, canonical lowercase
    /// 8-4-4-4-12 form): "this child is that one". Balances and history follow it on every
    /// replica (docs/CRDT.md, "Child merges").
    case childMergedInto = 10
    /// The household's time zone (text: a tz database name, ``HouseholdTime/isValidName(_:)``),
    /// on the household's entity: allowance days are its days (docs/CRDT.md, "The household's
    /// time zone"). Unset: UTC.
    case householdTimeZone = 11
    /// The amount above which a give or take asks before it goes through (integer cents, 0 or
    /// more; 0: never ask), on the household's entity (docs/CRDT.md, "The household's limit for
    /// asking first"). Unset: ``HouseholdLimit/defaultCents`` ($1,000).
    case householdConfirmAbove = 12  // Needs protocol 4: a 0.1.0 build cannot decode field 12.

    /// The field's name in messages and JSON.
    public var description: String {
        switch self {
        case .householdName: "householdName"
        case .childName: "name"
        case .childArchived: "archived"
        case .childSortOrder: "sortOrder"
        case .memberName: "memberName"
        case .allowanceAmount: "allowanceAmount"
        case .allowanceRule: "allowanceRule"
        case .allowanceNote: "allowanceNote"
        case .allowanceStoppedAt: "allowanceStoppedAt"
        case .childMergedInto: "mergedInto"
        case .householdTimeZone: "timeZone"
        case .householdConfirmAbove: "confirmAbove"
        }
    }
}

/// The value of a register.
public enum FieldValue: Hashable, Sendable, CustomStringConvertible {
    /// A name.
    case text(String)
    /// A yes/no flag.
    case flag(Bool)
    /// A signed integer.
    case integer(Int64)

    /// The value as a user would read it.
    public var description: String {
        switch self {
        case .text(let s): s
        case .flag(let b): b ? "true" : "false"
        case .integer(let i): String(i)
        }
    }

    /// Whether this kind of value belongs to `field`.
    public func fits(_ field: Field) -> Bool {
        switch (field, self) {
        case (.householdName, .text(let s)), (.childName, .text(let s)):
            return Validation.nameProblem(s, what: "name", bytesMax: Limits.nameBytesMax) == nil
        case (.memberName, .text(let s)):
            return Membership.memberNameProblem(s) == nil
        case (.childArchived, .flag): return true
        case (.childSortOrder, .integer): return true
        case (.allowanceAmount, .integer(let cents)): return cents > 0
        case (.allowanceRule, .integer(let packed)): return AllowanceRule(packed: packed) != nil
        case (.allowanceNote, .text(let s)): return s.utf8.count <= Limits.allowanceNoteBytesMax
        case (.allowanceStoppedAt, .integer(let millis)): return millis >= 0 && millis <= HLC.millisMax
        case (.childMergedInto, .text(let s)): return RecordID(string: s)?.description == s
        case (.householdTimeZone, .text(let s)): return HouseholdTime.isValidName(s)
        case (.householdConfirmAbove, .integer(let cents)): return cents >= 0
        default: return false
        }
    }
}

/// One ledger entry: immutable once written; a member of a grow-only set keyed by ``id``.
public struct LedgerTransaction: Hashable, Sendable {
    /// Stable id (random, or UUIDv5 of provenance for undo entries and imports).
    public var id: RecordID
    /// The child whose balance it changes.
    public var childID: RecordID
    /// Signed cents: positive adds, negative removes. Never zero, never `Int64.min`.
    public var amountCents: Int64
    /// Creation time, Unix milliseconds.
    public var createdAtMillis: Int64
    /// Free text, possibly empty.
    public var note: String
    /// Where it came from: "give", "take", "give-all", "take-all", "undo", "import".
    public var source: String
    /// For an undo entry: the transaction it compensates.
    public var reverses: RecordID?

    /// Creates a transaction.
    public init(id: RecordID, childID: RecordID, amountCents: Int64, createdAtMillis: Int64,
                note: String = "", source: String, reverses: RecordID? = nil) {
        self.id = id
        self.childID = childID
        self.amountCents = amountCents
        self.createdAtMillis = createdAtMillis
        self.note = note
        self.source = source
        self.reverses = reverses
    }

    /// Whether this is an undo (compensating) entry.
    public var isUndo: Bool { reverses != nil }

    /// The deterministic id of the undo entry for `original`: two devices undoing the same
    /// transaction produce the same id, so it is compensated at most once.
    /// A SHA-1 of two blocks.
    public static func undoID(for original: RecordID) -> RecordID {
        // The name is "undo:" followed by the original's canonical form, built as bytes.
        let prefix: (UInt8, UInt8, UInt8, UInt8, UInt8) = (0x75, 0x6E, 0x64, 0x6F, 0x3A)  // "undo:"
        let name = [UInt8](unsafeUninitializedCapacity: 41) { buffer, count in
            withUnsafeBytes(of: prefix) { buffer.baseAddress!.initialize(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: 5) }
            count = 5 + original.writeHex(into: UnsafeMutableBufferPointer(rebasing: buffer[5...]), dashed: true)
        }
        return RecordID.v5(namespace: RecordID.namespaceKidLedger, name: name)
    }
}

/// One replicated mutation. A change carries one or more operations that apply atomically.
public enum Operation: Hashable, Sendable {
    /// Creates the household (owner, once).
    case createHousehold(Household)
    /// Creates a child.
    case createChild(ChildRecord)
    /// Writes a register of an entity (household or child). `base` is the stamp of the value the
    /// writer saw (nil if none): a write whose base is not the value it replaces was concurrent
    /// with it, and the loser goes to the conflict journal.
    case setField(entity: RecordID, field: Field, value: FieldValue, base: Stamp? = nil)
    /// Adds a transaction to the grow-only set.
    case addTransaction(LedgerTransaction)
    /// The owner grants membership to a key.
    case grant(MemberGrant)
    /// The owner revokes a member.
    case revoke(MemberRevocation)
    /// A member claims the change's origin replica.
    case claim(OriginClaim)
    /// The household's recovery key makes a new key the owner.
    case transferOwner(OwnerTransfer)
    /// The owner grants a relay (docs/RELAY-DESIGN.md).
    case relayGrant(RelayGrant)
    /// The owner removes a relay.
    case relayRevoke(RelayRevocation)
    /// The owner's epoch record: the household's epoch key sealed to each current member.
    case relayEpoch(RelayEpoch)
    /// A member publishes its relay public key for one relay (under its own origin).
    case relayMemberKey(MemberRelayKey)
}

/// A unit of replication: the operations of one local action, stamped with the replica that made
/// it, its sequence number there (1, 2, 3, … without gaps) and a hybrid logical clock reading.
public struct Change: Hashable, Sendable {
    /// The replica that made the change.
    public var origin: ReplicaID
    /// Its position in the origin's history, from 1.
    public var sequence: UInt64
    /// When it was made; orders register writes.
    public var hlc: HLC
    /// What it does; applied all or nothing.
    public var operations: [Operation]

    /// Creates a change.
    public init(origin: ReplicaID, sequence: UInt64, hlc: HLC, operations: [Operation]) {
        self.origin = origin
        self.sequence = sequence
        self.hlc = hlc
        self.operations = operations
    }
}

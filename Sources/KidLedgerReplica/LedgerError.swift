import KidLedgerDomain

/// Expected failures of ledger operations, each with a readable message. The CLI maps them to
/// sysexits codes (see docs/ERRORS.md).
public enum LedgerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No household has been created in this home yet.
    case noHousehold
    /// `init` on a home that already holds a household.
    case householdExists(name: String)
    /// No child matches the name or id prefix; `nearest` is a child's name close enough to be
    /// what was meant ("did you mean …?"), if any.
    case unknownChild(String, nearest: String? = nil)
    /// More than one child matches; the candidates are listed.
    case ambiguousChild(String, candidates: [String])
    /// The child is archived and cannot receive transactions.
    case archived(String)
    /// `child restore` of an archived child whose name (up to case and accents) an active child
    /// now has: the archived child's name and id, and the active child's name.
    case restoreNameTaken(String, id: RecordID, active: String)
    /// `child merge FROM INTO` where FROM was merged into another child already: its name and
    /// the name of the child it counts in now.
    case alreadyMerged(String, into: String)
    /// `child merge FROM INTO` where INTO was merged into another child: its name and the name of
    /// the child it counts in now (merge into that one).
    case mergeTargetMerged(String, into: String)
    /// `child merge FROM INTO` where both name one child.
    case mergeIntoItself(String)
    /// The child is already archived / already active.
    case unchanged(String)
    /// A name is empty or too long.
    case badName(String)
    /// A note is too long.
    case badNote
    /// An amount was rejected.
    case badAmount(MoneyError)
    /// The transaction would take a balance outside the Int64 range.
    case overflow(child: String)
    /// give-all / take-all with no active child.
    case noActiveChildren
    /// Nothing is eligible for undo.
    case nothingToUndo
    /// `undo --mine` when none of this member's entries is eligible.
    case nothingOfYoursToUndo
    /// `undo ID` with an id no transaction has.
    case unknownEntry(String)
    /// `undo ID` of an entry that can't be undone (the reason is given).
    case cannotUndo(String)
    /// A record would break a domain rule (e.g. an empty source tag).
    case invalid(String)
    /// A stored record failed to decode: the store is damaged.
    case corrupted(String)
    /// The store was written by an incompatible schema version.
    case schemaMismatch(found: UInt64, expected: UInt64)
    /// The store was written by a newer kidledger (its product version), which this one can't read.
    case storeFromNewerVersion(schema: UInt64, writer: String)
    /// Changes of this replica's own origin that it does not hold arrived once more after it had
    /// already taken ``Replica/rotationsMax`` fresh ids for them: refused (a member may be forging them).
    case tooManyRotations

    /// A readable sentence.
    public var description: String {
        switch self {
        case .noHousehold: "no household here yet: run `kidledger init NAME` first"
        case .householdExists(let name): "this home already holds the household \"\(name)\""
        case .unknownChild(let q, let near):
            "no child named \"\(q)\"\(near.map { "; did you mean \"\($0)\"?" } ?? "") (see `kidledger children --all`)"
        case .restoreNameTaken(let name, let id, let active):
            "can't restore \"\(name)\": the active child \"\(active)\" has that name now (up to case and accents); rename one of them first (`kidledger child rename \(id.hex.prefix(8)) NEWNAME` renames the archived one)"
        case .ambiguousChild(let q, let candidates):
            "\"\(q)\" matches more than one child: \(candidates.joined(separator: ", ")); name one by its id prefix"
        case .archived(let name): "\(name) is archived: run `kidledger child restore \(name)` first"
        case .alreadyMerged(let name, let into): "\(name) was merged into \(into) already"
        case .mergeTargetMerged(let name, let into): "\(name) was merged into \(into): merge into \(into) instead"
        case .mergeIntoItself(let name): "can't merge \(name) into itself"
        case .unchanged(let what): what
        case .badName(let why): why
        case .badNote: "note is longer than \(Limits.noteBytesMax) bytes"
        case .badAmount(let e): e.description
        case .overflow(let child): "that would take \(child)'s balance out of range"
        case .noActiveChildren: "there are no active children"
        case .nothingToUndo: "nothing to undo: every transaction is already undone or is itself an undo"
        case .nothingOfYoursToUndo: "nothing of yours to undo: every transaction you made is already undone or is itself an undo"
        case .unknownEntry(let id): "no transaction with id \(id) (see `kidledger history --json`)"
        case .cannotUndo(let why): "can't undo: \(why)"
        case .invalid(let what): "invalid transaction: \(what)"
        case .corrupted(let what): "the ledger store is damaged: \(what); run `kidledger verify`"
        case .tooManyRotations:
            "changes of this device's own origin that it never made arrived again after it took \(Replica.rotationsMax) fresh replica ids for them; refusing them (a member may be forging them: see docs/SECURITY.md)"
        case .schemaMismatch(let found, let expected):
            found > expected
                ? "the ledger was written by a newer kidledger (schema version \(found); this kidledger \(KidLedgerVersion.current) reads up to \(expected)): update kidledger to open it. Nothing was changed"
                : "the store has schema version \(found), older than any kidledger release (\(Migrations.oldest) is the oldest): it can't be migrated. Nothing was changed"
        case .storeFromNewerVersion(let schema, let writer):
            "the ledger was written by kidledger \(writer) (schema version \(schema)); this is kidledger \(KidLedgerVersion.current), which reads up to schema version \(Replica.schemaVersion): update kidledger to open it. Nothing was changed"
        }
    }
}

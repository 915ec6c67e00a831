import CLMDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An error reported by LMDB (or by the operating system underneath it), with a Swift name for
/// every code this package expects to meet and ``other(_:_:)`` for the rest.
public enum LMDBError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The map is full: the environment's map size is reached.
    /// The corresponding C error is MDB_MAP_FULL.
    case mapFull
    /// Another process grew the map beyond this process's map size.
    /// The corresponding C error is MDB_MAP_RESIZED.
    case mapResized
    /// Every reader slot of the lock table is taken.
    /// The corresponding C error is MDB_READERS_FULL.
    case readersFull
    /// The key, or a cursor position, was not found.
    /// The corresponding C error is MDB_NOTFOUND.
    case notFound
    /// The key/data pair already exists.
    /// The corresponding C error is MDB_KEYEXIST.
    case keyExists
    /// The environment's maximum number of named databases is reached.
    /// The corresponding C error is MDB_DBS_FULL.
    case dbsFull
    /// The transaction has too many dirty pages.
    /// The corresponding C error is MDB_TXN_FULL.
    case txnFull
    /// A page has the wrong type: the file is corrupted.
    /// The corresponding C error is MDB_CORRUPTED.
    case corrupted
    /// A fatal error happened earlier; the environment must be closed.
    /// The corresponding C error is MDB_PANIC.
    case panic
    /// The environment was written by an incompatible LMDB version.
    /// The corresponding C error is MDB_VERSION_MISMATCH.
    case versionMismatch
    /// The file is not an LMDB data file.
    /// The corresponding C error is MDB_INVALID.
    case invalid
    /// The transaction must abort, has ended, or is otherwise unusable (also: the store is closed).
    /// The corresponding C error is MDB_BAD_TXN.
    case badTxn
    /// A key is empty or longer than the maximum key size, or a value is too large.
    /// The corresponding C error is MDB_BAD_VALSIZE.
    case badValueSize
    /// The database handle is invalid, or the table was not declared when the environment opened.
    /// The corresponding C error is MDB_BAD_DBI.
    case badDBI
    /// The operation is incompatible with the database, or the database was changed incompatibly.
    /// The corresponding C error is MDB_INCOMPATIBLE.
    case incompatible
    /// The operating system denied access (for example a read-only file or directory).
    /// The corresponding C error is EACCES.
    case permissionDenied
    /// The disk (or the file system's quota) is full.
    /// The corresponding C error is ENOSPC.
    case noSpace
    /// The data file is damaged in a way found before or while reading it (truncated, a
    /// meta page overwritten, a value reaching outside the map); the payload says how.
    /// Reported with the code of MDB_CORRUPTED.
    case damaged(String)
    /// Any other LMDB or `errno` code, with its message.
    case other(Int32, String)

    /// Whether the error means the data file is damaged (corrupted pages, a missing page, a bad
    /// header, a truncated file), as opposed to a full disk, a busy store or a bug.
    public var indicatesDamage: Bool {
        switch self {
        case .corrupted, .panic, .invalid, .damaged: true
        case .other(let code, _): code == MDB_PAGE_NOTFOUND || code == MDB_CURSOR_FULL || code == MDB_BAD_RSLOT
        default: false
        }
    }

    /// Names the error for an LMDB return code or an `errno` value (`code` should not be 0).
    public init(code: Int32) {
        switch code {
        case MDB_MAP_FULL: self = .mapFull
        case MDB_MAP_RESIZED: self = .mapResized
        case MDB_READERS_FULL: self = .readersFull
        case MDB_NOTFOUND: self = .notFound
        case MDB_KEYEXIST: self = .keyExists
        case MDB_DBS_FULL: self = .dbsFull
        case MDB_TXN_FULL: self = .txnFull
        case MDB_CORRUPTED: self = .corrupted
        case MDB_PANIC: self = .panic
        case MDB_VERSION_MISMATCH: self = .versionMismatch
        case MDB_INVALID: self = .invalid
        case MDB_BAD_TXN: self = .badTxn
        case MDB_BAD_VALSIZE: self = .badValueSize
        case MDB_BAD_DBI: self = .badDBI
        case MDB_INCOMPATIBLE: self = .incompatible
        case EACCES: self = .permissionDenied
        case ENOSPC: self = .noSpace
        default: self = .other(code, LMDBError.message(code))
        }
    }

    /// The LMDB return code or `errno` value this error stands for.
    public var code: Int32 {
        switch self {
        case .mapFull: MDB_MAP_FULL
        case .mapResized: MDB_MAP_RESIZED
        case .readersFull: MDB_READERS_FULL
        case .notFound: MDB_NOTFOUND
        case .keyExists: MDB_KEYEXIST
        case .dbsFull: MDB_DBS_FULL
        case .txnFull: MDB_TXN_FULL
        case .corrupted: MDB_CORRUPTED
        case .panic: MDB_PANIC
        case .versionMismatch: MDB_VERSION_MISMATCH
        case .invalid: MDB_INVALID
        case .badTxn: MDB_BAD_TXN
        case .badValueSize: MDB_BAD_VALSIZE
        case .badDBI: MDB_BAD_DBI
        case .incompatible: MDB_INCOMPATIBLE
        case .permissionDenied: EACCES
        case .noSpace: ENOSPC
        case .damaged: MDB_CORRUPTED
        case .other(let code, _): code
        }
    }

    /// The C name of the code (for example `MDB_MAP_FULL`), or nil for ``other(_:_:)``.
    public var cName: String? {
        switch self {
        case .mapFull: "MDB_MAP_FULL"
        case .mapResized: "MDB_MAP_RESIZED"
        case .readersFull: "MDB_READERS_FULL"
        case .notFound: "MDB_NOTFOUND"
        case .keyExists: "MDB_KEYEXIST"
        case .dbsFull: "MDB_DBS_FULL"
        case .txnFull: "MDB_TXN_FULL"
        case .corrupted: "MDB_CORRUPTED"
        case .panic: "MDB_PANIC"
        case .versionMismatch: "MDB_VERSION_MISMATCH"
        case .invalid: "MDB_INVALID"
        case .badTxn: "MDB_BAD_TXN"
        case .badValueSize: "MDB_BAD_VALSIZE"
        case .badDBI: "MDB_BAD_DBI"
        case .incompatible: "MDB_INCOMPATIBLE"
        case .permissionDenied: "EACCES"
        case .noSpace: "ENOSPC"
        case .damaged: "MDB_CORRUPTED"
        case .other: nil
        }
    }

    /// A readable description: what went wrong and the C name of the code.
    public var description: String {
        switch self {
        case .mapFull:
            "LMDB map is full (MDB_MAP_FULL): the store reached its maximum map size"
        case .mapResized:
            "LMDB map was resized by another process (MDB_MAP_RESIZED)"
        case .readersFull:
            "LMDB reader table is full (MDB_READERS_FULL): too many concurrent read transactions"
        case .badValueSize:
            "LMDB key or value has an unsupported size (MDB_BAD_VALSIZE): keys must be 1 to 511 bytes"
        case .badDBI:
            "LMDB table handle is invalid (MDB_BAD_DBI): was the table declared when the environment opened?"
        case .badTxn:
            "LMDB transaction is unusable (MDB_BAD_TXN): it failed earlier or has ended, or the environment is closed"
        case .noSpace:
            "No space left on device (ENOSPC)"
        case .permissionDenied:
            "Permission denied (EACCES)"
        case .damaged(let why):
            why
        case .other(let code, let message):
            "LMDB error \(code): \(message)"
        default:
            "\(LMDBError.message(code)) (\(cName ?? "\(code)"))"
        }
    }

    /// LMDB's message for `code` (LMDB codes and `errno` values alike).
    static func message(_ code: Int32) -> String {
        guard let text = mdb_strerror(code) else { return "unknown error \(code)" }
        return String(cString: text)
    }
}

/// Routes an LMDB return code: returns on `MDB_SUCCESS`, throws the named ``LMDBError`` otherwise.
@inline(__always)
func check(_ rc: Int32) throws(LMDBError) {
    if rc != MDB_SUCCESS { throw LMDBError(code: rc) }
}

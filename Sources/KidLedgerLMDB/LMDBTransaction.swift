#if canImport(Glibc)
import Glibc
#endif
import CLMDB
import Synchronization
import KidLedgerReplica

/// One LMDB transaction as the ``KeyValueReader`` / ``KeyValueWriter`` that a store's `read` or
/// `write` body receives. It lives only while the body runs: afterwards every call throws
/// ``LMDBError/badTxn``. Keys and values it hands out are copies, valid after the transaction ends.
final class LMDBTransaction: KeyValueWriter {
    // `@exclusivity(unchecked)` below: a transaction is used by the thread that began it (LMDB
    // requires it of a write transaction; checked by `live()`, which every call goes through) and
    // no access to these properties outlives the call that makes it, so their run-time exclusivity
    // checks (two per put, a sixth of a put's instructions outside LMDB) are left out.

    /// The thread that began the transaction, the only one that may use it.
    private let owner = pthread_self()

    /// The LMDB transaction, nil once it has ended.
    @exclusivity(unchecked) private var txn: OpaquePointer?
    /// The tables' database handles.
    private let dbis: TableHandles
    /// The longest key LMDB accepts.
    private let maxKeySize: Int
    /// Whether some LMDB call of this transaction failed with `MDB_MAP_FULL`: the transaction is
    /// then unusable, whatever the body did with the error, and the store grows the map and retries.
    @exclusivity(unchecked) private(set) var sawMapFull = false

    /// The environment's map (start, end): a key or value that starts inside it must end inside it.
    private let map: (start: UInt, end: UInt)
    /// Per database handle (the array's index), for the tables written in this transaction: its
    /// greatest key, read at the first put. A put of a greater key appends (`MDB_APPEND`: no
    /// search down the tree, and a full page is split at its end, so pages filled in key order
    /// stay full). A delete may leave this greater than the true last key; that only makes a few
    /// puts plain ones. Indexed by handle rather than a dictionary: handles are small numbers.
    @exclusivity(unchecked) private var lastKeys: [LastKey]
    private enum LastKey {
        /// Not read yet in this transaction.
        case unknown
        /// The table was empty.
        case none
        case key([UInt8])
    }
    /// Per database handle (the array's index): the cursor this transaction's puts go through,
    /// opened at the table's first put and closed when the transaction ends. `mdb_put` sets up a
    /// cursor of its own for every call and fetches the table's root page again (a search of the
    /// transaction's dirty pages); a kept cursor still holds it. LMDB moves a transaction's open
    /// cursors along when other writes split or merge pages, so it stays valid.
    @exclusivity(unchecked) private var putCursors: [OpaquePointer?]

    init(_ txn: OpaquePointer, dbis: TableHandles, maxKeySize: Int, map: (start: UInt, end: UInt)) {
        self.map = map
        self.txn = txn
        MapFaultGuard.openTransactions.add(1, ordering: .relaxed)
        self.dbis = dbis
        self.maxKeySize = maxKeySize
        lastKeys = [LastKey](repeating: .unknown, count: Int(dbis.maxHandle) + 1)
        putCursors = [OpaquePointer?](repeating: nil, count: Int(dbis.maxHandle) + 1)
    }

    // MARK: Ending

    /// Aborts the transaction (a no-op once it has ended).
    func abort() {
        checkThread()
        guard let txn else { return }
        closeCursors()
        mdb_txn_abort(txn)
        self.txn = nil
        MapFaultGuard.openTransactions.subtract(1, ordering: .relaxed)
    }

    /// Commits the transaction and returns LMDB's code. The transaction has ended either way:
    /// a failed `mdb_txn_commit` frees it, so it must not be aborted afterwards.
    func commit() -> Int32 {
        checkThread()
        guard let txn else { return MDB_BAD_TXN }
        closeCursors()
        self.txn = nil
        defer { MapFaultGuard.openTransactions.subtract(1, ordering: .relaxed) }
        return mdb_txn_commit(txn)
    }

    /// Closes the put cursors (before the transaction ends: LMDB frees a write transaction's
    /// cursors with it, a read-only one's only when closed).
    private func closeCursors() {
        for i in putCursors.indices {
            if let cursor = putCursors[i] { mdb_cursor_close(cursor) }
            putCursors[i] = nil
        }
    }

    // MARK: Plumbing

    /// The live transaction, or ``LMDBError/badTxn`` once it has ended.
    private func live() throws(LMDBError) -> OpaquePointer {
        checkThread()
        guard let txn else { throw .badTxn }
        return txn
    }

    /// Stops the process when a thread other than the one that began the transaction uses it.
    @inline(__always)
    private func checkThread() {
        precondition(pthread_equal(owner, pthread_self()) != 0, "an LMDB transaction used by a thread that did not begin it")
    }

    /// The handle of a table declared when the environment opened.
    private func dbi(_ table: Table) throws(LMDBError) -> MDB_dbi {
        guard let dbi = dbis[table] else { throw .badDBI }
        return dbi
    }

    /// ``check(_:)`` that also remembers a full map.
    private func call(_ rc: Int32) throws(LMDBError) {
        if rc == MDB_MAP_FULL { sawMapFull = true }
        try check(rc)
    }

    /// Opens the named database for `table` in this write transaction: nil when it does not exist
    /// and `create` is false.
    func openTable(_ table: Table, create: Bool) throws(LMDBError) -> MDB_dbi? {
        let txn = try live()
        var dbi: MDB_dbi = 0
        let rc = mdb_dbi_open(txn, table.name, create ? UInt32(MDB_CREATE) : 0, &dbi)
        if rc == MDB_NOTFOUND && !create { return nil }
        try call(rc)
        return dbi
    }

    /// Entries and B-tree depth of `table`.
    func stat(_ table: Table) throws(LMDBError) -> MDB_stat {
        let txn = try live()
        var stat = MDB_stat()
        try call(mdb_stat(txn, try dbi(table), &stat))
        return stat
    }

    // MARK: KeyValueReader

    func get(_ table: Table, _ key: [UInt8]) throws -> [UInt8]? {
        let txn = try live(), dbi = try dbi(table)
        if key.isEmpty { return nil }  // LMDB keys are never empty (and it rejects empty lookups).
        var value = MDB_val()
        let rc = withValue(key) { k in mdb_get(txn, dbi, &k, &value) }
        if rc == MDB_NOTFOUND { return nil }
        try call(rc)
        return try bytes(value)
    }

    func count(_ table: Table) throws -> Int {
        Int(try stat(table).ms_entries)
    }

    func scan(_ table: Table, prefix: [UInt8], from start: [UInt8]?, reverse: Bool,
              _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws {
        let txn = try live(), dbi = try dbi(table)
        var cursor: OpaquePointer?
        try call(mdb_cursor_open(txn, dbi, &cursor))
        guard let cursor else { throw LMDBError.badTxn }
        defer { mdb_cursor_close(cursor) }

        // The entries are visited in place (pointers into the map, checked by `position`) and
        // copied only when `body` is called: the entry that ends the scan is never copied.
        var entry: Entry?
        if !reverse {
            // First key >= max(prefix, start).
            let seek = start.map { KeyBytes.compare($0, prefix) > 0 ? $0 : prefix } ?? prefix
            entry = seek.isEmpty ? try position(cursor, MDB_FIRST) : try position(cursor, MDB_SET_RANGE, seek)
        } else if let start {
            // Last key <= start (not clamped to the prefix, exactly like MemoryStore).
            if start.isEmpty { return }  // No key is <= the empty key.
            if let found = try position(cursor, MDB_SET_RANGE, start) {
                entry = found.key.elementsEqual(start) ? found : try position(cursor, MDB_PREV)
            } else {
                entry = try position(cursor, MDB_LAST)
            }
        } else if let past = Self.successor(prefix) {
            // Last key with the prefix: one before the first key past the prefix range.
            entry = try position(cursor, MDB_SET_RANGE, past) != nil ? try position(cursor, MDB_PREV)
                                                                     : try position(cursor, MDB_LAST)
        } else {
            // Empty or all-0xFF prefix: nothing sorts past the range.
            entry = try position(cursor, MDB_LAST)
        }
        let step = reverse ? MDB_PREV : MDB_NEXT
        // The copies handed to `body`. Their storage is reused for the next entry when `body`
        // kept no reference to them (copy-on-write: a kept copy is never changed), which saves
        // an allocation and a release per key and per value that `body` only looks at.
        var key: [UInt8] = [], value: [UInt8] = []
        while let current = entry, Self.hasPrefix(current.key, prefix) {
            Self.assign(current.key, to: &key)
            Self.assign(current.value, to: &value)
            if try !body(key, value) { return }
            entry = try position(cursor, step)
        }
    }

    /// An entry where the cursor stands: its key and value inside LMDB's map, valid until the
    /// cursor moves or the transaction writes.
    private typealias Entry = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)

    /// Replaces the contents of `array` with `bytes`, in place when its storage is not shared.
    @inline(__always)
    private static func assign(_ bytes: UnsafeRawBufferPointer, to array: inout [UInt8]) {
        if array.count == bytes.count {
            // Most keys of a table, and many values, have the size of the entry before.
            array.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
        } else {
            array.removeAll(keepingCapacity: true)
            array.append(contentsOf: UnsafeBufferPointer(start: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), count: bytes.count))
        }
    }

    /// Whether the bytes of `key` start with `prefix`.
    @inline(__always)
    private static func hasPrefix(_ key: UnsafeRawBufferPointer, _ prefix: [UInt8]) -> Bool {
        guard key.count >= prefix.count else { return false }
        return prefix.withUnsafeBytes { p in
            KeyBytes.compare(UnsafeRawBufferPointer(rebasing: key[0..<p.count]), p) == 0
        }
    }

    /// The smallest key greater than every key that starts with `prefix`: drop trailing 0xFF
    /// bytes and increment the last one. Nil when there is none (empty or all-0xFF prefix).
    static func successor(_ prefix: [UInt8]) -> [UInt8]? {
        var upper = prefix
        while let last = upper.last, last == 0xFF { upper.removeLast() }
        guard !upper.isEmpty else { return nil }
        upper[upper.count - 1] += 1
        return upper
    }

    /// Moves `cursor` with `op` (seeking `key` when given) and returns the entry it lands on,
    /// in place (checked by ``inPlace(_:)``); nil when there is none.
    private func position(_ cursor: OpaquePointer, _ op: MDB_cursor_op,
                          _ key: [UInt8]? = nil) throws(LMDBError) -> Entry? {
        var found = MDB_val(), value = MDB_val()
        let rc: Int32
        if let key {
            rc = withValue(key) { k in
                let rc = mdb_cursor_get(cursor, &k, &value, op)
                found = k  // LMDB points `k` at the key it found, inside the map.
                return rc
            }
        } else {
            rc = mdb_cursor_get(cursor, &found, &value, op)
        }
        if rc == MDB_NOTFOUND { return nil }
        try call(rc)
        return (try inPlace(found), try inPlace(value))
    }

    /// ``position(_:_:_:)``, copied.
    private func move(_ cursor: OpaquePointer, _ op: MDB_cursor_op,
                      _ key: [UInt8]? = nil) throws(LMDBError) -> (key: [UInt8], value: [UInt8])? {
        try position(cursor, op, key).map { ([UInt8]($0.key), [UInt8]($0.value)) }
    }

    /// A copy of the bytes an `MDB_val` points at (checked by ``inPlace(_:)``).
    private func bytes(_ value: MDB_val) throws(LMDBError) -> [UInt8] {
        [UInt8](try inPlace(value))
    }

    /// The bytes an `MDB_val` points at. A damaged page can carry a size that reaches past the
    /// end of the map: that is reported as damage rather than read.
    @inline(__always)
    private func inPlace(_ value: MDB_val) throws(LMDBError) -> UnsafeRawBufferPointer {
        guard value.mv_size > 0, let data = value.mv_data else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        let start = UInt(bitPattern: data)
        if start >= map.start && start < map.end {
            let (end, overflow) = start.addingReportingOverflow(UInt(value.mv_size))
            guard !overflow, end <= map.end else {
                throw .damaged("a stored entry of \(value.mv_size) bytes reaches past the end of the data file's map: the data file is damaged")
            }
        }
        return UnsafeRawBufferPointer(start: data, count: value.mv_size)
    }

    // MARK: Page check

    /// Walks every entry of the free-page list, the main database and every table, copying each
    /// key and value (which checks that it lies inside the map); returns what is wrong. A free-list
    /// entry must be a count followed by that many page numbers, each a page of the file (2 ...
    /// `lastPage`). LMDB itself reports pages of the wrong type or missing (thrown).
    func checkPages(lastPage: Int) throws(LMDBError) -> [String] {
        let txn = try live()
        var problems: [String] = []
        func walk(_ dbi: MDB_dbi, _ body: (_ key: [UInt8], _ value: [UInt8]) -> Void) throws(LMDBError) {
            var cursor: OpaquePointer?
            try call(mdb_cursor_open(txn, dbi, &cursor))
            guard let cursor else { throw .badTxn }
            defer { mdb_cursor_close(cursor) }
            var entry = try move(cursor, MDB_FIRST)
            while let current = entry {
                body(current.key, current.value)
                entry = try move(cursor, MDB_NEXT)
            }
        }
        let word = MemoryLayout<Int>.size
        try walk(0) { key, value in  // FREE_DBI
            guard value.count >= word, value.count % word == 0 else {
                problems.append("a free-page list entry has \(value.count) bytes")
                return
            }
            let words = value.withUnsafeBytes { raw in (0..<(value.count / word)).map { raw.loadUnaligned(fromByteOffset: $0 * word, as: Int.self) } }
            if words[0] != words.count - 1 {
                problems.append("a free-page list entry counts \(words[0]) pages but holds \(words.count - 1)")
            } else if let bad = words.dropFirst().first(where: { $0 < 2 || $0 > lastPage }) {
                problems.append("the free-page list names page \(bad), outside the file's pages 2...\(lastPage)")
            }
        }
        try walk(1) { _, _ in }  // MAIN_DBI: the tables' roots
        for dbi in dbis.handles.sorted() { try walk(dbi) { _, _ in } }
        return problems
    }

    // MARK: KeyValueWriter

    func put(_ table: Table, _ key: [UInt8], _ value: [UInt8]) throws {
        let txn = try live(), dbi = try dbi(table)
        guard (1...maxKeySize).contains(key.count) else {
            throw LMDBError.badValueSize  // Checked here so the transaction stays usable.
        }
        let last: [UInt8]?
        switch dbi < lastKeys.count ? lastKeys[Int(dbi)] : .unknown {
        case .key(let known): last = known
        case .none: last = nil
        case .unknown: last = try lastKey(txn, dbi)
        }
        var append = true
        if let last { append = KeyBytes.compare(key, last) > 0 }
        let cursor = try putCursor(txn, dbi)
        var rc = withValue(key) { k in withValue(value) { v in mdb_cursor_put(cursor, &k, &v, append ? UInt32(MDB_APPEND) : 0) } }
        if rc == MDB_KEYEXIST && append {
            // Not the greatest key after all (cannot happen while this transaction is the only
            // writer, but costs nothing to handle): a plain put, and read the last key again.
            rc = withValue(key) { k in withValue(value) { v in mdb_cursor_put(cursor, &k, &v, 0) } }
            try call(rc)
            remember(try lastKey(txn, dbi), of: dbi)
            return
        }
        try call(rc)
        remember(append ? key : last, of: dbi)
    }

    /// Notes `key` as the greatest key of `dbi` (nil: the table is empty).
    @inline(__always)
    private func remember(_ key: [UInt8]?, of dbi: MDB_dbi) {
        guard dbi < lastKeys.count else { return }  // Not opened with the environment: never put.
        lastKeys[Int(dbi)] = key.map { .key($0) } ?? .none
    }

    /// The put cursor of `dbi` (``putCursors``), opened when missing.
    @inline(__always)
    private func putCursor(_ txn: OpaquePointer, _ dbi: MDB_dbi) throws(LMDBError) -> OpaquePointer {
        // Every handle comes from `dbis`, whose greatest sized the array.
        if let cursor = putCursors[Int(dbi)] { return cursor }
        var cursor: OpaquePointer?
        try call(mdb_cursor_open(txn, dbi, &cursor))
        guard let cursor else { throw .badTxn }
        putCursors[Int(dbi)] = cursor
        return cursor
    }

    /// The greatest key of a table, or nil when it is empty.
    private func lastKey(_ txn: OpaquePointer, _ dbi: MDB_dbi) throws(LMDBError) -> [UInt8]? {
        var cursor: OpaquePointer?
        try call(mdb_cursor_open(txn, dbi, &cursor))
        guard let cursor else { throw .badTxn }
        defer { mdb_cursor_close(cursor) }
        return try move(cursor, MDB_LAST)?.key
    }

    func delete(_ table: Table, _ key: [UInt8]) throws {
        let txn = try live(), dbi = try dbi(table)
        if key.isEmpty { return }  // No such key can exist.
        let rc = withValue(key) { k in mdb_del(txn, dbi, &k, nil) }
        if rc == MDB_NOTFOUND { return }
        try call(rc)
    }

    /// Empties the table's database (`mdb_drop` without deleting it): its pages are freed at
    /// once instead of one `mdb_del` per key. The table's put cursor is closed first (the next
    /// put opens a fresh one on the empty tree), and the table has no last key.
    func clear(_ table: Table) throws {
        let txn = try live(), dbi = try dbi(table)
        if let cursor = putCursors[Int(dbi)] {  // every handle comes from `dbis`, as in `putCursor`
            mdb_cursor_close(cursor)
            putCursors[Int(dbi)] = nil
        }
        try call(mdb_drop(txn, dbi, 0))
        remember(nil, of: dbi)
    }
}

/// One byte that empty keys and values point at, so LMDB never sees a null pointer.
/// `nonisolated(unsafe)`: never written (LMDB reads no byte of an empty value), only its address is used.
nonisolated(unsafe) private let emptyBytes = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)

/// Runs `body` with an `MDB_val` that points at `bytes` (never a null pointer, even when empty).
@inline(__always)
private func withValue<R>(_ bytes: [UInt8], _ body: (inout MDB_val) -> R) -> R {
    bytes.withUnsafeBytes { buffer in
        var value = MDB_val(mv_size: buffer.count,
                            mv_data: buffer.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) } ?? emptyBytes)
        return body(&value)
    }
}


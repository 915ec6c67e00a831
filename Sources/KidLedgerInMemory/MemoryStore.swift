import KidLedgerReplica

/// An in-memory ``KeyValueStore`` with the same ordering and transaction semantics as LMDB,
/// used by the simulator for speed. A write transaction writes in place and keeps an undo log,
/// so a throwing body leaves nothing behind. Single-threaded: the simulator has no threads.
public final class MemoryStore: KeyValueStore {
    final class SortedTable {
        // The store is single-threaded and no access to these outlives the call that makes it,
        // so the run-time exclusivity checks (a few percent of a simulation) are left out.
        /// The entries in key order: keys and values in one array, so that a put inserts once.
        @exclusivity(unchecked) var entries: [Entry] = []
        /// The store's stamp of the last put or delete (undone ones included), 0 before any: see
        /// ``MemoryStore/writeCount(_:)``.
        @exclusivity(unchecked) var writes: UInt64 = 0

        func copy() -> SortedTable {
            let t = SortedTable()
            t.entries = entries
            t.writes = writes
            return t
        }

        /// Index of the first key >= `key`.
        func lowerBound(_ key: [UInt8]) -> Int { find(key).index }

        /// Index of the first key >= `key`, and whether that key is `key`. The search compares
        /// the key at the index it returns (when there is one), so it notices equality itself.
        func find(_ key: [UInt8]) -> (index: Int, found: Bool) { find(key, head: Entry.head(key)) }

        /// ``find(_:)`` of a key whose ``Entry/head(_:)`` is `head`.
        func find(_ key: [UInt8], head: UInt64) -> (index: Int, found: Bool) {
            key.withUnsafeBytes { key in
                entries.withUnsafeBufferPointer { entries in
                    var lo = 0, hi = entries.count
                    var found = false
                    while lo < hi {
                        let mid = (lo + hi) / 2
                        // Unequal heads order the keys without reading the keys' bytes.
                        let other = entries[mid].head
                        let order = other != head ? (other < head ? -1 : 1)
                            : entries[mid].key.withUnsafeBytes { KeyBytes.compare($0, key) }
                        if order < 0 { lo = mid + 1 } else { hi = mid; if order == 0 { found = true } }
                    }
                    return (lo, found)
                }
            }
        }

        /// Makes `old` the value of `key` again (nil: no entry), without stamping the write:
        /// how an undo entry is applied.
        func reset(_ key: [UInt8], to old: [UInt8]?) {
            let (i, present) = find(key)
            switch (present, old) {
            case (true, let value?): entries[i].value = value
            case (true, nil): entries.remove(at: i)
            case (false, let value?): insert(Entry(key: key, value: value), at: i)
            case (false, nil): break
            }
        }

        /// Inserts `entry` at index `i` (`0...entries.count`): appended, then moved into place
        /// with one memmove of the entries after it. `Array.insert` (a generic replaceSubrange
        /// through a one-element collection) cost about twice as much per put.
        @inline(__always)
        func insert(_ entry: Entry, at i: Int) {
            entries.append(entry)
            let last = entries.count - 1
            guard i < last else { return }
            entries.withUnsafeMutableBufferPointer { buffer in
                let base = buffer.baseAddress!
                let moved = (base + last).move()
                (base + i + 1).moveInitialize(from: base + i, count: last - i)  // overlapping: memmove
                (base + i).initialize(to: moved)
            }
        }
    }

    /// One entry of a table.
    struct Entry {
        /// ``head(_:)`` of the key, kept in the array itself for the binary search.
        let head: UInt64
        let key: [UInt8]
        var value: [UInt8]

        init(key: [UInt8], value: [UInt8]) { self.init(head: Self.head(key), key: key, value: value) }

        @inline(__always)
        init(head: UInt64, key: [UInt8], value: [UInt8]) {
            self.head = head
            self.key = key
            self.value = value
        }

        /// ``head(_:)`` of `key`.
        @inline(__always)
        static func head(_ key: [UInt8]) -> UInt64 { key.withUnsafeBytes { head($0) } }

        /// Whether the two lists hold the same entries: `==`, with the bytes compared eight at a
        /// time (`[UInt8]`'s `==` compares one at a time; the final checks compare whole tables).
        static func same(_ a: [Entry], _ b: [Entry]) -> Bool {
            guard a.count == b.count else { return false }
            for i in a.indices {
                let x = a[i], y = b[i]
                guard x.head == y.head, sameBytes(x.key, y.key), sameBytes(x.value, y.value) else { return false }
            }
            return true
        }

        @inline(__always)
        private static func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
            a.count == b.count && KeyBytes.compare(a, b) == 0
        }

        /// The key's first eight bytes as a big-endian number, zeros past the end of a shorter
        /// key. Two keys whose heads differ sort as their heads do (where they differ, either
        /// both keys have bytes and those differ, or the shorter key has ended and is a prefix
        /// of the longer one); equal heads say nothing.
        @inline(__always)
        static func head(_ key: UnsafeRawBufferPointer) -> UInt64 {
            if key.count >= 8 { return UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)) }
            var h: UInt64 = 0
            for i in 0..<key.count { h |= UInt64(key[i]) << (56 - 8 * i) }
            return h
        }
    }

    /// The tables, found by a linear search on the precomputed name hash: there are about twenty,
    /// and every store operation looks one up, so this is cheaper than hashing into a dictionary.
    struct Snapshot {
        /// The tables' name hashes, searched first (plain integers: no reference counting in the
        /// loop), then their tables and contents at the same indexes.
        private(set) var hashes: [UInt64] = []
        private(set) var tables: [Table] = []
        private(set) var sorted: [SortedTable] = []
        /// An open-addressing index on the name hash: slot `hash % slotCount` (then the next ones)
        /// holds 1 + the table's index, 0 when free. Used while at most `indexedMax` tables exist
        /// (a replica has about twenty); beyond, the search is linear.
        private var slots = [UInt8](repeating: 0, count: Self.slotCount)
        private static let slotCount = 128, indexedMax = 96

        subscript(_ t: Table) -> SortedTable? {
            let h = t.nameHash
            guard hashes.count <= Self.indexedMax else {
                for i in hashes.indices where hashes[i] == h && tables[i] == t { return sorted[i] }
                return nil
            }
            // Read through buffer pointers, without bounds checks (every store operation looks a
            // table up): `s` stays below `slotCount`, the length of `slots`, and a slot holds 1 +
            // an index of `hashes` (and so of `tables` and `sorted`) or 0.
            return slots.withUnsafeBufferPointer { slots in
                hashes.withUnsafeBufferPointer { hashes in
                    var s = Int(truncatingIfNeeded: h % UInt64(Self.slotCount))
                    while slots[s] != 0 {
                        let i = Int(slots[s]) - 1
                        if hashes[i] == h && tables[i] == t { return sorted[i] }
                        s = (s + 1) % Self.slotCount
                    }
                    return nil
                }
            }
        }

        mutating func append(_ t: Table, _ table: SortedTable) {
            hashes.append(t.nameHash)
            tables.append(t)
            sorted.append(table)
            guard hashes.count <= Self.indexedMax else { return }
            var s = Int(truncatingIfNeeded: t.nameHash % UInt64(Self.slotCount))
            while slots[s] != 0 { s = (s + 1) % Self.slotCount }
            slots[s] = UInt8(hashes.count)
        }

        /// The same tables with copies of their contents.
        func copy() -> Snapshot {
            var other = self
            other.sorted = sorted.map { $0.copy() }
            return other
        }
    }

    // Not Sendable (the compiler keeps it on one thread), and no access to its state outlives the
    // call that makes it: the run-time exclusivity checks (a few percent of a simulation) are off.
    @exclusivity(unchecked) private var committed = Snapshot()
    /// The last stamp handed to a write: every put and delete (and every undo of one) takes the
    /// next, so a table's stamp names one state of one table object for the store's lifetime,
    /// even across tables created by a transaction that was then undone.
    @exclusivity(unchecked) private var stamp: UInt64 = 0
    /// The write transaction running, if any: its snapshot holds the tables it created.
    @exclusivity(unchecked) private var writing: Transaction?

    /// The undo log's storage between write transactions (empty, its capacity kept), so that
    /// each write does not grow a new one from nothing.
    @exclusivity(unchecked) private var spareUndo: [Undo] = []
    /// The most capacity ``spareUndo`` keeps.
    static let spareUndoMax = 4096
    /// The capacity an undo log starts with when there is no spare one (a ``WriteLog`` took it):
    /// enough for most transactions, so it seldom grows.
    static let undoCapacity = 64

    /// The last stamp a write took: while it is unchanged (outside a write transaction), so is
    /// every table's content.
    public var lastStamp: UInt64 { stamp }

    func nextStamp() -> UInt64 {
        stamp &+= 1
        return stamp
    }

    /// Creates an empty store.
    public init() {}

    /// Everything the store holds, table by table (for copying a replica's "files" in simulations).
    public func clone() -> MemoryStore {
        let other = MemoryStore()
        other.committed = committed.copy()
        other.stamp = stamp
        return other
    }

    /// The stamp of the last put or delete `table` has seen in this store (0 while it has none; a
    /// clone starts with the same). Whenever the
    /// table's committed content changes, so does this number, so a caller can keep something
    /// derived from the table and recompute it only when the count moved (the simulator's list of
    /// children). The converse does not hold: a write of the same value, or one undone by a
    /// throwing transaction, counts too.
    public func writeCount(_ table: Table) -> UInt64 {
        committed[table]?.writes ?? 0
    }

    /// The stamp of the last put or delete of `table` as the running transaction sees it (the
    /// open write transaction's, else the committed state; 0 while the table does not exist).
    /// Stamps are unique in the store: an equal stamp means the table is exactly as it was when
    /// the stamp was read. What the simulator's caching decorators keep answers by.
    public func stamp(of table: Table) -> UInt64 {
        (writing?.snapshot ?? committed)[table]?.writes ?? 0
    }

    /// Whether `other` holds exactly the same committed entries as this store in each of `tables`
    /// (a table never written counts as empty). Cheap for a ``clone()``: the copies share storage.
    public func hasSameEntries(as other: MemoryStore, in tables: [Table]) -> Bool {
        for t in tables {
            let mine = committed[t], theirs = other.committed[t]
            guard Entry.same(mine?.entries ?? [], theirs?.entries ?? []) else {
                return false
            }
        }
        return true
    }

    /// The read transaction of the committed state, made by the first read and kept for the next
    /// ones (a read costs no allocation then): the tables are objects written in place, so it
    /// reads what a new one would until a commit adds a table (then it is dropped).
    @exclusivity(unchecked) private var reader: Transaction?

    /// Runs `body` against the committed state.
    public func read<T>(_ body: (any KeyValueReader) throws -> T) throws -> T {
        if let reader { return try body(reader) }
        let made = Transaction(store: self, snapshot: committed, writable: false)
        reader = made
        return try body(made)
    }

    /// Runs `body` in place; on a throw, undoes its writes in reverse order.
    public func write<T>(_ body: (any KeyValueWriter) throws -> T) throws -> T {
        let txn = Transaction(store: self, snapshot: committed, writable: true)
        txn.undo = spareUndo
        spareUndo = []
        if txn.undo.capacity == 0 { txn.undo.reserveCapacity(Self.undoCapacity) }
        precondition(writing == nil, "a write transaction inside another")
        writing = txn
        defer {
            writing = nil
            var log = txn.undo
            txn.undo = []
            if log.capacity <= Self.spareUndoMax {
                log.removeAll(keepingCapacity: true)
                spareUndo = log
            }
        }
        do {
            let result = try body(txn)
            if txn.snapshot.tables.count != committed.tables.count { reader = nil }  // it lacks the new tables
            committed = txn.snapshot
            if writeLog != nil { logForCopies(txn) }
            return result
        } catch {
            for entry in txn.undo.reversed() {
                entry.table.writes = nextStamp()
                entry.table.reset(entry.key, to: entry.old)
            }
            throw error
        }
    }

    // MARK: Lazy copies

    /// The undo entries of the writes committed after a ``LazyCopy`` was taken, oldest first:
    /// what turns the store's later state back into the copy's. Each copy starts a new log and
    /// the previous one links to it, so a copy reaches every later write through `next`.
    final class WriteLog {
        /// The undo logs of the commits, each as its transaction left it (moved, not copied).
        @exclusivity(unchecked) var commits: [[Undo]] = []
        @exclusivity(unchecked) var next: WriteLog?
    }

    /// The log commits add to while a lazy copy may need it; nil when none can (no copy, or every
    /// copy that reached it is gone).
    @exclusivity(unchecked) private var writeLog: WriteLog?

    /// Moves a committed transaction's undo log to ``writeLog``, or drops that when the store
    /// holds the only reference to it: then no live copy (nor an older log a copy holds) reaches it.
    private func logForCopies(_ txn: Transaction) {
        if isKnownUniquelyReferenced(&writeLog) {
            writeLog = nil
        } else if !txn.undo.isEmpty {
            writeLog!.commits.append(txn.undo)
            txn.undo = []
        }
    }

    /// A copy of the store's committed state as it was when ``lazyCopy()`` took it, built only by
    /// ``materialize()``: until then it keeps the store and the undo entries of the writes the
    /// store commits since. For copies seldom used (the simulator's stale copies of a replica's
    /// files, taken often and restored rarely): a ``clone()`` shares the tables' arrays, so the
    /// store's next write to each table copies its whole array (retaining every key and value),
    /// whereas keeping an undo entry costs about what dropping it after the commit did.
    ///
    /// The store must not be in a write transaction when the copy is taken or materialized.
    public final class LazyCopy {
        /// Keeps the store's table objects alive: the log's undo entries don't retain them.
        let store: MemoryStore
        let log: WriteLog
        /// The write stamps of the tables that existed then: the first `writes.count` tables of
        /// the store (a committed snapshot only ever appends tables).
        let writes: [UInt64]
        let stamp: UInt64

        init(store: MemoryStore, log: WriteLog, writes: [UInt64], stamp: UInt64) {
            self.store = store
            self.log = log
            self.writes = writes
            self.stamp = stamp
        }

        /// A new store holding what ``MemoryStore/clone()`` would have returned when the copy was
        /// taken (the same entries, write counts and stamp): the store's current tables with
        /// every later write undone, newest first.
        public func materialize() -> MemoryStore {
            let live = store.committed
            var snapshot = Snapshot()
            var index: [ObjectIdentifier: Int] = [:]
            for (i, writes) in writes.enumerated() {
                let t = SortedTable()
                t.entries = live.sorted[i].entries
                t.writes = writes
                snapshot.append(live.tables[i], t)
                index[ObjectIdentifier(live.sorted[i])] = i
            }
            var logs: [WriteLog] = []
            var next: WriteLog? = log
            while let l = next { logs.append(l); next = l.next }
            for l in logs.reversed() {
                for undo in l.commits.reversed() {
                    for entry in undo.reversed() {
                        // A table created after the copy is not in it at all.
                        guard let i = index[ObjectIdentifier(entry.table)] else { continue }
                        snapshot.sorted[i].reset(entry.key, to: entry.old)
                    }
                }
            }
            let other = MemoryStore()
            other.committed = snapshot
            other.stamp = stamp
            return other
        }
    }

    /// A copy of the committed state, built only when materialized (see ``LazyCopy``).
    public func lazyCopy() -> LazyCopy {
        let log = WriteLog()
        writeLog?.next = log
        writeLog = log
        return LazyCopy(store: self, log: log, writes: committed.sorted.map(\.writes), stamp: stamp)
    }

    /// (table, key, previous value) of a write, to undo on a throw. A struct, not a tuple: an
    /// array of tuples is destroyed through the runtime's generic tuple witness, element by
    /// element (a few percent of a simulation, emptying the undo log after every write).
    struct Undo {
        /// Not retained: the log lives only while its transaction, which holds its tables, runs
        /// (or, kept for a ``LazyCopy``, while the copy, which holds the store and so every
        /// committed table, does; entries of an undone transaction are never kept).
        unowned(unsafe) let table: SortedTable
        let key: [UInt8]
        let old: [UInt8]?

        init(_ table: SortedTable, _ key: [UInt8], _ old: [UInt8]?) {
            self.table = table
            self.key = key
            self.old = old
        }
    }

    final class Transaction: KeyValueWriter {
        @exclusivity(unchecked) var snapshot: Snapshot
        /// Every write's ``Undo``, in order.
        @exclusivity(unchecked) var undo: [Undo] = []
        let writable: Bool
        /// Neither strong (the store keeps its read transaction: a cycle) nor checked (an unowned
        /// reference cost a checked retain on every put and delete): a transaction is used only
        /// inside the store's `read` or `write` call, while the store is alive.
        unowned(unsafe) let store: MemoryStore

        init(store: MemoryStore, snapshot: Snapshot, writable: Bool) {
            self.store = store
            self.snapshot = snapshot
            self.writable = writable
        }

        func table(_ t: Table, forWriting: Bool) -> SortedTable? {
            if forWriting {
                precondition(writable, "write in a read transaction")
                if let existing = snapshot[t] { return existing }
                let created = SortedTable()
                snapshot.append(t, created)
                return created
            }
            return snapshot[t]
        }

        func get(_ t: Table, _ key: [UInt8]) throws -> [UInt8]? {
            guard let table = table(t, forWriting: false) else { return nil }
            let (i, found) = table.find(key)
            return found ? table.entries[i].value : nil
        }

        func scan(_ t: Table, prefix: [UInt8], from start: [UInt8]?, reverse: Bool,
                  _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
            guard let table = table(t, forWriting: false) else { return }
            if !reverse {
                var i = table.lowerBound(start.map { KeyBytes.compare($0, prefix) > 0 ? $0 : prefix } ?? prefix)
                while i < table.entries.count, KeyBytes.hasPrefix(table.entries[i].key, prefix) {
                    if try !body(table.entries[i].key, table.entries[i].value) { return }
                    i += 1
                }
            } else {
                var i: Int
                if let start {
                    let (at, found) = table.find(start)
                    i = found ? at : at - 1
                } else {
                    // Last key with the prefix: one before the first key past the prefix range.
                    i = table.lowerBound(prefix)
                    while i < table.entries.count, KeyBytes.hasPrefix(table.entries[i].key, prefix) { i += 1 }
                    i -= 1
                }
                while i >= 0, KeyBytes.hasPrefix(table.entries[i].key, prefix) {
                    if try !body(table.entries[i].key, table.entries[i].value) { return }
                    i -= 1
                }
            }
        }

        func count(_ t: Table) throws -> Int { table(t, forWriting: false)?.entries.count ?? 0 }

        func put(_ t: Table, _ key: [UInt8], _ value: [UInt8]) throws {
            let table = table(t, forWriting: true)!
            table.writes = store.nextStamp()
            let head = Entry.head(key)
            let (i, found) = table.find(key, head: head)
            if found {
                undo.append(Undo(table, key, table.entries[i].value))
                table.entries[i].value = value
            } else {
                undo.append(Undo(table, key, nil))
                table.insert(Entry(head: head, key: key, value: value), at: i)
            }
        }

        func delete(_ t: Table, _ key: [UInt8]) throws {
            let table = table(t, forWriting: true)!
            table.writes = store.nextStamp()
            let (i, found) = table.find(key)
            if found {
                undo.append(Undo(table, key, table.entries[i].value))
                table.entries.remove(at: i)
            }
        }

        /// Empties the table: one undo entry per entry, last key first (as deletes from the end
        /// would log them; undone in reverse, each goes back at the end of the array), then the
        /// array at once, without a search per key. A table that is empty or missing is left as
        /// it is (not created, not stamped), as deleting each of its keys would.
        func clear(_ t: Table) throws {
            precondition(writable, "write in a read transaction")
            guard let table = table(t, forWriting: false), !table.entries.isEmpty else { return }
            table.writes = store.nextStamp()
            undo.reserveCapacity(undo.count + table.entries.count)
            for entry in table.entries.reversed() { undo.append(Undo(table, entry.key, entry.value)) }
            table.entries.removeAll()
        }
    }
}

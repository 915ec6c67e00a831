/// An in-memory ``KeyValueStore`` with the same ordering and transaction semantics as LMDB,
/// used by the simulator for speed. A write transaction works on a copy and swaps it in on
/// success, so a throwing body leaves nothing behind.
public final class MemoryStore: KeyValueStore {
    final class SortedTable {
        var keys: [[UInt8]] = []
        var values: [[UInt8]] = []

        func copy() -> SortedTable {
            let t = SortedTable()
            t.keys = keys
            t.values = values
            return t
        }

        /// Index of the first key >= `key`.
        func lowerBound(_ key: [UInt8]) -> Int {
            var lo = 0, hi = keys.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if KeyBytes.compare(keys[mid], key) < 0 { lo = mid + 1 } else { hi = mid }
            }
            return lo
        }
    }

    struct Snapshot {
        var tables: [Table: SortedTable] = [:]
    }

    private var committed = Snapshot()

    /// Creates an empty store.
    public init() {}

    /// Everything the store holds, table by table (for copying a replica's "files" in simulations).
    public func clone() -> MemoryStore {
        let other = MemoryStore()
        for (t, table) in committed.tables { other.committed.tables[t] = table.copy() }
        return other
    }

    /// Runs `body` against the committed state.
    public func read<T>(_ body: (any KeyValueReader) throws -> T) throws -> T {
        try body(Transaction(snapshot: committed, writable: false))
    }

    /// Runs `body` against a private copy and publishes it on success.
    public func write<T>(_ body: (any KeyValueWriter) throws -> T) throws -> T {
        let txn = Transaction(snapshot: committed, writable: true)
        let result = try body(txn)
        committed = txn.snapshot
        return result
    }

    final class Transaction: KeyValueWriter {
        var snapshot: Snapshot
        var copied: Set<Table> = []
        let writable: Bool

        init(snapshot: Snapshot, writable: Bool) {
            self.snapshot = snapshot
            self.writable = writable
        }

        func table(_ t: Table, forWriting: Bool) -> SortedTable? {
            if forWriting {
                precondition(writable, "write in a read transaction")
                if !copied.contains(t) {
                    snapshot.tables[t] = snapshot.tables[t]?.copy() ?? SortedTable()
                    copied.insert(t)
                }
            }
            return snapshot.tables[t]
        }

        func get(_ t: Table, _ key: [UInt8]) throws -> [UInt8]? {
            guard let table = table(t, forWriting: false) else { return nil }
            let i = table.lowerBound(key)
            return i < table.keys.count && table.keys[i] == key ? table.values[i] : nil
        }

        func scan(_ t: Table, prefix: [UInt8], from start: [UInt8]?, reverse: Bool,
                  _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
            guard let table = table(t, forWriting: false) else { return }
            if !reverse {
                var i = table.lowerBound(start.map { KeyBytes.compare($0, prefix) > 0 ? $0 : prefix } ?? prefix)
                while i < table.keys.count, KeyBytes.hasPrefix(table.keys[i], prefix) {
                    if try !body(table.keys[i], table.values[i]) { return }
                    i += 1
                }
            } else {
                var i: Int
                if let start {
                    i = table.lowerBound(start)
                    if !(i < table.keys.count && table.keys[i] == start) { i -= 1 }
                } else {
                    // Last key with the prefix: one before the first key past the prefix range.
                    i = table.lowerBound(prefix)
                    while i < table.keys.count, KeyBytes.hasPrefix(table.keys[i], prefix) { i += 1 }
                    i -= 1
                }
                while i >= 0, KeyBytes.hasPrefix(table.keys[i], prefix) {
                    if try !body(table.keys[i], table.values[i]) { return }
                    i -= 1
                }
            }
        }

        func count(_ t: Table) throws -> Int { table(t, forWriting: false)?.keys.count ?? 0 }

        func put(_ t: Table, _ key: [UInt8], _ value: [UInt8]) throws {
            let table = table(t, forWriting: true)!
            let i = table.lowerBound(key)
            if i < table.keys.count && table.keys[i] == key {
                table.values[i] = value
            } else {
                table.keys.insert(key, at: i)
                table.values.insert(value, at: i)
            }
        }

        func delete(_ t: Table, _ key: [UInt8]) throws {
            let table = table(t, forWriting: true)!
            let i = table.lowerBound(key)
            if i < table.keys.count && table.keys[i] == key {
                table.keys.remove(at: i)
                table.values.remove(at: i)
            }
        }
    }
}

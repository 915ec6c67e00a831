import KidLedgerInMemory
import KidLedgerReplica

/// A store that remembers which tables (and which `meta` keys) its readers touch.
public final class RecordingStore: KeyValueStore {
    public let base: MemoryStore
    public var tables = Set<String>()
    public var metaKeys = Set<[UInt8]>()

    public init(_ base: MemoryStore) { self.base = base }

    public func read<T>(_ body: (any KeyValueReader) throws -> T) throws -> T {
        try base.read { r in try body(Reader(base: r, store: self)) }
    }

    public func write<T>(_ body: (any KeyValueWriter) throws -> T) throws -> T { try base.write(body) }

    public final class Reader: KeyValueReader {
        let base: any KeyValueReader
        let store: RecordingStore
        init(base: any KeyValueReader, store: RecordingStore) { self.base = base; self.store = store }

        public func get(_ table: Table, _ key: [UInt8]) throws -> [UInt8]? {
            store.tables.insert(table.name)
            if table == Tables.meta { store.metaKeys.insert(key) }
            return try base.get(table, key)
        }

        public func scan(_ table: Table, prefix: [UInt8], from start: [UInt8]?, reverse: Bool,
                  _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
            store.tables.insert(table.name)
            if table == Tables.meta { store.metaKeys.insert([]) }  // a scan of meta reads every key
            try base.scan(table, prefix: prefix, from: start, reverse: reverse, body)
        }

        public func count(_ table: Table) throws -> Int {
            store.tables.insert(table.name)
            return try base.count(table)
        }
    }
}

import KidLedgerDomain

/// A write-back cache in front of one write transaction, for the few small tables that every
/// applied change reads and rewrites: the clock and digest (`meta`), the version vector, the
/// per-child totals and the origin claims. A batch of changes then reads each of those entries
/// from the store once and writes it once, at ``flush()``, instead of once per change.
///
/// Every read and write of the transaction must go through the cache while it is in use; a scan
/// or count of a cached table first writes that table's pending entries to the store, so it sees
/// them. The caller must call ``flush()`` before the transaction commits.
final class BatchWriter: KeyValueWriter {
    private let base: any KeyValueWriter
    /// Cached entries per table: the value (nil: absent or deleted) and whether it must be written.
    private var entries: [Table: [[UInt8]: (value: [UInt8]?, dirty: Bool)]] = [:]

    init(_ base: any KeyValueWriter) { self.base = base }

    private static let cached: [Table] = [Tables.meta, Tables.vector, Tables.aggregates, Tables.claims]

    private static func isCached(_ table: Table) -> Bool {
        cached.contains(table)
    }

    func get(_ table: Table, _ key: [UInt8]) throws -> [UInt8]? {
        guard Self.isCached(table) else { return try base.get(table, key) }
        if let entry = entries[table]?[key] { return entry.value }
        let value = try base.get(table, key)
        entries[table, default: [:]][key] = (value, false)
        return value
    }

    func put(_ table: Table, _ key: [UInt8], _ value: [UInt8]) throws {
        guard Self.isCached(table) else { return try base.put(table, key, value) }
        entries[table, default: [:]][key] = (value, true)
    }

    func delete(_ table: Table, _ key: [UInt8]) throws {
        guard Self.isCached(table) else { return try base.delete(table, key) }
        entries[table, default: [:]][key] = (nil, true)
    }

    func scan(_ table: Table, prefix: [UInt8], from start: [UInt8]?, reverse: Bool,
              _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws {
        if Self.isCached(table) { try flush(table) }
        try base.scan(table, prefix: prefix, from: start, reverse: reverse, body)
    }

    func count(_ table: Table) throws -> Int {
        if Self.isCached(table) { try flush(table) }
        return try base.count(table)
    }

    /// Writes every pending entry to the store (in key order, table by table).
    func flush() throws {
        for table in entries.keys.sorted(by: { $0.name < $1.name }) { try flush(table) }
    }

    private func flush(_ table: Table) throws {
        guard var map = entries[table] else { return }
        for key in map.keys.sorted(by: { KeyBytes.compare($0, $1) < 0 }) where map[key]!.dirty {
            if let value = map[key]!.value {
                try base.put(table, key, value)
            } else {
                try base.delete(table, key)
            }
            map[key]!.dirty = false
        }
        entries[table] = map
    }
}

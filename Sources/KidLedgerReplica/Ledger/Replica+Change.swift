import KidLedgerDomain

/// One local change, from the checks it makes to the records it writes, in one write transaction
/// (docs/STORE.md, "The apply path").
extension Replica {
    /// Runs `body` in one write transaction of the store, which every read and write of this
    /// replica inside `body` joins (its queries, its operations, its ``device`` state). What
    /// `body` checks before it writes (the household, this laptop's membership, the allowance
    /// periods due) still holds when it writes: no other writer, another process on the same
    /// store included, commits in between.
    ///
    /// It commits when `body` returns and aborts when it throws, as ``KeyValueStore/write(_:)``
    /// does. It aborts too when a write inside threw after it had begun to write, even if `body`
    /// caught that error (a half-written change never commits): it throws that error then. A
    /// call inside another joins it.
    ///
    /// - Warning: `body` runs again from scratch when the store starts the transaction over
    ///   (LMDB, after growing its map), so it must read and write through this replica only, and
    ///   leave output until it returned.
    public func change<T>(_ body: () throws -> T) throws -> T {
        if openChange != nil { return try body() }
        return try durableStore.write { w in
            let open = OpenChange(w)
            openChange = open
            defer { openChange = nil }
            let result = try body()
            if let torn = open.tornBy { throw torn }
            return result
        }
    }
}

/// The write transaction a ``Replica/change(_:)`` holds open, as the store its replica reads and
/// writes meanwhile: a read or a write runs in it, and a write that throws after it wrote tears it
/// (its half-written change must not commit).
final class OpenChange: KeyValueStore {
    private let writer: any KeyValueWriter
    /// The error of the first write that threw after it had written, or nil.
    private(set) var tornBy: (any Error)?

    init(_ writer: any KeyValueWriter) { self.writer = writer }

    func read<T>(_ body: (any KeyValueReader) throws -> T) throws -> T { try body(writer) }

    func write<T>(_ body: (any KeyValueWriter) throws -> T) throws -> T {
        let watched = WatchedWriter(writer)
        do {
            return try body(watched)
        } catch {
            if watched.wrote && tornBy == nil { tornBy = error }
            throw error
        }
    }
}

/// A writer that notes whether it wrote (``OpenChange``).
private final class WatchedWriter: KeyValueWriter {
    let writer: any KeyValueWriter
    var wrote = false

    init(_ writer: any KeyValueWriter) { self.writer = writer }

    func get(_ table: Table, _ key: [UInt8]) throws -> [UInt8]? { try writer.get(table, key) }

    func scan(_ table: Table, prefix: [UInt8], from start: [UInt8]?, reverse: Bool,
              _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws {
        try writer.scan(table, prefix: prefix, from: start, reverse: reverse, body)
    }

    func count(_ table: Table) throws -> Int { try writer.count(table) }

    func put(_ table: Table, _ key: [UInt8], _ value: [UInt8]) throws {
        wrote = true
        try writer.put(table, key, value)
    }

    func delete(_ table: Table, _ key: [UInt8]) throws {
        wrote = true
        try writer.delete(table, key)
    }

    func clear(_ table: Table) throws {
        wrote = true
        try writer.clear(table)
    }
}

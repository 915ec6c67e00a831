/// One named, ordered table of the replica's key-value store. Keys sort by unsigned bytes.
public struct Table: Hashable, Sendable, CustomStringConvertible {
    /// The table's name (an LMDB named database).
    public let name: String
    /// A 64-bit hash of the name (FNV-1a), computed once: hashing and comparing tables, which
    /// every store operation does, then costs an integer instead of a string (also for the LMDB
    /// store's table handles).
    public let nameHash: UInt64

    /// Names a table.
    public init(_ name: String) {
        self.name = name
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 { h = (h ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        nameHash = h
    }

    public static func == (a: Table, b: Table) -> Bool { a.nameHash == b.nameHash && a.name == b.name }

    public func hash(into hasher: inout Hasher) { hasher.combine(nameHash) }

    /// The name.
    public var description: String { name }
}

/// Read access inside one transaction of a ``KeyValueStore``.
public protocol KeyValueReader {
    /// The value stored under `key`, or nil.
    func get(_ table: Table, _ key: [UInt8]) throws -> [UInt8]?

    /// Visits the entries whose key starts with `prefix`, in key order (or reverse key order).
    ///
    /// Forward: starts at the first key `>= start` (or the first key with the prefix when `start`
    /// is nil). Reverse: starts at the last key `<= start` (or the last key with the prefix).
    /// The visit stops when `body` returns false or the keys leave the prefix. Keys and values
    /// passed to `body` are copies, valid after the transaction ends.
    func scan(_ table: Table, prefix: [UInt8], from start: [UInt8]?, reverse: Bool,
              _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws

    /// How many entries the table holds.
    func count(_ table: Table) throws -> Int
}

/// Read and write access inside one write transaction of a ``KeyValueStore``.
public protocol KeyValueWriter: KeyValueReader {
    /// Stores `value` under `key`, replacing any previous value.
    func put(_ table: Table, _ key: [UInt8], _ value: [UInt8]) throws

    /// Removes `key`; removing a missing key is not an error.
    func delete(_ table: Table, _ key: [UInt8]) throws

    /// Removes every entry of `table` (the table itself stays): what a rebuild does to each table
    /// it recomputes. Undone, like every write, when the transaction aborts.
    func clear(_ table: Table) throws
}

extension KeyValueWriter {
    /// ``clear(_:)`` as one ``delete(_:_:)`` per key, last key first: for a writer without a
    /// cheaper way (LMDB empties the table's pages at once, the in-memory store its array).
    public func clear(_ table: Table) throws {
        var keys: [[UInt8]] = []
        try scan(table, prefix: [], from: nil, reverse: true) { key, _ in keys.append(key); return true }
        for key in keys { try delete(table, key) }
    }
}

/// An ordered key-value store with atomic, isolated transactions: LMDB in the product, an
/// in-memory map in fast simulations. The replica logic is written once against this interface.
public protocol KeyValueStore: AnyObject {
    /// Runs `body` in a read-only snapshot.
    func read<T>(_ body: (any KeyValueReader) throws -> T) throws -> T

    /// Runs `body` in one write transaction: committed (durably, where the store is durable) when
    /// `body` returns, aborted when it throws. Never both.
    func write<T>(_ body: (any KeyValueWriter) throws -> T) throws -> T
}

extension KeyValueReader {
    /// Visits every entry with `prefix` in forward key order.
    public func scan(_ table: Table, prefix: [UInt8] = [],
                     _ body: (_ key: [UInt8], _ value: [UInt8]) throws -> Bool) throws {
        try scan(table, prefix: prefix, from: nil, reverse: false, body)
    }
}

/// Byte helpers for keys.
public enum KeyBytes {
    /// Whether `key` starts with `prefix`.
    @inlinable
    public static func hasPrefix(_ key: [UInt8], _ prefix: [UInt8]) -> Bool {
        guard key.count >= prefix.count else { return false }
        for i in 0..<prefix.count where key[i] != prefix[i] { return false }
        return true
    }

    /// Unsigned lexicographic comparison.
    @inlinable
    public static func compare(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a.withUnsafeBufferPointer { a in
            b.withUnsafeBufferPointer { b in compare(UnsafeRawBufferPointer(a), UnsafeRawBufferPointer(b)) }
        }
    }

    /// Unsigned lexicographic comparison of raw bytes: eight at a time (as big-endian words, whose
    /// numeric order is the bytes' order), then the rest one by one.
    @inlinable
    public static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let n = min(a.count, b.count)
        var i = 0
        while i + 8 <= n {
            let x = UInt64(bigEndian: a.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            let y = UInt64(bigEndian: b.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            if x != y { return x < y ? -1 : 1 }
            i += 8
        }
        while i < n {
            let x = a[i], y = b[i]
            if x != y { return x < y ? -1 : 1 }
            i += 1
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }
}

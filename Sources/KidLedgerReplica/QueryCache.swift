/// Keeps the answers of the replica's hot queries (``CachedQuery``) between transactions, for a
/// store that can tell which of its tables changed since: injected like the ``ChangePreparer``.
/// The product computes every time (``NoQueryCache``); the simulator passes one built on its
/// in-memory store's write stamps. Every answer must be what `compute()` would return now.
public protocol QueryCache {
    /// `compute()`, or the object it returned last time for `query` when none of `tables` has
    /// changed since. `compute` must read nothing but `tables`, through `r`, and must not write.
    func value<T: AnyObject>(_ query: CachedQuery, tables: [Table], reading r: any KeyValueReader,
                             _ compute: () throws -> T) rethrows -> T
}

/// The queries a ``QueryCache`` may keep.
public enum CachedQuery: Int, Hashable, Sendable, CaseIterable {
    /// Every child's record and registers, in key order, without totals.
    case childRows
    /// The version vector.
    case versionVector
    /// Every child's totals.
    case aggregates
    /// The household's summary.
    case household
    /// The household's ownership: its owners and transfers.
    case ownership
}

/// Keeps nothing: every query computes. The product's query cache.
public struct NoQueryCache: QueryCache {
    /// Creates it.
    public init() {}

    public func value<T: AnyObject>(_ query: CachedQuery, tables: [Table], reading r: any KeyValueReader,
                                    _ compute: () throws -> T) rethrows -> T {
        try compute()
    }
}

/// A value kept by a ``QueryCache`` (which keeps objects).
final class Memo<Value> {
    let value: Value
    init(_ value: Value) { self.value = value }
}

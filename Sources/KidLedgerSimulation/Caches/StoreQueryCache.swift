import KidLedgerReplica
import KidLedgerInMemory
import KidLedgerLMDB

/// A ``QueryCache`` for a replica on a ``MemoryStore``: keeps each query's last answer with the
/// stamps of the tables it read (``MemoryStore/stamp(of:)``), and answers again while they are
/// unchanged.
/// Writes land in place, so this holds inside a write transaction too. Every replica of a
/// simulation asks its household, children, totals and vector over and over; most of the time
/// nothing they read was written in between. It changes only the cost.
public final class StoreQueryCache: QueryCache {
    /// The store whose stamps the answers are kept by.
    public let store: MemoryStore
    /// An answer and the stamps of its tables when it was computed.
    private struct Kept {
        var stamps: [UInt64]
        var value: AnyObject
    }
    // One thread (the simulator's), and no access to it outlives the call that makes it: the
    // run-time exclusivity checks are left out.
    @exclusivity(unchecked) private var kept = [Kept?](repeating: nil, count: CachedQuery.allCases.count)

    /// A cache of queries of `store`.
    public init(_ store: MemoryStore) { self.store = store }

    public func value<T: AnyObject>(_ query: CachedQuery, tables: [Table], reading r: any KeyValueReader,
                                    _ compute: () throws -> T) rethrows -> T {
        let slot = query.rawValue
        if let known = kept[slot], let value = known.value as? T, known.stamps.count == tables.count {
            var same = true
            for i in tables.indices where store.stamp(of: tables[i]) != known.stamps[i] {
                same = false
                break
            }
            if same { return value }
        }
        return remember(slot, tables, try compute())
    }

    private func remember<T: AnyObject>(_ slot: Int, _ tables: [Table], _ value: T) -> T {
        kept[slot] = Kept(stamps: tables.map { store.stamp(of: $0) }, value: value)
        return value
    }
}

/// A ``QueryCache`` for a replica in LMDB: keeps each query's last answer with the committed
/// state it was read from (``LMDBEnvironment/committedState(seenBy:)``), and answers again to a
/// reader that sees the same state: a read transaction of an unchanged store, or a write
/// transaction before its first write. A reader that has written (the apply path, after its
/// first put) always computes. It changes only the cost, as ``StoreQueryCache`` does.
public final class LMDBQueryCache: QueryCache {
    /// The environment whose committed states the answers are kept by.
    public let environment: LMDBEnvironment
    /// An answer and the committed state it was read from.
    private struct Kept {
        var state: Int
        var value: AnyObject
    }
    // One thread (the simulator's, checked by `thread` in debug builds), and no access outlives
    // the call that makes it: the run-time exclusivity checks are left out, as for ``StoreQueryCache``.
    private let thread = ThreadCheck()
    @exclusivity(unchecked) private var kept = [Kept?](repeating: nil, count: CachedQuery.allCases.count)

    /// A cache of queries of `environment`.
    public init(_ environment: LMDBEnvironment) { self.environment = environment }

    public func value<T: AnyObject>(_ query: CachedQuery, tables: [Table], reading r: any KeyValueReader,
                                    _ compute: () throws -> T) rethrows -> T {
        thread.check()
        guard let state = environment.committedState(seenBy: r) else { return try compute() }
        let slot = query.rawValue
        if let known = kept[slot], known.state == state, let value = known.value as? T { return value }
        let value = try compute()
        kept[slot] = Kept(state: state, value: value)
        return value
    }
}

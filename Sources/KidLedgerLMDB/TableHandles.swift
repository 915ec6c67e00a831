import CLMDB
import KidLedgerReplica

/// The database handles of an environment's tables, found by the table's precomputed name hash
/// (``Table/nameHash``). Every get and put looks one up: an open-addressing index on that hash
/// costs a few integer compares, where a dictionary keyed by ``Table`` hashed the name hash
/// through `Hasher` each time (about a tenth of a put's instructions outside LMDB).
struct TableHandles: Sendable {
    /// The tables and their handles, in the order added.
    private(set) var tables: [Table] = []
    private(set) var handles: [MDB_dbi] = []
    /// Slot `nameHash % slots.count` (then the next ones, wrapping) holds 1 + the table's index,
    /// 0 when free. At least twice as many slots as tables, so a free slot ends every search.
    private var slots = [Int32](repeating: 0, count: 64)

    init() {}

    /// The handle of `table`, or nil when it was not added.
    @inline(__always)
    subscript(_ table: Table) -> MDB_dbi? {
        let mask = slots.count - 1
        var s = Int(truncatingIfNeeded: table.nameHash) & mask
        // A free slot ends the search well before every slot was probed (`add` keeps half free).
        for _ in 0..<slots.count {
            let i = Int(slots[s]) - 1
            if i < 0 { return nil }
            if tables[i] == table { return handles[i] }
            s = (s + 1) & mask
        }
        preconditionFailure("the table handles have no free slot")
    }

    /// Adds `table` with `handle` (replacing the handle of a table added before).
    mutating func add(_ table: Table, _ handle: MDB_dbi) {
        defer {
            precondition(tables.count == handles.count, "a table without its handle, or a handle without its table")
            precondition(tables.count * 2 <= slots.count, "fewer than half the table slots free")
            precondition(self[table] == handle, "a table added is not found with its handle")
        }
        if let i = tables.firstIndex(of: table) {
            handles[i] = handle
            return
        }
        precondition(tables.count < Int(Int32.max), "too many tables")
        tables.append(table)
        handles.append(handle)
        if tables.count * 2 > slots.count {
            // Grow (a power of two) and index every table again.
            slots = [Int32](repeating: 0, count: slots.count * 2)
            for i in tables.indices { place(i) }
        } else {
            place(tables.count - 1)
        }
    }

    private mutating func place(_ i: Int) {
        let mask = slots.count - 1
        var s = Int(truncatingIfNeeded: tables[i].nameHash) & mask
        for _ in 0..<slots.count {
            if slots[s] == 0 {
                slots[s] = Int32(i + 1)
                return
            }
            s = (s + 1) & mask
        }
        preconditionFailure("the table handles have no free slot")
    }

    /// The greatest handle (0 when there are none).
    var maxHandle: MDB_dbi { handles.max() ?? 0 }
}

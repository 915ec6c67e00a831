import KidLedgerDomain

extension Replica {
    /// ``containsTransaction(_:)`` for each of `ids`, in order, in one read of the store (the
    /// simulator's checks ask about many ids at once).
    public func containsTransactions(_ ids: [RecordID]) throws -> [Bool] {
        try store.read { r in
            // One key buffer, rewritten for each id: its 16 bytes, as `Keys.id` writes them.
            var key = [UInt8](repeating: 0, count: 16)
            return try ids.map { id in
                key.withUnsafeMutableBytes { raw in
                    raw.storeBytes(of: id.high.bigEndian, toByteOffset: 0, as: UInt64.self)
                    raw.storeBytes(of: id.low.bigEndian, toByteOffset: 8, as: UInt64.self)
                }
                assert(key == Keys.id(id))
                return try r.get(Tables.transactions, key) != nil
            }
        }
    }
}

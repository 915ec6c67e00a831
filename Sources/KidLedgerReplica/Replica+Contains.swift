import KidLedgerDomain

extension Replica {
    /// ``containsTransaction(_:)`` for each of `ids`, in order, in one read of the store (the
    /// simulator's checks ask about many ids at once).
    public func containsTransactions(_ ids: [RecordID]) throws -> [Bool] {
        try store.read { r in try ids.map { try r.get(Tables.transactions, Keys.id($0)) != nil } }
    }
}

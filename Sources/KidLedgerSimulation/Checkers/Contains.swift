import KidLedgerDomain
import KidLedgerReplica

extension Replica {
    /// ``containsTransaction(_:)`` for each of `ids`, in order, in one read of the store (the
    /// checks ask about many at once). A transaction's key is its id's 16 bytes.
    func containsTransactions(_ ids: [RecordID]) throws -> [Bool] {
        try store.read { r in try ids.map { try r.get(Tables.transactions, $0.bytes) != nil } }
    }
}

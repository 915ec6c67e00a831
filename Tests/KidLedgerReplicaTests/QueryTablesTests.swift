import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerInMemory
import KidLedgerTestSupport

/// The conflict journal and the transaction list read only the tables their constants name, so
/// the simulator may take their answer from a replica whose store holds the same entries there.
@Suite("Tables a query reads")
struct QueryTablesTests {
    /// A replica with a journaled conflict (two concurrent renames), transactions and a deferred one.
    func replicaWithConflicts() throws -> Replica {
        let a = try householdWithChildren(["Ben", "Ava"], seed: 1, clock: FixedClock(millis: 1_000_000))
        let b = try makeReplica(seed: 2, clock: FixedClock(millis: 1_000_000))
        try b.receive(try a.changeLog())
        try a.renameChild("Ben", to: "Benjamin")
        try b.renameChild("Ben", to: "Benny")
        try a.post("Ava", signedCents: 5, note: "x", source: "give")
        try b.postAll(signedCents: 2, note: "all", source: "give-all")
        try a.receive(try b.ownChanges().filter { c in !(try a.changeLog()).contains(c) })
        #expect(try a.fieldConflicts().count == 1)
        return a
    }

    func tablesRead(_ replica: Replica, _ query: (Replica) throws -> Void) throws -> Set<String> {
        let recording = RecordingStore(replica.store as! MemoryStore)
        let reader = try Replica(store: recording, clock: FixedClock(millis: 1_000_000), random: SplitMix64(seed: 1))
        recording.tables = []
        try query(reader)
        return recording.tables
    }

    @Test("fieldConflicts reads only conflictJournalTables")
    func journalTables() throws {
        let read = try tablesRead(try replicaWithConflicts()) { _ = try $0.fieldConflicts() }
        #expect(read == Set(Replica.conflictJournalTables.map(\.name)))
    }

    @Test("allTransactions reads only allTransactionsTables")
    func transactionTables() throws {
        let read = try tablesRead(try replicaWithConflicts()) { _ = try $0.allTransactions() }
        #expect(read == Set(Replica.allTransactionsTables.map(\.name)))
    }
}

import KidLedgerDomain
import KidLedgerReplica

/// What ``Simulator/checkBatchesAtomic(_:)`` knows of one replica's give-all batches.
struct BatchBook {
    /// The indexes of the batches not found whole there yet (ascending), of the first `known`
    /// batches; those made since are not whole there either.
    var pending: [Int] = []
    var known = 0
    /// The in-memory store its batches were last checked on without a failure, that store's
    /// transactions write count then, and how many batches there were.
    var clean: (store: MemoryStore, transactions: UInt64, batches: Int)?
}

extension Simulator {
    /// No replica ever shows part of a give-all batch. Checked after every event for the
    /// replicas it touched (only batches not yet found whole there: a batch found whole is not
    /// looked at again, except after a restore from stale files, which resets the bookkeeping of
    /// that replica).
    ///
    /// Only `containsTransaction` is asked (for all the batches looked at in one read:
    /// `containsTransactions`), so for an in-memory store whose transactions table was
    /// not written since its last clean check, only batches made since then are looked at.
    func checkBatchesAtomic(_ only: [Int]? = nil) throws {
        for index in only ?? Array(nodes.indices) {
            guard let replica = nodes[index].replica else { continue }
            // Nothing new since a clean check: no batch made since, the transactions not written.
            if index < batchBooks.count, batchBooks[index].known == batches.count,
               let clean = batchBooks[index].clean, clean.batches == batches.count,
               let memory = nodes[index].store as? MemoryStore, clean.store === memory,
               clean.transactions == memory.writeCount(Tables.transactions) { continue }
            while batchBooks.count <= index { batchBooks.append(BatchBook()) }
            var book = batchBooks[index]
            batchBooks[index] = BatchBook()  // `book` alone holds its arrays while it is changed
            defer { batchBooks[index] = book }
            // Batches made since the last look are not whole here yet.
            if book.known < batches.count {
                book.pending += book.known..<batches.count
                book.known = batches.count
            }
            let memory = nodes[index].store as? MemoryStore
            let written = memory?.writeCount(Tables.transactions)
            var first = 0
            if let memory, let clean = book.clean, clean.store === memory, clean.transactions == written {
                first = clean.batches
            }
            let failuresBefore = failures.count
            // The batches looked at: those not whole here, from `first` on (the pending indexes
            // ascend). Every id of each, asked in one read of the store.
            var start = book.pending.count
            while start > 0 && book.pending[start - 1] >= first { start -= 1 }
            guard start < book.pending.count else {
                if let memory, let written { book.clean = (memory, written, batches.count) }
                continue
            }
            var ids: [RecordID] = []
            ids.reserveCapacity(book.pending[start...].reduce(0) { $0 + batches[$1].count })
            for i in book.pending[start...] { ids.append(contentsOf: batches[i]) }
            let held = try replica.containsTransactions(ids)
            var at = 0
            var kept = start
            for j in start..<book.pending.count {
                let i = book.pending[j]
                let batch = batches[i]
                var present = 0
                for k in at..<(at + batch.count) where held[k] { present += 1 }
                at += batch.count
                if present != 0 && present != batch.count {
                    failures.append("\(nodes[index].name) shows \(present) of \(batch.count) transactions of give-all batch \(i)")
                }
                if present != batch.count {
                    book.pending[kept] = i
                    kept += 1
                }
            }
            book.pending.removeLast(book.pending.count - kept)
            if let memory, let written, failures.count == failuresBefore {
                book.clean = (memory, written, batches.count)
            }
        }
    }

    /// Each replica (of `replicas`, one per node, in order) passes `verify` and holds its
    /// transactions as it should (``transactionProblems(_:rejected:)``). Those checks are a
    /// function of the transactions a replica holds (and of the oracle's state, the same for every
    /// replica): converged replicas usually hold the same ones, so each distinct transactions
    /// table of the in-memory replicas is read and checked once (``PerContent``).
    ///
    /// `first`: ``verifyOnce(_:keepingRecords:)`` of `replicas[0]`, already asked; its records
    /// are what `verify` decoded of that store, which has not been written since (the final checks
    /// only read), so their transactions are its `allTransactions()`.
    func checkEachReplica(_ replicas: [Replica], rejected: Set<RecordID>,
                          first: (report: VerifyReport, records: VerifiedRecords?)? = nil) throws {
        var checked = PerContent<[String]>(tables: Replica.allTransactionsTables)
        for (i, (node, replica)) in zip(nodes, replicas).enumerated() {
            let report = try (i == 0 ? first?.report : nil) ?? verifyOnce(replica).report
            for problem in report.problems.prefix(3) { failures.append("\(node.name) verify: \(problem)") }
            let problems = try checked.answer(replica) {
                let all = try (i == 0 ? first?.records?.allTransactions : nil) ?? replica.allTransactions()
                return transactionProblems(all, rejected: rejected)
            }
            for problem in problems { failures.append("\(node.name) \(problem)") }
        }
    }

    /// Every replica's conflict journal (`fieldConflicts()`), read once per distinct content of
    /// the tables it is derived from among the in-memory replicas (``PerContent``).
    func conflictJournals(_ replicas: [Replica]) throws -> [[FieldConflict]] {
        var journals = PerContent<[FieldConflict]>(tables: Replica.conflictJournalTables)
        return try replicas.map { replica in try journals.answer(replica) { try replica.fieldConflicts() } }
    }

    /// What is wrong with a replica's transactions `all` (``Replica/allTransactions()``), each
    /// problem to follow the replica's name: an undo of an undo, an original compensated more than
    /// once, the first acknowledged transaction missing (but those `rejected` by the revocation
    /// rule or lost with a restore's files).
    func transactionProblems(_ all: [LedgerTransaction], rejected: Set<RecordID>) -> [String] {
        var problems: [String] = []
        // Whether each held transaction is an undo, by id (all that is asked of a held one).
        var isUndo: [RecordID: Bool] = [:]
        isUndo.reserveCapacity(all.count)
        for t in all { isUndo[t.id] = t.isUndo }
        var compensations: [RecordID: Int] = [:]
        for t in all {
            guard let original = t.reverses else { continue }
            compensations[original, default: 0] += 1
            if isUndo[original] == true { problems.append("holds an undo of an undo: \(t.id)") }
        }
        for (original, n) in compensations.sorted(by: { $0.key < $1.key }) where n > 1 {
            problems.append("compensates \(original) \(n) times")
        }
        for id in acknowledgedOrder where !mayBeLost.contains(id) && !rejected.contains(id) && isUndo[id] == nil {
            problems.append("lost acknowledged transaction \(id) (made on r\(acknowledged[id]!))")
            break
        }
        return problems
    }

    /// `replica.verify()`, computed once per distinct store content: converged replicas usually
    /// hold the same entries in every table `verify` reads, and then its report is the same
    /// (``Replica/verifiesAlike(_:_:)``). An LMDB replica is compared by reading its tables
    /// through LMDB, so the first of each content is verified and the others are still read whole.
    /// With `keepingRecords`, what `verify` decoded when it ran here (nil when the report was kept).
    func verifyOnce(_ replica: Replica, keepingRecords: Bool = false) throws -> (report: VerifyReport, records: VerifiedRecords?) {
        for entry in verifiedContents where try Replica.verifiesAlike(entry.content, replica.store) { return (entry.report, nil) }
        let (report, records) = try replica.verify(keepingRecords: keepingRecords)
        verifiedContents.append((try Replica.verifiedContent(of: replica.store), report))  // a copy: the store may change later
        return (report, records)
    }

    /// After the run is quiet: equal digests, intact replicas, the membership checks (the
    /// revocation rule, no change of any replica lost, equal members), no acknowledged transaction
    /// lost (but those the revocation rule rejects), at most one compensation per original, no
    /// undo of an undo, whole batches; then three ways to the final state agree (`checkEquivalence`).
    func finalChecks() throws {
        let replicas = nodes.compactMap(\.replica)
        guard replicas.count == nodes.count else { failures.append("a replica is still down"); return }
        let digests = try replicas.map { try $0.digest() }
        if Set(digests).count != 1 {
            failures.append("digests differ: " + zip(nodes, digests).map { "\($0.name)=\($1.description.prefix(12))" }.joined(separator: " "))
        }
        // The first replica verified first (`checkEachReplica` reports it in its turn): the change
        // log entries and transactions `verify` decodes are decoded again by `ChangeLogs` and
        // `allTransactions()`, which take them instead.
        let first = try verifyOnce(replicas[0], keepingRecords: true)
        // Every replica's whole change log, read once for the membership checks and the reference
        // model (nothing writes in between).
        let logs = try ChangeLogs(replicas, decoded: first.records?.changes ?? [])
        let rejected = try membershipChecks(replicas, logs: logs)
        try checkEachReplica(replicas, rejected: rejected, first: first)
        try checkBatchesAtomic()
        try checkAgainstReferenceModel(replicas, logs: logs)
        let journals = try conflictJournals(replicas)
        if journals.isEmpty || journals.contains(where: { $0 != journals[0] }) {
            failures.append("conflict journals differ: " + journals.map { "\($0.count)" }.joined(separator: " "))
        }
        log("conflict journal: \(journals.first?.count ?? 0) lost writes")
        // Last: it reopens the LMDB replicas, so `replicas` above are stale after it.
        if Set(digests).count == 1 { equivalentWays = try checkEquivalence(digests[0]) }
        log("final digest \(digests.first?.description ?? "-") checks \(failures.isEmpty ? "passed" : "FAILED")")
    }
}

/// The answers of a function of some tables of a replica's store, kept per distinct content of
/// those tables: a replica whose in-memory store holds entry for entry what an earlier one's held
/// when it was asked (``MemoryStore/hasSameEntries(as:in:)``) gets that answer again. The stores
/// must not be written while it is in use (the final checks only read). A replica in LMDB is
/// always asked.
struct PerContent<Answer> {
    /// What the function reads.
    let tables: [Table]
    /// The in-memory stores asked so far, with their answers.
    private var known: [(store: MemoryStore, answer: Answer)] = []

    init(tables: [Table]) { self.tables = tables }

    /// `compute()`, the function's answer for `replica`, or the answer kept for equal tables.
    mutating func answer(_ replica: Replica, _ compute: () throws -> Answer) rethrows -> Answer {
        guard let memory = replica.store as? MemoryStore else { return try compute() }
        if let hit = known.first(where: { $0.store.hasSameEntries(as: memory, in: tables) }) { return hit.answer }
        let answer = try compute()
        known.append((memory, answer))
        return answer
    }
}

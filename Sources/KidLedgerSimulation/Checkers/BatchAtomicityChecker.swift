import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica

/// No partial batch: no replica ever shows part of a give-all batch (nor of an undo's
/// compensations). A replica shows part of a batch when it holds some of its entries but not
/// all, and at least one of those it holds as the batch maker's own: an undo's ids are derived
/// (two laptops undoing one entry write one id), so a replica can hold some of a batch's ids
/// from another member's undo while the batch's own change is not applied there (its maker was
/// revoked before it, say: hostile seed 950169, where a revoked member's undo of a forked
/// take-all's ten entries shared five ids with the owner's own undo). Checked at every checkpoint
/// for the replicas it names, and at the end for all: only batches not yet found whole there (a
/// batch found whole is not looked at again, but after a restore from stale files, which resets
/// the bookkeeping of that replica).
///
/// Only whether each entry is held is asked (for all the batches looked at in one read:
/// `containsTransactions`), and whose versions the held ones are only for a partial batch; for an
/// in-memory store whose transactions table was not written since its last clean check, only
/// batches made since then are looked at.
final class BatchAtomicityChecker: Checker {
    /// What the checker knows of one replica's give-all batches.
    struct Book {
        /// The indexes of the batches not found whole there yet (ascending), of the first `known`
        /// batches; those made since are not whole there either.
        var pending: [Int] = []
        var known = 0
        /// The in-memory store its batches were last checked on without a failure, that store's
        /// transactions write count then, and how many batches there were.
        var clean: (store: MemoryStore, transactions: UInt64, batches: Int)?
    }

    // Used by the simulator's one thread only (checked by `thread` in debug builds), within the
    // call that makes each access: the run-time exclusivity checks of this per-delivery state
    // are left out, as in ``Simulator``.
    private let thread = ThreadCheck()
    /// Every batch, its transactions.
    @exclusivity(unchecked) private(set) var batches: [[RecordID]] = []
    /// Every batch's maker (the origin that wrote it), nil when not known: then any partial
    /// batch fails. (One thread, as for `batches`: appended beside it, read in the same check.)
    @exclusivity(unchecked) private var makers: [ReplicaID?] = []
    /// Per replica index, what is known of its batches.
    @exclusivity(unchecked) private var books: [Book] = []

    func madeBatch(_ transactions: [RecordID], maker: ReplicaID? = nil) {
        thread.check()
        batches.append(transactions)
        makers.append(maker)
    }

    func restoring(_ restore: StaleRestore) throws {
        if restore.node < books.count { books[restore.node] = Book() }
    }

    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        stage == .batches ? try checkpoint(run.nodes, only: nil) : []
    }

    func checkpoint(_ nodes: [SimNode], only: [Int]?) throws -> [String] {
        var failures: [String] = []
        for index in only ?? Array(nodes.indices) { try check(nodes[index], failures: &failures) }
        return failures
    }

    private func check(_ node: SimNode, failures: inout [String]) throws {
        thread.check()
        let index = node.index
        guard let replica = node.replica else { return }
        // Nothing new since a clean check: no batch made since, the transactions not written.
        if index < books.count, books[index].known == batches.count,
           let clean = books[index].clean, clean.batches == batches.count,
           let memory = node.store as? MemoryStore, clean.store === memory,
           clean.transactions == memory.writeCount(Tables.transactions) { return }
        while books.count <= index { books.append(Book()) }
        var book = books[index]
        books[index] = Book()  // `book` alone holds its arrays while it is changed
        defer { books[index] = book }
        // Batches made since the last look are not whole here yet.
        if book.known < batches.count {
            book.pending += book.known..<batches.count
            book.known = batches.count
        }
        let memory = node.store as? MemoryStore
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
            return
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
            let present = held[at..<(at + batch.count)].count(where: { $0 })
            at += batch.count
            // Only a partial batch asks whose versions the held entries are (decoding each).
            if present != 0 && present != batch.count, try heldByMaker(i, replica) {
                failures.append("\(node.name) shows \(present) of \(batch.count) transactions of the batch of transaction \(batch[0].tail)")
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

    /// Whether `replica` holds any entry of batch `i` as the version its maker wrote (any held
    /// entry when the maker is not known).
    private func heldByMaker(_ i: Int, _ replica: Replica) throws -> Bool {
        try replica.transactionAuthors(batches[i]).contains { author in
            author != nil && (makers[i] == nil || author == makers[i])
        }
    }
}

import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica

/// What the final checks read of a quiet run, read once and shared by the checkers: the
/// replicas, their digests, their change logs, their `verify` reports and transactions (once per
/// distinct content). The stores are only read while it is in use, but by the equivalence check,
/// which comes last and reopens the LMDB replicas.
final class FinalRun {
    /// Every node, in order, each with its running replica in ``replicas``.
    let nodes: [SimNode]
    let replicas: [Replica]
    /// Each replica's digest.
    let digests: [Digest256]
    /// The first replica's `verify` report.
    let first: VerifyReport
    /// Every replica's whole change log.
    let logs: ChangeLogs
    let household: RecordID
    /// The household's one genesis (the founder's), which every replica pins.
    let genesis: Household?
    let time: SimTime
    let seed: UInt64
    let verifier: CachingVerifier
    /// Appends a line to the run's trace.
    let log: (String) -> Void
    /// Closes a replica in LMDB and restarts it from its files.
    let restartFromFiles: (SimNode) throws -> Void
    /// The acknowledged transactions the revocation rule rejects (filled at
    /// ``FinalStage/revocationRule``): they may be absent.
    var rejected = Set<RecordID>()
    /// The `verify` reports so far, each with a copy of the store content it was computed on.
    private var verified: [Verified] = []
    private var held = PerContent<HeldTransactions>(tables: Replica.allTransactionsTables)
    private var heldByReplica: [Int: HeldTransactions] = [:]
    private var firstMembers: [MemberSummary]?

    init(nodes: [SimNode], replicas: [Replica], household: RecordID, time: SimTime, seed: UInt64,
         verifier: CachingVerifier, log: @escaping (String) -> Void,
         restartFromFiles: @escaping (SimNode) throws -> Void) throws {
        precondition(replicas.count == nodes.count && !replicas.isEmpty, "every replica is up")
        self.nodes = nodes
        self.replicas = replicas
        self.household = household
        self.genesis = try replicas[0].genesis()
        self.time = time
        self.seed = seed
        self.verifier = verifier
        self.log = log
        self.restartFromFiles = restartFromFiles
        digests = try replicas.map { try $0.digest() }
        first = try Self.verify(replicas[0], known: &verified)
        logs = try ChangeLogs(replicas)
    }

    /// The first replica's members (`members()`).
    func members() throws -> [MemberSummary] {
        if let firstMembers { return firstMembers }
        let members = try replicas[0].members()
        firstMembers = members
        return members
    }

    /// `replica.verify()`, computed once per distinct store content: converged replicas usually
    /// hold the same entries in every table `verify` reads, and then its report is the same
    /// (``Replica/verifiesAlike(_:_:)``). An LMDB replica is read into memory once and compared
    /// as that copy, so the first of each content is verified and the others are still read whole.
    func verifyOnce(_ replica: Replica) throws -> VerifyReport {
        try Self.verify(replica, known: &verified)
    }

    /// The `verify` report of the replica at `index`.
    func report(of index: Int) throws -> VerifyReport {
        index == 0 ? first : try verifyOnce(replicas[index])
    }

    /// `replica.verify()`, from the reports in `known`: the whole report of one with the same
    /// verified content, or else its read checks (``Replica/verifyReads()``) with the
    /// recomputation of one that recomputes alike (the same log: converged replicas usually differ
    /// only in the signed heads they hold), computed only when none does.
    private static func verify(_ replica: Replica, known: inout [Verified]) throws -> VerifyReport {
        var readsButHeads: VerifyReport?, recomputation: Recomputation?
        // In memory: a replica in LMDB is read once, not once per known content.
        let content = try replica.store as? MemoryStore ?? Replica.verifiedContent(of: replica.store)
        for entry in known {
            let alike = try Replica.verifyAlikeness(entry.content, content)
            if alike.everything { return entry.report }
            if readsButHeads == nil, alike.allButHeads { readsButHeads = entry.readsButHeads }
            if recomputation == nil, alike.recomputation { recomputation = entry.recomputation }
        }
        let reads = try readsButHeads ?? replica.verifyReads(headsToo: false)
        let recomputed = try recomputation ?? replica.verifyRecomputation()
        let report = try reads.adding(problems: replica.verifyHeadProblems()).adding(recomputed)
        // A copy of the content: the store may change later.
        known.append(Verified(content: try Replica.verifiedContent(of: content), report: report,
                              readsButHeads: reads, recomputation: recomputed))
        return report
    }

    /// A `verify` report with the content it was computed on and its parts.
    private struct Verified {
        let content: MemoryStore
        let report: VerifyReport
        /// ``Replica/verifyReads(headsToo:)`` without the heads, and the recomputation.
        let readsButHeads: VerifyReport
        let recomputation: Recomputation
    }

    /// The transactions of the replica at `index`, read once per distinct content of the
    /// transactions table among the in-memory replicas (``PerContent``).
    func transactions(of index: Int) throws -> HeldTransactions {
        if let known = heldByReplica[index] { return known }
        let replica = replicas[index]
        let content = held.count
        let answer = try held.answer(replica) {
            HeldTransactions(try replica.allTransactions(), content: content)
        }
        heldByReplica[index] = answer
        return answer
    }
}

/// A replica's transactions, as the final checks read them.
struct HeldTransactions {
    /// ``Replica/allTransactions()``.
    let all: [LedgerTransaction]
    /// Whether each held transaction is an undo, by id (all that is asked of a held one).
    let isUndo: [RecordID: Bool]
    /// Which distinct content they are: equal for replicas whose transactions tables are equal
    /// (checkers keep their answers by it).
    let content: Int

    init(_ all: [LedgerTransaction], content: Int) {
        self.all = all
        self.content = content
        var isUndo: [RecordID: Bool] = [:]
        isUndo.reserveCapacity(all.count)
        for t in all { isUndo[t.id] = t.isUndo }
        self.isUndo = isUndo
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
    /// How many answers were computed.
    private(set) var count = 0

    init(tables: [Table]) { self.tables = tables }

    /// `compute()`, the function's answer for `replica`, or the answer kept for equal tables.
    mutating func answer(_ replica: Replica, _ compute: () throws -> Answer) rethrows -> Answer {
        guard let memory = replica.store as? MemoryStore else { count += 1; return try compute() }
        if let hit = known.first(where: { $0.store.hasSameEntries(as: memory, in: tables) }) { return hit.answer }
        let answer = try compute()
        count += 1
        known.append((memory, answer))
        return answer
    }
}

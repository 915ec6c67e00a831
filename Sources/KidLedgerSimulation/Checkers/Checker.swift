import KidLedgerDomain
import KidLedgerReplica

/// One property of a simulation run, checked by a type that owns what it must remember of the
/// run. The harness (``Simulator``) calls its hooks as the run goes and at the end; a hook that
/// can find a violation answers with its failures, none when the property holds. Modelled on
/// TigerBeetle's `src/testing/` checkers: the harness moves time, messages and faults, a checker
/// only watches.
///
/// Every hook has a default that ignores it: a checker implements those it needs.
protocol Checker: AnyObject {
    /// A replica committed local changes (`carrier`: a user's operation, a grant, a revocation),
    /// which acknowledged `transactions` to the user (none for other operations).
    func committed(_ carrier: Carrier, acknowledging transactions: [RecordID])
    /// A give-all or take-all (or an undo's compensations) acknowledged `transactions` as one
    /// batch (maybe empty), written under origin `maker` (nil: not known).
    func madeBatch(_ transactions: [RecordID], maker: ReplicaID?)
    /// A replica is about to come back from a stale copy of its files (before its restart).
    func restoring(_ restore: StaleRestore) throws
    /// The run's periodic check (every 500 virtual ms) and the check after a delivery: of the
    /// replicas at `only` (every node's when nil).
    func checkpoint(_ nodes: [SimNode], only: [Int]?) throws -> [String]
    /// One stage of the final checks, once the run is quiet (``FinalStage/inOrder(replicas:)``).
    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String]
}

extension Checker {
    func committed(_ carrier: Carrier, acknowledging transactions: [RecordID]) {}
    func madeBatch(_ transactions: [RecordID], maker: ReplicaID?) {}
    func restoring(_ restore: StaleRestore) throws {}
    func checkpoint(_ nodes: [SimNode], only: [Int]?) throws -> [String] { [] }
    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] { [] }
}

/// What a restore from a stale copy shows the checkers: readers of the replica's current files,
/// of the stale copy it comes back on, and of every other replica's files.
struct StaleRestore {
    /// The restored replica's node index.
    let node: Int
    let current: Replica
    let stale: Replica
    let others: [Replica]
}

/// The stages of the final checks, in the order they run (and report): each stage asks every
/// checker in ``RunCheckers/all``'s order, and one checker answers (four for ``replica(_:)``, two for ``referenceModel``).
enum FinalStage: Equatable {
    /// Every replica has the same digest.
    case converged
    /// Equal members on every replica, no forged changes, the rejected count, revoked flags.
    case membership
    /// No replica lost a change it made, nor made one under an origin its account did not claim.
    case ownChanges
    /// The revocation rule on acknowledged transactions (it fills ``FinalRun/rejected``).
    case revocationRule
    /// One replica: `verify`, its compensations, one allowance payment per period, merged
    /// balances equal to the sums of their children's transactions, the acknowledged
    /// transactions it must hold.
    case replica(Int)
    /// No replica shows part of a give-all batch.
    case batches
    /// Every replica's children are what the reference model computes, and the replicas agree on
    /// which child each child counts in.
    case referenceModel
    /// Every replica has the same conflict journal.
    case conflictJournals
    /// Three ways to the converged state agree.
    case equivalence

    /// Every stage, in order, for a run of `replicas` replicas.
    static func inOrder(replicas: Int) -> [FinalStage] {
        [.converged, .membership, .ownChanges, .revocationRule] + (0..<replicas).map(FinalStage.replica)
            + [.batches, .referenceModel, .conflictJournals, .equivalence]
    }
}

/// A run's checkers: each by its type, for what the harness reads of one (the rejected changes,
/// the ways compared, who made a transaction), and all of them in the order their failures are
/// reported within a stage.
struct RunCheckers {
    let convergence = ConvergenceChecker()
    let verify = VerifyChecker()
    let compensation = CompensationChecker()
    let acknowledged = AcknowledgedChangesChecker()
    let revocation = RevocationChecker()
    let batches = BatchAtomicityChecker()
    let balance = BalanceChecker()
    let equivalence = EquivalenceChecker()
    let allowance = AllowanceChecker()
    let merges = MergeChecker()
    /// Every checker, in report order.
    let all: [any Checker]

    init() {
        all = [convergence, verify, compensation, allowance, merges, acknowledged, revocation, batches, balance, equivalence]
    }
}

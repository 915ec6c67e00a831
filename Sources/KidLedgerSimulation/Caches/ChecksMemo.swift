import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerReplica

/// The per-child checks of the last few totals sessions were asked about, with their
/// `checksDigest` message: a ``ChildChecking`` decorator of ``ComputedChildChecks``. Both are a
/// pure function of the totals, and the totals repeat: both ends of a session that converged hold
/// the same, and a replica nothing was written to holds what its last session found. A
/// simulation's sessions share one (they run on one thread).
final class ChecksMemo: ChildChecking {
    private let computed = ComputedChildChecks()
    /// The kept answers, the most recently used first.
    private var kept: [(totals: [RecordID: Aggregate], checks: [ChildCheck], digest: Message)] = []
    /// How many answers are kept.
    static let keptMax = 4

    /// Creates an empty memo.
    init() {}

    /// ``ComputedChildChecks/checks(of:)`` of `totals`, from a kept answer when one was computed
    /// from equal totals.
    func checks(of totals: [RecordID: Aggregate]) -> (checks: [ChildCheck], digest: Message) {
        if let i = kept.firstIndex(where: { $0.totals == totals }) {
            let hit = kept.remove(at: i)
            kept.insert(hit, at: 0)
            return (hit.checks, hit.digest)
        }
        let (checks, digest) = computed.checks(of: totals)
        kept.insert((totals, checks, digest), at: 0)
        if kept.count > Self.keptMax { kept.removeLast() }
        return (checks, digest)
    }
}

extension Simulator {
    /// A sync session of `replica` in this run: its checks through the run's ``ChecksMemo``.
    func session(_ role: SyncSession.Role, _ replica: Replica) -> SyncSession {
        let session = SyncSession(role: role, replica: replica, household: household)
        session.childChecks = checksMemo
        return session
    }
}

import KidLedgerDomain
import KidLedgerReplica

/// Computes a session's per-child checks (one per child, sorted by child) and their
/// `checksDigest` message from the replica's totals: injected into ``SyncSession/childChecks``.
/// The product computes them every time (``ComputedChildChecks``); the simulator passes one that
/// remembers recent answers. Every answer must be what ``ComputedChildChecks`` gives.
public protocol ChildChecking {
    /// The checks of `totals` and their `checksDigest` message.
    func checks(of totals: [RecordID: Aggregate]) -> (checks: [ChildCheck], digest: Message)
}

/// Computes the checks every time.
public struct ComputedChildChecks: ChildChecking {
    /// Creates it.
    public init() {}

    public func checks(of totals: [RecordID: Aggregate]) -> (checks: [ChildCheck], digest: Message) {
        let checks = totals.map { ChildCheck(child: $0.key, count: $0.value.count, sumCents: $0.value.sumCents, idHash: $0.value.idHash) }
            .sorted { $0.child < $1.child }
        return (checks, SyncSession.digest(of: checks))
    }
}

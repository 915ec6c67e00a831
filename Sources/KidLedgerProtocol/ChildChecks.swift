import KidLedgerDomain
import KidLedgerReplica

extension SyncSession {
    /// A session's per-child checks of `totals` (one per child, sorted by child) and their
    /// `checksDigest` message.
    static func checks(of totals: [RecordID: Aggregate]) -> (checks: [ChildCheck], digest: Message) {
        let checks = totals.map { ChildCheck(child: $0.key, count: $0.value.count, sumCents: $0.value.sumCents, idHash: $0.value.idHash) }
            .sorted { $0.child < $1.child }
        return (checks, digest(of: checks))
    }
}

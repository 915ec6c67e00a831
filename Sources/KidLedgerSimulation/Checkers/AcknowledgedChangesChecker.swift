import KidLedgerDomain
import KidLedgerReplica

/// No lost acknowledged change: every change a replica committed locally stays in its log, and
/// every transaction acknowledged to a user is held by every replica at the end, but those only
/// a restore from stale files lost (like a laptop restored from an old backup before it synced)
/// and those the revocation rule rejects (``FinalRun/rejected``).
final class AcknowledgedChangesChecker: Checker {
    /// Which replica first acknowledged each transaction, and the transactions in that order.
    private var acknowledged: [RecordID: Int] = [:]
    private var acknowledgedOrder: [RecordID] = []
    /// The acknowledged transactions only a restored replica's lost files held.
    private var mayBeLost = Set<RecordID>()
    /// Every change a replica made locally, in order, with the replica that made it.
    private(set) var madeChanges: [(node: Int, logged: LoggedChange)] = []
    /// Indexes into `madeChanges` of changes only a restored replica's lost files held.
    private var lostChanges = Set<Int>()
    /// Indexes into `madeChanges` of changes a restore of their maker took from its files (other
    /// replicas may still hold them, and give them back).
    private var droppedByRestore = Set<Int>()
    /// The problems found, by content (``HeldTransactions/content``).
    private var problems: [Int: [String]] = [:]

    /// The replica that first acknowledged `transaction`, if one did.
    func maker(of transaction: RecordID) -> Int? { acknowledged[transaction] }

    func committed(_ carrier: Carrier, acknowledging transactions: [RecordID]) {
        for change in carrier.changes { madeChanges.append((carrier.node, change)) }
        for id in transactions where acknowledged[id] == nil {
            acknowledged[id] = carrier.node
            acknowledgedOrder.append(id)
        }
    }

    /// Acknowledged transactions that only the restored replica's current files held (whoever
    /// made them) vanish with them, and so do the local changes only they held.
    func restoring(_ restore: StaleRestore) throws {
        // Held by the current files, not by the stale copy, and by no other replica: each store
        // is asked about all the remaining candidates in one read.
        func notHeld(by replica: Replica, _ ids: [RecordID]) throws -> [RecordID] {
            zip(ids, try replica.containsTransactions(ids)).filter { !$0.1 }.map(\.0)
        }
        let candidates = acknowledgedOrder.filter { !mayBeLost.contains($0) }
        var lost = zip(candidates, try restore.current.containsTransactions(candidates)).filter(\.1).map(\.0)
        lost = try notHeld(by: restore.stale, lost)
        for other in restore.others where !lost.isEmpty { lost = try notHeld(by: other, lost) }
        mayBeLost.formUnion(lost)
        let currentLog = ChangeIndex(try restore.current.encodedChanges(notCoveredBy: [:]))
        let staleLog = ChangeIndex(try restore.stale.encodedChanges(notCoveredBy: [:]))
        let otherLogs = try restore.others.map { ChangeIndex(try $0.encodedChanges(notCoveredBy: [:])) }
        for (i, made) in madeChanges.enumerated() where made.node == restore.node && !staleLog.contains(made.logged) {
            droppedByRestore.insert(i)
        }
        for (i, made) in madeChanges.enumerated() where !lostChanges.contains(i) {
            // Lost by this restore, or earlier (by an earlier restore, while a replica revoked
            // since still held it: refused, it can never bring it back): no replica that is not
            // revoked holds it now (hostile seed 326).
            guard currentLog.contains(made.logged) || made.node == restore.node, !staleLog.contains(made.logged) else { continue }
            if otherLogs.allSatisfy({ !$0.contains(made.logged) }) { lostChanges.insert(i) }
        }
    }

    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        switch stage {
        case .ownChanges: return try ownChanges(run)
        case .replica(let index):
            let held = try run.transactions(of: index)
            let found = problems[held.content] ?? transactionProblems(held, rejected: run.rejected)
            problems[held.content] = found
            return found.map { "\(run.nodes[index].name) \($0)" }
        default: return []
        }
    }

    /// No change a replica made is lost: every one is in its own log (but those only a stale
    /// restore's lost files held), under an origin claimed for its account. Converged replicas
    /// usually hold equal logs: each distinct log is made a set once (``ChangeLogs``).
    ///
    /// A change a restore took from its maker's files, which only replicas revoked since then
    /// hold, is lost too: the maker refuses them, so they can never give it back (hostile seed
    /// 842: the owner restores an old copy, then revokes the only member holding its last change).
    func ownChanges(_ run: FinalRun) throws -> [String] {
        var failures: [String] = []
        let members = try run.members()
        let revoked = Set(members.filter(\.isRevoked).map(\.key))
        let trusted = run.nodes.indices.filter { !revoked.contains(run.nodes[$0].member.publicKey.bytes) }
        for (position, node) in run.nodes.enumerated() {
            let own = run.logs.set(position)
            var origins = Set<ReplicaID>()
            for (i, made) in madeChanges.enumerated() where made.node == node.index && !lostChanges.contains(i) {
                let change = made.logged
                origins.insert(change.origin)
                if !own.contains(change) {
                    if droppedByRestore.contains(i) && trusted.allSatisfy({ !run.logs.set($0).contains(change) }) { continue }
                    failures.append("\(node.name) lost its own change \(String(change.origin.rawValue, radix: 16)):\(change.sequence)")
                    break
                }
            }
            let devices = Set(members.first { $0.key == node.member.publicKey.bytes }?.devices ?? [])
            if !origins.isSubset(of: devices) { failures.append("\(node.name) wrote under an origin not claimed for its account") }
        }
        return failures
    }

    /// The first acknowledged transaction `held` lacks (but those `rejected` or lost with a
    /// restore's files), as a problem to follow the replica's name.
    func transactionProblems(_ held: HeldTransactions, rejected: Set<RecordID>) -> [String] {
        for id in acknowledgedOrder where !mayBeLost.contains(id) && !rejected.contains(id) && held.isUndo[id] == nil {
            return ["lost acknowledged transaction \(id.tail) (made on r\(acknowledged[id]!))"]
        }
        return []
    }
}

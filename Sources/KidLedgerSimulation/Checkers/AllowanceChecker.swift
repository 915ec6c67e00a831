import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica

/// One payment per period (issue 23): on every replica, no two counted allowance payments of one
/// child share a period, every payment an honest member wrote has the id derived from the
/// household, the schedule and the period and is dated at that period's start (00:00 of its date)
/// in one of the zones the household held in the run (issue 41: days are the household zone's,
/// and a zone change never pays a period twice), and a member that stopped a schedule paid no
/// period starting at or after its stop (while that stop is the schedule's last word).
final class AllowanceChecker: Checker {
    /// The stops made in the run: child, the stop's time, the stopping member's key.
    private var stops: [(child: RecordID, at: Int64, by: [UInt8])] = []
    /// The hostile member's key: what it writes is its own business (the honest replicas must
    /// still converge and keep the other rules).
    var hostileKey: [UInt8]?
    /// The zones the household held during the run (its zone at creation, unset meaning UTC, and
    /// every zone a replica set): a payment is dated at its period's start in one of them.
    var zonesUsed: Set<String> = [HouseholdTime.defaultZoneName]

    func stopped(child: RecordID, at millis: Int64, by member: [UInt8]) {
        stops.append((child, millis, member))
    }

    func finalCheck(_ stage: FinalStage, _ run: FinalRun) throws -> [String] {
        guard case .replica(let index) = stage else { return [] }
        let payments = try run.transactions(of: index).all.filter { $0.source == Allowance.source }
        guard !payments.isEmpty else { return [] }
        let replica = run.replicas[index], name = run.nodes[index].name
        var keys: [ReplicaID: [UInt8]] = [:]
        for member in try replica.members() { for device in member.devices { keys[device] = member.key } }
        let authors = try replica.transactionAuthors(payments.map(\.id)).map { $0.flatMap { keys[$0] } }
        // The zones the run set, and the one each replica holds now (its zone at creation when
        // nobody changed it).
        var zones = zonesUsed
        for r in run.replicas { if let zone = try r.householdTimeZone().name { zones.insert(zone) } }
        var problems = Self.problems(zip(payments, authors).filter { hostileKey == nil || $0.1 != hostileKey }.map(\.0),
                                     household: run.household, name: name, zones: zones.sorted().compactMap { SimZones().rules(for: $0) })
        guard !stops.isEmpty else { return problems }
        let schedules = try replica.allowanceSchedules()
        for stop in stops {
            guard schedules.first(where: { $0.childID == stop.child })?.stoppedAtMillis == stop.at else { continue }
            for (t, author) in zip(payments, authors) where t.childID == stop.child && t.createdAtMillis >= stop.at && author == stop.by {
                problems.append("\(name) holds a payment for the period from \(Timestamp.short(millis: t.createdAtMillis)) by the member that stopped the schedule at \(Timestamp.short(millis: stop.at))")
            }
        }
        return problems
    }

    /// What is wrong with the allowance payments `payments` (of replica `name`, source
    /// ``Allowance/source``): one not at its period's derived id or not dated at 00:00 of that
    /// period's date in one of `zones` (UTC when empty), or two for one child and period.
    static func problems(_ payments: [LedgerTransaction], household: RecordID, name: String,
                         zones: [any ZoneRules] = [FixedOffsetZone(millis: 0)]) -> [String] {
        var problems: [String] = []
        var periods: [String: RecordID] = [:]
        let zones: [any ZoneRules] = zones.isEmpty ? [FixedOffsetZone(millis: 0)] : zones
        for t in payments {
            let schedule = Allowance.scheduleID(household: household, child: t.childID)
            // The period whose derived id the payment has, among the dates its time falls on in
            // the run's zones; it must be dated at that date's start in one of them.
            let day = zones.lazy.map { HouseholdTime.day(ofMillis: t.createdAtMillis, in: $0) }
                .first { t.id == Allowance.paymentID(household: household, schedule: schedule, periodDay: $0) }
            guard let day, zones.contains(where: { HouseholdTime.startOfDay(day, in: $0) == t.createdAtMillis }) else {
                problems.append("\(name) holds an allowance payment \(t.id.tail) whose id is not its period's")
                continue
            }
            let key = "\(t.childID) \(day)"
            if let other = periods[key] {
                problems.append("\(name) pays \(t.childID.hexPrefix(8)) twice for the period from \(Timestamp.short(millis: t.createdAtMillis)): \(other.tail) and \(t.id.tail)")
            }
            periods[key] = t.id
        }
        return problems
    }
}

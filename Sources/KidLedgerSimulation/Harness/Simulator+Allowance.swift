import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica

/// Recurring allowance in the simulator (issue 23): schedules are set and stopped as user
/// operations, and every replica pays the periods due through the product's own
/// `Replica.payDueAllowances(now:)`, before each of its user operations (as every ledger command
/// does) and at each of its gossip ticks (as the daemon does).
extension Simulator {
    /// The index of the allowance operation in ``SimulationParameters/operationWeights``.
    static let allowanceOperation = 7

    /// Pays what is due on `node` now (its own clock: virtual time plus its skew), unless it is
    /// down, switched away or knows it is revoked (attentionRequired: the CLI and the daemon
    /// write nothing then). Returns the payments' ids; the caller records the local change.
    func payAllowances(_ node: SimNode) throws -> [RecordID] {
        // Most ticks have nothing due: that read first (the product's own check).
        guard let replica = node.replica, !node.isFrozen, try node.hasDueAllowances(now: time.millis + node.skew),
              try !knowsItIsRevoked(node) else { return [] }
        let paid: [Posting]
        do {
            paid = try replica.payDueAllowances(now: time.millis + node.skew)
        } catch let error as LedgerError {
            log("\(node.name) allowance refused: \(error)")
            return []
        }
        guard !paid.isEmpty else { return [] }
        faults["allowancePayment", default: 0] += paid.count
        log("\(node.name) pays allowance: " + paid.map {
            "\($0.childName) \(Money.format(cents: $0.transaction.amountCents)) for \(Timestamp.short(millis: $0.transaction.createdAtMillis)) \($0.transaction.id.tail)"
        }.joined(separator: ", "))
        return paid.map(\.transaction.id)
    }

    /// ``payAllowances(_:)`` as one recorded step (the daemon's check at a gossip tick).
    func payAllowancesRecorded(_ node: SimNode) throws {
        guard node.replica != nil, !node.isFrozen, try node.hasDueAllowances(now: time.millis + node.skew) else { return }
        let before = try ownSequence(node)
        let paid = try payAllowances(node)
        if !paid.isEmpty { try recordLocalChanges(node, after: before, acknowledging: paid) }
    }

    /// The drawn allowance operation on `child` (`target`: its id as the resolver takes it):
    /// one in four stops its schedule, the others set one (weekly or monthly, on a drawn day or
    /// the default) with an amount drawn like a give's. Returns the trace line.
    func drawnAllowance(_ node: SimNode, _ replica: Replica, target: String, label: String, cents: Int64) throws -> String {
        var zoneLine = ""
        if Int.random(in: 0..<1000, using: &zoneG) < parameters.zoneChangePerMille {
            zoneLine = try changeZone(node, replica, to: SimZones.names[Int.random(in: 0..<SimZones.names.count, using: &zoneG)]) + "; "
            // The household's other register, drawn with it: its convergence is fuzzed as the zone's.
            if Int.random(in: 0..<2, using: &zoneG) == 0 {
                zoneLine += try changeLimit(node, replica, to: Self.drawnLimits[Int.random(in: 0..<Self.drawnLimits.count, using: &zoneG)]) + "; "
            }
        }
        return zoneLine + (try drawnScheduleChange(node, replica, target: target, label: label, cents: cents))
    }

    /// `node` sets the household's time zone to `zone` (refused when it already is: an
    /// unchanged value is not written), recorded as a scenario step. Returns the trace text.
    func changeZone(_ node: SimNode, _ replica: Replica, to zone: String) throws -> String {
        do {
            try replica.setHouseholdTimeZone(zone)
        } catch LedgerError.unchanged {
            return "\(node.name) zone already \(zone)"
        }
        checkers.allowance.zonesUsed.insert(zone)
        record(node.index, .householdTimeZone(zone))
        faults["zoneChange", default: 0] += 1
        return "\(node.name) household zone \(zone)"
    }

    /// The limits a drawn change of the household's limit for asking first picks from (cents; 0:
    /// never ask; the default among them, so a change back to it is drawn too).
    static let drawnLimits: [Int64] = [HouseholdLimit.neverCents, 500, 25_000, HouseholdLimit.defaultCents, 150_000]

    /// `node` sets the household's limit for asking first to `cents` (refused when it already is),
    /// recorded as a scenario step. Returns the trace text.
    func changeLimit(_ node: SimNode, _ replica: Replica, to cents: Int64) throws -> String {
        do {
            try replica.setHouseholdConfirmAbove(cents)
        } catch LedgerError.unchanged {
            return "\(node.name) limit already \(Replica.limitText(cents))"
        }
        record(node.index, .householdLimit(cents))
        faults["limitChange", default: 0] += 1
        return "\(node.name) household limit \(Replica.limitText(cents))"
    }

    /// The allowance schedule part of ``drawnAllowance(_:_:target:label:cents:)``.
    private func drawnScheduleChange(_ node: SimNode, _ replica: Replica, target: String, label: String, cents: Int64) throws -> String {
        if Int.random(in: 0..<4, using: &g) == 0 {
            let s = try replica.stopAllowance(target)
            noteStop(s, by: node)
            record(node.index, .allowanceStop("@" + label))
            return "\(node.name) allowance stop \(s.childID.hexPrefix(8))"
        }
        let every: AllowanceRule.Every = Bool.random(using: &g) ? .week : .month
        let day: Int64? = Bool.random(using: &g) ? nil : Int64.random(in: 1...(every == .week ? 7 : 28), using: &g)
        let s = try replica.setAllowance(target, amountCents: cents, every: every, on: day, note: "a\(events)")
        record(node.index, .allowanceSet(child: "@" + label, cents: cents, every: every, on: day))
        return "\(node.name) allowance set \(s.childID.hexPrefix(8)) \(Money.format(cents: cents)) \(s.rule)"
    }

    /// Remembers that `node` stopped `schedule` (for ``AllowanceChecker``).
    func noteStop(_ schedule: AllowanceSchedule, by node: SimNode) {
        guard let stopped = schedule.stoppedAtMillis else { return }
        checkers.allowance.stopped(child: schedule.childID, at: stopped, by: node.member.publicKey.bytes)
    }

    /// The earliest virtual time at which some running replica has an allowance period to pay
    /// that it has not paid (nil: none): the idle skip does not move gossip ticks past it, so
    /// the daemons pay on time as the ticks played one by one would.
    func nextAllowanceDue() throws -> Int64? {
        var earliest: Int64?
        for node in nodes where node.isUp && !node.isFrozen {
            guard let replica = node.replica, try !knowsItIsRevoked(node) else { continue }
            for s in try replica.allowanceSchedules() {
                guard let next = s.nextPaymentMillis else { continue }
                let at = next - node.skew
                earliest = min(earliest ?? at, at)
            }
        }
        return earliest
    }
}

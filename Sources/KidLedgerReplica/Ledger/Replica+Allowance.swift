import KidLedgerDomain

/// A child's allowance registers as stored (any of them may be missing).
struct AllowanceRegisters: Equatable, Sendable {
    var amountCents: Int64?
    var rule: AllowanceRule?
    var note = ""
    var stoppedAtMillis: Int64 = 0

    /// Takes the value of allowance register `field` (a raw field number).
    mutating func apply(_ field: UInt8, _ value: FieldValue) {
        switch (Field(rawValue: field), value) {
        case (.allowanceAmount?, .integer(let cents)): amountCents = cents
        case (.allowanceRule?, .integer(let packed)): rule = AllowanceRule(packed: packed)
        case (.allowanceNote?, .text(let text)): note = text
        case (.allowanceStoppedAt?, .integer(let millis)): stoppedAtMillis = millis
        default: break
        }
    }
}

/// A child's recurring allowance (docs/CRDT.md, "Allowance schedules").
public struct AllowanceSchedule: Equatable, Sendable {
    /// The schedule's id, derived from the household and the child (``Allowance/scheduleID(household:child:)``).
    public var id: RecordID
    /// The child paid.
    public var childID: RecordID
    /// The child's current name.
    public var childName: String
    /// Whether the child is archived (then it is not paid).
    public var childArchived: Bool
    /// Cents paid each period.
    public var amountCents: Int64
    /// When it pays.
    public var rule: AllowanceRule
    /// The note of each payment.
    public var note: String
    /// When it stopped (Unix ms), or nil while it runs.
    public var stoppedAtMillis: Int64?
    /// The start (Unix ms) of the next period this replica has not paid and will pay, or nil
    /// (stopped, or the child archived).
    public var nextPaymentMillis: Int64?
    /// The start (Unix ms) of the rule's first day in the household's zone (nil from
    /// ``Replica/registeredSchedule(of:household:)``, which reads no zone).
    public var startMillis: Int64?

    /// Whether it pays (not stopped, child active).
    public var isActive: Bool { stoppedAtMillis == nil && !childArchived }
}

extension Replica {
    /// Every child's schedule (stopped ones too), in the children's list order.
    public func allowanceSchedules() throws -> [AllowanceSchedule] {
        try allowanceSchedules { _ in true }
    }

    /// The schedules of the children `include` selects (by id), in the children's list order.
    private func allowanceSchedules(_ include: (RecordID) -> Bool) throws -> [AllowanceSchedule] {
        let now = clock.nowMillis()
        return try store.read { r in
            let household = try Self.requireHousehold(r).id
            let zone = try Self.zone(r, zones)
            return try Self.children(r, includeArchived: true).compactMap {
                include($0.id) ? try Self.schedule(of: $0, household: household, zone: zone, now: now, r) : nil
            }
        }
    }

    /// The schedule of `child`, or nil when its registers do not make one (no amount or rule).
    static func schedule(of child: ChildSummary, household: RecordID, zone: any ZoneRules, now: Int64,
                         _ r: any KeyValueReader) throws -> AllowanceSchedule? {
        guard var schedule = registeredSchedule(of: child, household: household) else { return nil }
        let rule = schedule.rule
        schedule.startMillis = HouseholdTime.startOfDay(rule.startDay, in: zone)
        if schedule.isActive {
            // The oldest period not paid here among the due ones, else the first one after now.
            let today = HouseholdTime.day(ofMillis: now, in: zone)
            var next = rule.periodStart(onOrAfter: max(rule.startDay, today))
            if let unpaid = try unpaidPeriods(of: schedule, household: household, zone: zone, now: now, r).first {
                next = unpaid
            } else if next <= today {
                next = rule.next(after: next)  // today's period, paid
            }
            schedule.nextPaymentMillis = HouseholdTime.startOfDay(next, in: zone)
        }
        return schedule
    }

    /// ``schedule(of:household:zone:now:_:)`` without its next payment (nil): what the child's
    /// registers say, no read of the store.
    static func registeredSchedule(of child: ChildSummary, household: RecordID) -> AllowanceSchedule? {
        guard let amount = child.allowance.amountCents, let rule = child.allowance.rule else { return nil }
        let stopped = child.allowance.stoppedAtMillis == 0 ? nil : child.allowance.stoppedAtMillis
        return AllowanceSchedule(id: Allowance.scheduleID(household: household, child: child.id), childID: child.id,
                                 childName: child.name, childArchived: child.isArchived, amountCents: amount, rule: rule,
                                 note: child.allowance.note, stoppedAtMillis: stopped, nextPaymentMillis: nil)
    }

    /// Sets `query`'s allowance to `amountCents` each period of `every` on `day` (a weekday 1...7
    /// or a day of the month 1...28; nil: the day a running schedule of that kind has, else the
    /// weekday or the day of the month of today in the household's zone, and the 1st on the 29th to 31st), with `note` (nil: keep the note it has). A new rule, a
    /// changed kind or day, or a stopped schedule starts today (the household zone's day): its first period is the
    /// first period start on or after today. The amount alone changes the amount of the periods
    /// paid from now on. It pays nothing itself: its callers pay what is due next
    /// (``payDueAllowances(now:)``), as before and after every ledger command.
    @discardableResult
    public func setAllowance(_ query: String, amountCents: Int64, every: AllowanceRule.Every, on day: Int64?,
                             note: String?) throws -> AllowanceSchedule {
        precondition(amountCents > 0, "amounts are validated by Money.parseAmount")
        if let note, note.utf8.count > Limits.allowanceNoteBytesMax {
            throw LedgerError.badName("an allowance note is longer than \(Limits.allowanceNoteBytesMax) bytes")
        }
        let (_, childID) = try commitLocal { w, hlc in
            _ = try Self.requireHousehold(w)
            let child = try Self.resolveChild(query, w)
            if child.isArchived { throw LedgerError.archived(child.name) }
            let today = HouseholdTime.day(ofMillis: hlc.millis, in: try Self.zone(w, zones))
            let date = Timestamp.civilDate(day: today)
            let current = child.allowance
            let running = current.amountCents != nil && current.rule != nil && current.stoppedAtMillis == 0
            // Without a day, a running schedule of the same kind keeps its own.
            let kept = running && current.rule?.every == every ? current.rule?.day : nil
            let wanted = day ?? kept ?? (every == .week ? Allowance.weekday(ofDay: today) : (date.day <= 28 ? date.day : 1))
            guard let fresh = AllowanceRule(every: every, day: wanted, startDay: today) else {
                throw LedgerError.badName(every == .week ? "--on takes a weekday (monday ... sunday)"
                                                         : "--on takes a day of the month from 1 to 28")
            }
            var ops: [Operation] = []
            func write(_ field: Field, _ value: FieldValue) throws {
                ops.append(.setField(entity: child.id, field: field, value: value, base: try Self.registerStamp(child.id, field, w)))
            }
            if !running || current.rule?.every != every || current.rule?.day != wanted { try write(.allowanceRule, .integer(fresh.packed)) }
            if current.amountCents != amountCents { try write(.allowanceAmount, .integer(amountCents)) }
            if let note, note != current.note { try write(.allowanceNote, .text(note)) }
            if current.stoppedAtMillis != 0 { try write(.allowanceStoppedAt, .integer(0)) }
            if ops.isEmpty {
                throw LedgerError.unchanged("\(child.name)'s allowance is already \(Money.format(cents: amountCents)) \(fresh.description)")
            }
            return (ops, child.id)
        }
        return try requireSchedule(of: childID)
    }

    /// Stops the allowance of the child `query` names (or whose schedule id starts with `query`):
    /// periods starting from now on are not paid. A stopped schedule starts again with
    /// ``setAllowance(_:amountCents:every:on:note:)``.
    @discardableResult
    public func stopAllowance(_ query: String) throws -> AllowanceSchedule {
        let (_, childID) = try commitLocal { w, hlc in
            let household = try Self.requireHousehold(w).id
            let child = try Self.resolveScheduleChild(query, household: household, w)
            guard child.allowance.amountCents != nil, child.allowance.rule != nil else {
                throw LedgerError.unchanged("\(child.name) has no allowance (set one with `kidledger allowance set`)")
            }
            if child.allowance.stoppedAtMillis != 0 { throw LedgerError.unchanged("\(child.name)'s allowance is already stopped") }
            return ([.setField(entity: child.id, field: .allowanceStoppedAt, value: .integer(hlc.millis),
                               base: try Self.registerStamp(child.id, .allowanceStoppedAt, w))], child.id)
        }
        return try requireSchedule(of: childID)
    }

    /// The child a stop names: by name or id prefix, else the child whose schedule id starts
    /// with `query` (at least 4 hex digits).
    static func resolveScheduleChild(_ query: String, household: RecordID, _ r: any KeyValueReader) throws -> ChildSummary {
        do {
            return try resolveChild(query, r)
        } catch LedgerError.unknownChild(let q, let near) {
            let digits = Text.trimmed(query).lowercased().filter { $0 != "-" }
            guard digits.count >= 4 else { throw LedgerError.unknownChild(q, nearest: near) }
            let stored = try childRowsAndKeys(r)
            let matches = stored.rows.indices.filter { stored.roots[$0] == $0 }.map { stored.rows[$0] }.filter {
                $0.allowance.rule != nil && Allowance.scheduleID(household: household, child: $0.id).hex.hasPrefix(digits)
            }
            guard matches.count == 1 else { throw LedgerError.unknownChild(q, nearest: near) }
            return matches[0]
        }
    }

    private func requireSchedule(of child: RecordID) throws -> AllowanceSchedule {
        try Self.applied(allowanceSchedules({ $0 == child }).first)
    }

    /// Pays every due period of every active schedule that this replica has not paid, as one
    /// local change (at most ``Limits/allowancePaymentsPerCallMax`` payments, oldest periods
    /// first; the next call pays the rest). A period is due when its start (00:00 of its day in
    /// the household's zone, ``householdTimeZone()``) is at or before `now` and before the
    /// schedule's stop; an archived child is not paid.
    /// Each payment's id is derived from the household, the schedule and the period and its
    /// payload from the schedule as this replica knows it (child, amount, note, the period's
    /// start in the household's zone, source "allowance"), so replicas paying one period write one
    /// transaction. A period whose payment would take the balance out of Int64 is left unpaid.
    /// Returns the payments (none: nothing was written).
    @discardableResult
    public func payDueAllowances(now: Int64) throws -> [Posting] {
        // Most calls find nothing due: decide that in a read transaction, without the writer's lock.
        guard try hasDueAllowances(now: now) else { return [] }
        let (_, postings) = try commitLocalBatch { w, _ in
            let postings = try Self.duePayments(now: now, w, zones: zones)
            return ([postings.map { .addTransaction($0.transaction) }], postings)
        }
        return postings
    }

    /// Whether ``payDueAllowances(now:)`` would pay anything (a read transaction only: the
    /// daemon asks at every tick, and a read command before it opens a change to pay).
    public func hasDueAllowances(now: Int64) throws -> Bool {
        try store.read { r in try !Self.duePayments(now: now, r, zones: zones, limit: 1).isEmpty }
    }

    /// The payments ``payDueAllowances(now:)`` would make (at most `limit`), with each child's
    /// balance after them.
    static func duePayments(now: Int64, _ r: any KeyValueReader, zones: any ZoneDatabase,
                            limit: Int = Limits.allowancePaymentsPerCallMax) throws -> [Posting] {
        // The household's id only (``household(_:_:)`` without its record's decoding and name:
        // the daemon asks at every tick).
        guard let household = try pinnedHouseholdRecord(r)?.pin.id else { return [] }
        var postings: [Posting] = []
        // The rows without totals: most children have no schedule, and only those with an unpaid
        // period read their totals.
        // A child merged into another is paid no more (its effective child's own schedule pays),
        // and a payment's range check is on the effective child's balance (docs/CRDT.md, "Child merges").
        let stored = try childRowsAndKeys(r)
        let zone = try zone(r, zones)
        for (i, child) in stored.rows.enumerated() where child.allowance.rule != nil && child.allowance.amountCents != nil && !child.isArchived {
            guard postings.count < limit, !stored.hasMerges || stored.roots[i] == i,
                  let schedule = registeredSchedule(of: child, household: household), schedule.isActive else { continue }
            let unpaid = try unpaidPeriods(of: schedule, household: household, zone: zone, now: now, r)
            guard !unpaid.isEmpty else { continue }
            var balance = try mergedTotals(i, stored, r).sumCents
            for period in unpaid where postings.count < limit {
                let next = balance + Int128(schedule.amountCents)
                guard next <= Int128(Int64.max) else { break }
                balance = next
                let t = LedgerTransaction(id: Allowance.paymentID(household: household, schedule: schedule.id, periodDay: period),
                                          childID: child.id, amountCents: schedule.amountCents,
                                          createdAtMillis: HouseholdTime.startOfDay(period, in: zone), note: schedule.note, source: Allowance.source)
                postings.append(Posting(transaction: t, childName: child.name, balanceCents: balance))
            }
        }
        // Oldest period first, then by child: the order they are shown in.
        return postings.sorted {
            ($0.transaction.createdAtMillis, $0.childName, $0.transaction.childID) < ($1.transaction.createdAtMillis, $1.childName, $1.transaction.childID)
        }
    }

    /// The due periods (start days, oldest first) of `schedule` after the newest one this replica
    /// holds a payment of (any version of its derived id): it looks back from the newest due
    /// period, so a call costs what is unpaid, not the schedule's age.
    static func unpaidPeriods(of schedule: AllowanceSchedule, household: RecordID, zone: any ZoneRules, now: Int64,
                              _ r: any KeyValueReader) throws -> [Int64] {
        let rule = schedule.rule
        var due: [Int64] = []
        var period = rule.firstPeriod
        // A period is due once the zone's day has reached it, and paid when it started before the
        // stop: its start is before `stop` exactly when the day of `stop - 1` has reached it.
        let today = HouseholdTime.day(ofMillis: now, in: zone)
        let lastDay = schedule.stoppedAtMillis.map { HouseholdTime.day(ofMillis: $0 - 1, in: zone) } ?? Int64.max
        // Periods are computed forward (arithmetic only), then looked up backward.
        while period <= min(today, lastDay) {
            due.append(period)
            period = rule.next(after: period)
        }
        var first = due.count
        while first > 0 {
            let id = Allowance.paymentID(household: household, schedule: schedule.id, periodDay: due[first - 1])
            if try r.get(Tables.transactions, Keys.id(id)) != nil { break }
            first -= 1
        }
        return Array(due[first...])
    }
}

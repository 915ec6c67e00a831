import KidLedgerDomain
import KidLedgerReplica

/// `allowance set|list|stop`: recurring allowance (docs/CRDT.md, "Allowance schedules").
enum AllowanceCommands {
    static let all: [CLI.Command] = [set, list, stop]

    static let set = CLI.Command(spec: CommandSpec(
        name: "allowance set", synopsis: "CHILD AMOUNT --every PERIOD",
        summary: "pay a child AMOUNT every week or month",
        details: """
        Full form: kidledger allowance set CHILD AMOUNT --every week|month [--on DAY] [--note T]
        Pays CHILD AMOUNT at the start (00:00 in the household's time zone: `kidledger household timezone`) of every period, once per period whichever laptop pays it
        (the daemon, or any ledger command run after the period started): a period's payment has an id
        derived from the household, the schedule and the period, so two laptops write one transaction.
        Periods missed while every laptop was off are paid, once each, when one wakes. A child has one
        schedule: set again to change its amount, period, day or note (a new period or day starts today).
        The first period is the first period start on or after today (the household's day); today's is paid at once.
        An archived child is not paid (archiving stops its allowance). AMOUNT as for give ('$5', 5, quarter).
          --every week|month   the period
          --on DAY             weekly: monday ... sunday (default: today's weekday in the household's zone);
                               monthly: 1 ... 28 (default: today's day, or the 1st from the 29th on;
                               29 to 31 are refused: not every month has them, so use 28 or 1)
          --note T             the note of each payment (at most 200 bytes; default: kept, else none)
        """,
        valueOptions: ["every", "on", "note"], arguments: 2...2)) { ctx, args in
        let cents = try Money.parseAmount(args.positionals[1])
        guard let everyText = args.values["every"] else {
            throw CLIError.usage("`allowance set` needs --every week or --every month", then: "usage: kidledger allowance set CHILD AMOUNT --every week|month [--on DAY] [--note T]")
        }
        let every = try parseEvery(everyText)
        let day = try args.values["on"].map { try parseOn($0, every: every) }
        // The new schedule's period of today is paid at once, in the same change.
        let (schedule, paid, now) = try ctx.change { replica in
            let schedule = try replica.setAllowance(args.positionals[0], amountCents: cents, every: every, on: day, note: args.values["note"])
            let paid = try replica.payDueAllowances(now: ctx.clock.nowMillis())
            return (schedule, paid, try replica.allowanceSchedules().first { $0.childID == schedule.childID } ?? schedule)
        }
        ctx.say("\(TextEscaping.terminal(schedule.childName))'s allowance: \(Money.format(cents: schedule.amountCents)) \(schedule.rule)\(noteText(schedule)).")
        ctx.sayPaid(paid)
        if let next = now.nextPaymentMillis { ctx.say("Next payment: \(ctx.time.stamped(next)).") }
        ctx.emit(.object([("schedule", json(now)), ("payments", .array(paid.map(Render.posting)))]))
    }

    static let list = CLI.Command(spec: CommandSpec(
        name: "allowance list", synopsis: "", summary: "list allowance schedules",
        details: "Every child's schedule, stopped ones too, with its next payment date (the household's time zone; --utc for UTC).")) { ctx, _ in
        let replica = try ctx.openLedger()
        _ = try LedgerCommands.requireHousehold(replica)
        let schedules = try replica.allowanceSchedules()
        ctx.emit(.object([("schedules", .array(schedules.map(json)))]))
        if schedules.isEmpty { ctx.say("No allowance yet: `kidledger allowance set CHILD AMOUNT --every week`."); return }
        let time = ctx.time
        let zone = time.label(for: schedules.compactMap(\.nextPaymentMillis))
        ctx.say(Render.table(header: ["CHILD", "AMOUNT", "EVERY", "ON", "NEXT (\(zone))", "NOTE", "ID"], rightAligned: [1], rows: schedules.map { s in
            [s.childName, Money.format(cents: s.amountCents), s.rule.every.name, s.rule.onText,
             s.nextPaymentMillis.map(time.short) ?? (s.childArchived ? "(archived)" : "(stopped)"), s.note, Render.shortID(s.id)]
        }, truncated: [0: Render.nameWidthMax, 5: Render.nameWidthMax]))
    }

    static let stop = CLI.Command(spec: CommandSpec(
        name: "allowance stop", synopsis: "CHILD|SCHEDULE-ID", summary: "stop a child's allowance",
        details: "Periods starting from now on are not paid; what was paid stays. `allowance set` starts it again (from today).",
        arguments: 1...1)) { ctx, args in
        let schedule = try ctx.change { try $0.stopAllowance(args.positionals[0]) }
        ctx.say("Stopped \(TextEscaping.terminal(schedule.childName))'s allowance (\(Money.format(cents: schedule.amountCents)) \(schedule.rule)).")
        ctx.emit(.object([("schedule", json(schedule))]))
    }

    static func parseEvery(_ text: String) throws -> AllowanceRule.Every {
        switch text.lowercased() {
        case "week", "weekly": return .week
        case "month", "monthly": return .month
        default:
            let near = Suggestions.didYouMean(text, in: ["week", "month"], quoted: true)
            throw CLIError.usage("--every takes week or month, got \"\(text)\"\(near)")
        }
    }

    static func parseOn(_ text: String, every: AllowanceRule.Every) throws -> Int64 {
        let word = text.lowercased()
        switch every {
        case .week:
            if let i = Allowance.weekdayNames.firstIndex(where: { $0 == word || $0.prefix(3) == word }) { return Int64(i) + 1 }
            let near = Suggestions.didYouMean(word, in: Allowance.weekdayNames, quoted: true)
            throw CLIError.usage("--on takes a weekday for a weekly allowance (monday ... sunday), got \"\(text)\"\(near)")
        case .month:
            guard let day = Int64(word), (1...31).contains(day) else {
                throw CLIError.usage("--on takes a day of the month from 1 to 28 for a monthly allowance, got \"\(text)\"")
            }
            guard day <= 28 else {
                throw CLIError.usage("--on \(day): not every month has a day \(day); use 28 (or 1, the first of the next month)")
            }
            return day
        }
    }

    static func noteText(_ s: AllowanceSchedule) -> String {
        s.note.isEmpty ? "" : " (note \"\(TextEscaping.terminal(s.note))\")"
    }

    static func json(_ s: AllowanceSchedule) -> JSON {
        .object([("id", .string(s.id.description)), ("childId", .string(s.childID.description)), ("childName", .string(s.childName)),
                 ("amountCents", .int(s.amountCents)), ("every", .string(s.rule.every.name)), ("on", .string(s.rule.onText)),
                 ("note", .string(s.note)), ("startsAtMillis", .int(s.startMillis ?? s.rule.startDay * Allowance.millisPerDay)),
                 ("active", .bool(s.isActive)), ("childArchived", .bool(s.childArchived)),
                 ("stoppedAtMillis", s.stoppedAtMillis.map { .int($0) } ?? .null),
                 ("nextPaymentAtMillis", s.nextPaymentMillis.map { .int($0) } ?? .null)])
    }
}

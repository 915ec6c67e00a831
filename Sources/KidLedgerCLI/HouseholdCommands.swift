import KidLedgerDomain
import KidLedgerReplica

/// `household timezone`: the household's time zone, whose days are the allowance days.
enum HouseholdCommands {
    static let all: [CLI.Command] = [timezone]

    static let timezone = CLI.Command(spec: CommandSpec(
        name: "household timezone", synopsis: "[ZONE]", summary: "show or set the household's time zone",
        details: """
        The household's time zone (a tz database name such as America/Los_Angeles or Europe/Paris) is
        replicated to every laptop: allowance periods start at midnight in it, a "friday" allowance is
        paid on the household's Friday whatever each laptop's own zone, and text output shows times in
        it (`--utc` shows UTC). `init` sets it from the creating laptop's zone (TZ, else /etc/localtime);
        a household made before it existed uses UTC until it is set. Changing it keeps every payment
        made; periods not yet paid follow the new zone's days: a date already paid is never paid again.
        """, arguments: 0...1)) { ctx, args in
        if let zone = args.positionals.first {
            let replica = try ctx.openLedger(forChanges: true)
            let before = try replica.householdTimeZone().effective
            let setting = try replica.setHouseholdTimeZone(Text.trimmed(zone))
            ctx.householdZone.withLock { $0 = setting }
            ctx.say("The household's time zone is now \(setting.effective) (it was \(before)); allowance days are its days on every laptop.")
            ctx.emit(json(setting, now: ctx.clock.nowMillis()))
            return
        }
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        let setting = try replica.householdTimeZone()
        ctx.emit(json(setting, now: ctx.clock.nowMillis()))
        switch (setting.name, setting.known) {
        case (nil, _):
            ctx.say("UTC (the household has no time zone set yet: `kidledger household timezone ZONE` sets one)")
        case (let name?, false):
            ctx.say("\(TextEscaping.terminal(name)), which this laptop's time zone database does not know: it uses UTC days until it does (install or update the tzdata package)")
        case (let name?, true):
            ctx.say("\(TextEscaping.terminal(name)) (now \(ctx.time.stamped(ctx.clock.nowMillis())))")
        }
    }

    /// `{"timeZone": …, "effective": …, "known": …, "offsetMillis": …}`: the register's value
    /// (null when unset), the zone days are computed in, whether this laptop knows the value, and
    /// the effective zone's offset from UTC now.
    static func json(_ setting: Replica.TimeZoneSetting, now: Int64) -> JSON {
        let offset = FoundationZones().rules(for: setting.effective)?.offsetMillis(at: now) ?? 0
        return .object([("timeZone", setting.name.map(JSON.string) ?? .null), ("effective", .string(setting.effective)),
                        ("known", .bool(setting.known)), ("offsetMillis", .int(offset))])
    }
}

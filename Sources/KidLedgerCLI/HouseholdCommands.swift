import KidLedgerDomain
import KidLedgerReplica
import KidLedgerDaemon

/// `household timezone`: the household's time zone, whose days are the allowance days.
/// `household limit`: the household's limit for asking first, on every laptop's page.
enum HouseholdCommands {
    static let all: [CLI.Command] = [timezone, limit]

    /// The word `household limit` takes for "never ask" (the register's 0).
    static let neverWord = "never"

    static let limit = CLI.Command(spec: CommandSpec(
        name: "household limit", synopsis: "[AMOUNT|never]", summary: "show or set the amount above which the page asks first",
        details: """
        The household's limit for asking first is replicated to every laptop: the page asks "Give $1500.00
        to Ava? That is more than $1000.00, the household's limit for asking first." before a give or take
        above it, on every member's laptop. AMOUNT as for give (1500, $250.50); `never`: the page never
        asks. Unset, it is $1000.00. Any member may change it; the last change wins, as for the time
        zone. The CLI never asks. `--json`: `confirmAboveCents` (0: never ask).
        """, arguments: 0...1)) { ctx, args in
        if let word = args.positionals.first {
            try setLimit(ctx, word)
            return
        }
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        let cents = try replica.householdConfirmAbove()
        ctx.emit(.object([("confirmAboveCents", .int(cents))]))
        ctx.say(limitSentence(cents))
    }

    /// Sets the household's limit from `word` (an amount, or ``neverWord``) and says so: `household
    /// limit AMOUNT` and the deprecated `quick limit AMOUNT`.
    static func setLimit(_ ctx: Context, _ word: String) throws {
        let cents = try parseLimit(word)
        let now = try ctx.change { try $0.setHouseholdConfirmAbove(cents) }
        ctx.say(limitSentence(now) + " on every laptop.")
        ctx.emit(.object([("confirmAboveCents", .int(now))]))
    }

    /// The limit `word` names, in cents: ``neverWord`` is 0 (never ask), otherwise an amount as for give.
    static func parseLimit(_ word: String) throws -> Int64 {
        if Text.trimmed(word).lowercased() == neverWord { return HouseholdLimit.neverCents }
        do {
            return try Money.parseAmount(word)
        } catch .zero {
            throw CLIError("the limit must be more than $0.00: type \"never\" for a page that never asks", code: .dataError)
        }
    }

    /// "The page asks before a give or take above $1000.00", or that it never asks.
    static func limitSentence(_ cents: Int64) -> String {
        cents == HouseholdLimit.neverCents ? "The page never asks before a give or take (the household's limit is \"never\")"
            : "The page asks before a give or take above \(Money.format(cents: cents))"
    }

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
            let (before, setting) = try ctx.change { replica in
                (try replica.householdTimeZone().effective, try replica.setHouseholdTimeZone(Text.trimmed(zone)))
            }
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

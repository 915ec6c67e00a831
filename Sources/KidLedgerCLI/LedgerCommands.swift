import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity

/// The household, children and money commands.
enum LedgerCommands {
    static let all: [CLI.Command] = [initCommand, childAdd, childRename, childArchive, childRestore, childMerge, childUnmerge, childrenList,
                                     give, take, giveAll, takeAll, balance, history, undo]

    static let initCommand = CLI.Command(spec: CommandSpec(
        name: "init", synopsis: "NAME [--account NAME] [--name DISPLAY]", summary: "create a household that this device owns",
        details: "Creates the ledger home (if missing), this device's identity for the account (an Ed25519 key in\nHOME/identities, mode 0600) if it has none, and a household named NAME owned by it.\nIt prints the household's recovery secret once (`recoverySecret` in --json): write it on paper; with it\n`kidledger recover` makes another laptop the owner if this one is lost or stolen. It is not stored.\nA home holds one household; running init again is refused. The household's time zone (its allowance\ndays) starts as this laptop's (TZ, else /etc/localtime; see `kidledger household timezone`).\n  --account NAME   sign in as NAME first (default: the current account, else \"default\")\n  --name DISPLAY   the name the household knows you by (default: the account's name, or the login\n                   name for the \"default\" account; change it with `kidledger account rename`)",
        valueOptions: ["account", "name"], arguments: 1...1)) { ctx, args in
        if let account = args.values["account"] {
            do { try KeyStore.validate(account: account) } catch { throw CLIError.usage("\(error)") }
            try ctx.setAccount(account)
        }
        let displayName = try ctx.displayName(args)
        let replica = try ctx.openReplica(creating: true)
        if let existing = try replica.household() { throw LedgerError.householdExists(name: existing.name) }
        guard let me = try ctx.identity(creating: true) else { throw CLIError("no identity", code: .software) }
        ctx.configure(replica, identity: me)
        let recovery = RecoveryCommands.newRecoveryKey()
        let zone = LocalTime.householdZoneName(environment: ctx.environment)
        let h = try replica.createHousehold(name: args.positionals[0], owner: me.publicKey.bytes,
                                            salt: Sodium.randomBytes(16), recovery: recovery.publicKey, timeZone: zone, sign: me.sign)
        try replica.setMemberName(displayName, of: me.publicKey.bytes)
        try replica.device.setSetting("memberKey", me.publicKey.hex)
        try replica.device.setSetting("memberAccount", ctx.accountName)
        ctx.say("Created household \"\(TextEscaping.terminal(h.name))\" in \(ctx.home).")
        ctx.say(RecoveryCommands.paperNotice(recovery.text))
        guard case .object(var fields) = Render.household(h) else { preconditionFailure("a household renders as an object") }
        fields.append(("recoverySecret", .string(recovery.text)))
        fields.append(("timeZone", zone.map(JSON.string) ?? .null))
        ctx.emit(.object(fields))
    }

    static let childAdd = CLI.Command(spec: CommandSpec(
        name: "child add", synopsis: "NAME", summary: "add a child", details: "", arguments: 1...1)) { ctx, args in
        let c = try ctx.change { try $0.addChild(name: args.positionals[0]) }
        ctx.say("Added \(TextEscaping.terminal(c.name)) (id \(Render.shortID(c.id))).")
        ctx.emit(Render.child(c))
    }

    static let childRename = CLI.Command(spec: CommandSpec(
        name: "child rename", synopsis: "CHILD NAME", summary: "rename a child", details: "", arguments: 2...2)) { ctx, args in
        let (old, c) = try ctx.change { replica in
            (try replica.resolveChild(args.positionals[0]).name, try replica.renameChild(args.positionals[0], to: args.positionals[1]))
        }
        ctx.say("Renamed \(TextEscaping.terminal(old)) to \(TextEscaping.terminal(c.name)).")
        ctx.emit(Render.child(c))
    }

    static let childArchive = CLI.Command(spec: CommandSpec(
        name: "child archive", synopsis: "CHILD", summary: "archive a child (history is kept)",
        details: "An archived child is hidden from lists and give-all, and keeps every transaction.", arguments: 1...1)) { ctx, args in
        let c = try ctx.change { try $0.setArchived(args.positionals[0], true) }
        ctx.say("Archived \(TextEscaping.terminal(c.name)); history is kept (`kidledger child restore \(TextEscaping.terminal(c.name))` brings it back).")
        ctx.emit(Render.child(c))
    }

    static let childRestore = CLI.Command(spec: CommandSpec(
        name: "child restore", synopsis: "CHILD", summary: "restore an archived child",
        details: "Refused when an active child now has its name (up to case and accents): rename one of them first.", arguments: 1...1)) { ctx, args in
        let c = try ctx.change { try $0.setArchived(args.positionals[0], false) }
        ctx.say("Restored \(TextEscaping.terminal(c.name)).")
        ctx.emit(Render.child(c))
    }

    static let childMerge = CLI.Command(spec: CommandSpec(
        name: "child merge", synopsis: "FROM INTO", summary: "make two children one (one child added on two laptops)",
        details: """
        FROM is INTO from now on, on every laptop (the merge syncs like any change): FROM's transactions
        count in INTO's balance and history, and no transaction is changed or lost. FROM is no longer
        listed (`children --all` shows it as merged); its name and its id prefix stand for INTO, and its
        allowance stops. Two children with one name (added on two laptops apart; `children` flags them) are
        named by their id prefixes (`kidledger children` shows them). Merges made on two laptops at once end the same
        way on every laptop: one child merged into two others follows the later merge; Max into max on one
        and max into Max on the other keep the child whose id comes first in hex order
        (`children` shows the ids). `kidledger child unmerge FROM` undoes a merge.
        """, arguments: 2...2)) { ctx, args in
        let result = try ctx.change { try $0.mergeChild(args.positionals[0], into: args.positionals[1]) }
        let from = result.from, into = result.into
        ctx.say("Merged \(TextEscaping.terminal(from.name)) (\(Render.shortID(from.id))) into \(TextEscaping.terminal(into.name)) (\(Render.shortID(into.id))). Balance: \(Money.format(cents: into.balanceCents))")
        if let s = result.stoppedAllowance {
            ctx.say("\(TextEscaping.terminal(from.name))'s allowance (\(Money.format(cents: s.amountCents)) \(s.rule)) no longer pays; `kidledger allowance set` gives \(TextEscaping.terminal(into.name)) one.")
        }
        ctx.emit(.object([("from", Render.child(from)), ("into", Render.child(into)),
                          ("stoppedAllowance", result.stoppedAllowance.map(AllowanceCommands.json) ?? .null)]))
    }

    static let childUnmerge = CLI.Command(spec: CommandSpec(
        name: "child unmerge", synopsis: "CHILD", summary: "undo a child merge: CHILD counts on its own again",
        details: """
        CHILD is a child merged into another (`children --all` lists them as "merged into NAME"), named by its
        name or id prefix. It is listed again with its own transactions (and those of any child merged into
        it); the child it was merged into keeps its own. Like the merge, it syncs as one change.
        """, arguments: 1...1)) { ctx, args in
        let (child, was) = try ctx.change { try $0.unmergeChild(args.positionals[0]) }
        ctx.say("\(TextEscaping.terminal(child.name)) (\(Render.shortID(child.id))) counts on its own again. Balance: \(Money.format(cents: child.balanceCents)); \(TextEscaping.terminal(was.name)): \(Money.format(cents: was.balanceCents))")
        ctx.emit(.object([("child", Render.child(child)), ("was", Render.child(was))]))
    }

    static let childrenList = CLI.Command(spec: CommandSpec(
        name: "children", synopsis: "[--all]", summary: "list children with balances",
        details: """
          --all   include archived children, and children merged into another (`child merge`)
        Active children whose names are equal up to case and accents (added on two laptops apart) get a note
        line after the table (`sameNames` in --json: each group an array of child ids); `child merge` makes
        two such children one. A child's balance includes the children merged into it; with --all a merged
        child is listed as "merged into NAME" (in --json: `mergedInto`, the id, and its own balanceCents).
        """, flagOptions: ["all"])) { ctx, args in
        let replica = try ctx.openLedger()
        _ = try requireHousehold(replica)
        let all = args.has("all")
        let list = try replica.children(includeArchived: all, includeMerged: all)
        let sameNames = Replica.sameNameGroups(list.filter { $0.mergedInto == nil })
        ctx.emit(.object([("children", .array(list.map(Render.child))), ("sameNames", Render.sameNames(sameNames))]))
        if list.isEmpty { ctx.say("No children yet: `kidledger child add NAME`."); return }
        let names = Dictionary(list.map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })
        ctx.say(Render.table(header: ["NAME", "BALANCE", "ID", ""], rightAligned: [1], rows: list.map {
            if let into = $0.mergedInto { return [$0.name, "", Render.shortID($0.id), "merged into \(names[into] ?? Render.shortID(into))"] }
            return [$0.name, Money.format(cents: $0.balanceCents), Render.shortID($0.id), $0.isArchived ? "archived" : ""]
        }, truncated: [0: Render.nameWidthMax]))
        for group in sameNames { ctx.say(Render.sameNameLine(group)) }
    }

    static func amountCommand(_ name: String, sign: Int64, summary: String, verb: String, preposition: String) -> CLI.Command {
        CLI.Command(spec: CommandSpec(
            name: name, synopsis: "CHILD AMOUNT [--note T]", summary: summary,
            details: """
            AMOUNT is positive: dollars ('$1.25', '$0.10', 5) or a coin (penny, nickel, dime, quarter, half, dollar).
            Quote an amount with $ in single quotes ('$1.25'): unquoted or in double quotes, the shell eats $1 and
            kidledger sees .25.
            \(sign < 0 ? "A take may leave a balance below zero (the child owes money): it is written, and a warning\nsays so (`warnings` in --json).\n" : "")  --note T   a note kept with the transaction
            """,
            valueOptions: ["note"], arguments: 2...2)) { ctx, args in
            let cents = try Money.parseAmount(args.positionals[1])
            let p = try ctx.change { try $0.post(args.positionals[0], signedCents: sign * cents, note: args.values["note"] ?? "", source: name) }
            ctx.say("\(verb) \(Money.format(cents: cents)) \(preposition) \(TextEscaping.terminal(p.childName)). Balance: \(Money.format(cents: p.balanceCents))")
            let warnings = negativeWarnings([p], sign: sign)
            warn(ctx, warnings)
            guard case .object(var fields) = Render.posting(p) else { preconditionFailure("a posting renders as an object") }
            fields.append(("warnings", .array(warnings.map(JSON.string))))
            ctx.emit(.object(fields))
        }
    }

    static let give = amountCommand("give", sign: 1, summary: "give money to a child", verb: "Gave", preposition: "to")
    static let take = amountCommand("take", sign: -1, summary: "take money from a child", verb: "Took", preposition: "from")

    static func allCommand(_ name: String, sign: Int64, summary: String, verb: String, preposition: String) -> CLI.Command {
        CLI.Command(spec: CommandSpec(
            name: name, synopsis: "AMOUNT [--note T]", summary: summary,
            details: """
            One atomic batch over every active child: if any balance would go out of range, nothing is written.
            AMOUNT is positive: dollars ('$1.25', '$0.10', 5) or a coin; quote an amount with $ in single quotes:
            unquoted, the shell eats $1 and kidledger sees .25.\(sign < 0 ? "\nA balance left below zero is written, with a warning for that child (`warnings` in --json)." : "")
              --note T   a note kept with each transaction
            """,
            valueOptions: ["note"], arguments: 1...1)) { ctx, args in
            let cents = try Money.parseAmount(args.positionals[0])
            let postings = try ctx.change { try $0.postAll(signedCents: sign * cents, note: args.values["note"] ?? "", source: name) }
            ctx.say("\(verb) \(Money.format(cents: cents)) \(preposition) \(count(postings.count)):")
            ctx.say(Render.table(header: nil, rightAligned: [1], rows: postings.map {
                ["  " + $0.childName, Money.format(cents: $0.balanceCents)]
            }, truncated: [0: 2 + Render.nameWidthMax]))
            let warnings = negativeWarnings(postings, sign: sign)
            warn(ctx, warnings)
            ctx.emit(.object([("postings", .array(postings.map(Render.posting))), ("warnings", .array(warnings.map(JSON.string)))]))
        }
    }

    static let giveAll = allCommand("give-all", sign: 1, summary: "give every active child the same amount", verb: "Gave", preposition: "to")
    static let takeAll = allCommand("take-all", sign: -1, summary: "take the same amount from every active child", verb: "Took", preposition: "from")

    static let balance = CLI.Command(spec: CommandSpec(
        name: "balance", synopsis: "[CHILD]", summary: "show balances", details: "", arguments: 0...1)) { ctx, args in
        let replica = try ctx.openLedger()
        _ = try requireHousehold(replica)
        let list = args.positionals.isEmpty ? try replica.children() : [try replica.resolveChild(args.positionals[0])]
        if list.count == 1 && !args.positionals.isEmpty {
            ctx.say("\(TextEscaping.terminal(list[0].name)): \(Money.format(cents: list[0].balanceCents))")
            ctx.emit(Render.child(list[0]))
            return
        }
        ctx.emit(.object([("children", .array(list.map(Render.child)))]))
        if list.isEmpty { ctx.say("No children yet: `kidledger child add NAME`."); return }
        ctx.say(Render.table(header: nil, rightAligned: [1], rows: list.map { [$0.name, Money.format(cents: $0.balanceCents)] },
                             truncated: [0: Render.nameWidthMax]))
    }

    static let history = CLI.Command(spec: CommandSpec(
        name: "history", synopsis: "[CHILD] [--limit N]", summary: "list transactions, newest first",
        details: "  --limit N   show at most N entries (default 20; 0 for all)", valueOptions: ["limit"], arguments: 0...1)) { ctx, args in
        var limit = 20
        if let raw = args.values["limit"] {
            guard let n = Int(raw), n >= 0 else { throw CLIError.usage("--limit takes a whole number, got \"\(raw)\"") }
            limit = n == 0 ? .max : n
        }
        let replica = try ctx.openLedger()
        _ = try requireHousehold(replica)
        let child = try args.positionals.first.map { try replica.resolveChild($0) }
        let entries = try replica.history(child: child?.id, limit: limit)
        ctx.emit(.object([("transactions", .array(entries.map(Render.entry)))]))
        if entries.isEmpty { ctx.say("No transactions yet."); return }
        let time = ctx.time
        let zone = time.label(for: entries.map(\.transaction.createdAtMillis))
        ctx.say(Render.table(header: ["WHEN (\(zone))", "CHILD", "AMOUNT", "SOURCE", "BY", "ID", "NOTE"], rightAligned: [2], rows: entries.map { e in
            let t = e.transaction
            return [time.short(t.createdAtMillis), e.childName, Render.signedAmount(t.amountCents), t.source,
                    e.author.key == nil ? "" : Names.label(e.author), String(t.id.hex.suffix(8)),
                    e.isReversed ? (t.note.isEmpty ? "(undone)" : t.note + " (undone)") : t.note]
        }, truncated: [1: Render.nameWidthMax]))
        for e in entries {
            for lost in e.conflicting { ctx.say(Render.sameIDLine(kept: e.transaction, by: e.author, lost: lost, time: time)) }
        }
    }

    static let undo = CLI.Command(spec: CommandSpec(
        name: "undo", synopsis: "[ID | --mine] [--dry-run]", summary: "reverse the newest transaction not yet undone",
        details: """
        Adds a compensating entry (history is never deleted). An undo entry itself cannot be undone;
        repeating undo walks back through older transactions across all children.
        Undoing an entry of a give-all or take-all reverses the whole batch (its entries not yet undone)
        in one change: every laptop sees all of it or none.
          ID          reverse the transaction with this id: the ID column of `history` (its last
                      digits, at least 4), or the whole `id` of `history --json`
          --mine      reverse the newest transaction you made (not another member's)
          --dry-run   only say what undo would reverse and who made it (`wouldUndo` in --json); change nothing
        """,
        flagOptions: ["dry-run", "mine"], arguments: 0...1)) { ctx, args in
        if args.has("mine") && !args.positionals.isEmpty { throw CLIError.usage("`undo` takes an ID or --mine, not both") }
        if args.has("dry-run") {
            let replica = try ctx.openLedger()
            _ = try requireHousehold(replica)
            let target = try undoTarget(args, replica)
            let entries = try replica.undoPreview(target)
            let e = entries[0]
            let stamp = ctx.time.stamped(e.transaction.createdAtMillis)
            if entries.count == 1 && !Replica.batchSources.contains(e.transaction.source) {
                ctx.say("Undo would reverse \(Render.signedAmount(e.transaction.amountCents)) for \(TextEscaping.terminal(e.childName)) (\(stamp)), made by \(Names.label(e.author)).")
            } else {
                ctx.say("Undo would reverse the \(TextEscaping.terminal(e.transaction.source)) of \(stamp), made by \(Names.label(e.author)), for \(count(entries.count)):")
                ctx.say(Render.table(header: nil, rightAligned: [1], rows: byName(entries, \.childName, \.transaction.id).map {
                    ["  " + $0.childName, Render.signedAmount($0.transaction.amountCents)]
                }, truncated: [0: 2 + Render.nameWidthMax]))
            }
            ctx.emit(.object([("wouldUndo", Render.entry(e)), ("wouldUndoAll", .array(entries.map(Render.entry)))]))
            return
        }
        let u = try ctx.change { replica in try replica.undo(try undoTarget(args, replica)) }
        let by = u.originalAuthor.key == nil ? "" : ", made by \(Names.label(u.originalAuthor))"
        let stamp = ctx.time.stamped(u.original.createdAtMillis)
        if u.entries.count == 1 && !Replica.batchSources.contains(u.original.source) {
            ctx.say("Undid \(Render.signedAmount(u.original.amountCents)) for \(TextEscaping.terminal(u.childName)) (\(stamp)\(by)). Balance: \(Money.format(cents: u.balanceCents))")
        } else {
            ctx.say("Undid the \(TextEscaping.terminal(u.original.source)) of \(stamp)\(by)\(by.isEmpty ? "" : ",") for \(count(u.entries.count)):")
            ctx.say(Render.table(header: nil, rightAligned: [1, 2], rows: byName(u.entries, \.childName, \.original.id).map {
                ["  " + $0.childName, Render.signedAmount($0.original.amountCents), Money.format(cents: $0.balanceCents)]
            }, truncated: [0: 2 + Render.nameWidthMax]))
        }
        ctx.emit(.object([("undo", Render.transaction(u.undo)), ("original", Render.transaction(u.original)),
                          ("originalAuthor", Names.json(u.originalAuthor)),
                          ("childName", .string(u.childName)), ("balanceCents", .integer(u.balanceCents)),
                          ("entries", .array(u.entries.map { e in
                              .object([("undo", Render.transaction(e.undo)), ("original", Render.transaction(e.original)),
                                       ("childName", .string(e.childName)), ("balanceCents", .integer(e.balanceCents))])
                          }))]))
    }

    /// A batch's rows in the order of their children's names (then ids): the same on every run.
    static func byName<T>(_ rows: [T], _ name: KeyPath<T, String>, _ id: KeyPath<T, RecordID>) -> [T] {
        rows.sorted { a, b in
            let (x, y) = (a[keyPath: name].lowercased(), b[keyPath: name].lowercased())
            return x != y ? x < y : a[keyPath: id] < b[keyPath: id]
        }
    }

    /// "1 child", "3 children".
    static func count(_ children: Int) -> String { "\(children) \(children == 1 ? "child" : "children")" }

    /// What `undo` starts from: an id, `--mine`, or the newest entry.
    /// An ID is a whole id or its last digits (at least 4; `history` shows 8); a short id that
    /// names no transaction or several is refused with the candidates.
    static func undoTarget(_ args: ParsedArguments, _ replica: Replica) throws -> UndoTarget {
        guard let raw = args.positionals.first else { return args.has("mine") ? .mine : .newest }
        if let id = RecordID(string: raw) { return .entry(id) }
        let digits = raw.filter { $0 != "-" }
        guard digits.count >= 4, digits.allSatisfy(\.isHexDigit) else {
            throw CLIError("\"\(TextEscaping.terminal(raw))\" is not a transaction id (the ID column of `kidledger history`, at least 4 digits, or `id` in `history --json`)", code: .dataError)
        }
        let ids = try replica.transactionIDs(endingWith: digits, limit: 6)
        switch ids.count {
        case 1: return .entry(ids[0])
        case 0: throw CLIError("no transaction has an id ending in \(digits.lowercased()) (the ID column of `kidledger history`)", code: .dataError)
        default:
            let shown = ids.prefix(5).map(\.hex).joined(separator: ", ")
            throw CLIError("\(digits.lowercased()) ends more than one transaction id (\(shown)\(ids.count > 5 ? ", …" : "")): give more digits", code: .dataError)
        }
    }

    /// A warning for each posting of a take that left its child's balance below zero (a take is
    /// allowed to: a child may owe money, but the parent should know).
    static func negativeWarnings(_ postings: [Posting], sign: Int64) -> [String] {
        guard sign < 0 else { return [] }
        return postings.filter { $0.balanceCents < 0 }.map {
            "\($0.childName)'s balance is now negative (\(Money.format(cents: $0.balanceCents))): \($0.childName) owes that much"
        }
    }

    /// Writes each warning on standard error as `kidledger: warning: ...` (in --json too, where
    /// they are also in the document's `warnings`), as `invite` does.
    static func warn(_ ctx: Context, _ warnings: [String]) {
        for warning in warnings { ctx.console.err("kidledger: warning: \(TextEscaping.terminal(warning))\n") }
    }

    static func requireHousehold(_ replica: Replica) throws -> HouseholdSummary {
        guard let h = try replica.household() else { throw LedgerError.noHousehold }
        return h
    }
}

#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB

/// Integrity and file commands.
enum DataCommands {
    static let all: [CLI.Command] = [conflicts, digest, verify, export, importCSV]

    static let conflicts = CLI.Command(spec: CommandSpec(
        name: "conflicts", synopsis: "[CHILD]", summary: "show what concurrent edits lost, and same-id conflicts",
        details: "When two devices change the same field while apart (say, both rename Ben), one value wins on every\ndevice; this lists the values that lost, who wrote them and when. It also lists transactions and children that\narrived with one id and different contents (a bug, a restore, or a member reusing another's id): the\nsame copy is kept on every device (the id's maker's, then the owner's, then by key, then the smaller),\nand both copies are shown with their authors.",
        arguments: 0...1)) { ctx, args in
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        let child = try args.positionals.first.map { try replica.resolveChild($0) }
        var names: [RecordID: String] = [:]
        for c in try replica.children(includeArchived: true, includeMerged: true) { names[c.id] = c.name }
        let household = try LedgerCommands.requireHousehold(replica)
        names[household.id] = household.name
        let journal = try replica.fieldConflicts(entity: child?.id)
        let counts = try replica.counts()
        let sameID = try replica.sameIDConflicts().filter { c in
            child.map { wanted in c.id == wanted.id || c.winner.transaction?.childID == wanted.id } ?? true
        }
        ctx.emit(.object([
            ("fieldConflicts", .array(journal.map { c in
                .object([("entityId", .string(c.entity.description)), ("name", .string(names[c.entity] ?? "")),
                         ("field", .string(c.field.description)),
                         ("loserValue", .string(c.loserValue.description)), ("loserReplicaId", .string(c.loserStamp.origin.description)),
                         ("loserAtMillis", .int(c.loserStamp.hlc.millis)),
                         ("winnerValue", .string(c.winnerValue.description)), ("winnerReplicaId", .string(c.winnerStamp.origin.description)),
                         ("winnerAtMillis", .int(c.winnerStamp.hlc.millis))])
            })),
            ("transactionConflicts", .int(counts.conflicts)),
            ("sameIdConflicts", .array(sameID.map(Render.sameIDConflict))),
        ]))
        if journal.isEmpty { ctx.say("No concurrent edits lost.") }
        for c in journal {
            ctx.say("\(names[c.entity].map(TextEscaping.terminal) ?? Render.shortID(c.entity)): \(c.field) \"\(TextEscaping.terminal(c.loserValue.description))\" (device \(c.loserStamp.origin.description.prefix(8)), \(ctx.time.stamped(c.loserStamp.hlc.millis))) lost to \"\(TextEscaping.terminal(c.winnerValue.description))\" (device \(c.winnerStamp.origin.description.prefix(8)), \(ctx.time.stamped(c.winnerStamp.hlc.millis)))")
        }
        if counts.conflicts > 0 {
            ctx.say("\(Render.plural(counts.conflicts, "transaction copy", "transaction copies")) with a reused id and different contents lost; the same copy was kept on every device.")
        }
        for c in sameID { ctx.say(Render.sameIDLine(kind: c.kind == "child" ? "child" : "entry", id: c.id, kept: c.winner, lost: c.loser, time: ctx.time)) }
    }

    static let digest = CLI.Command(spec: CommandSpec(
        name: "digest", synopsis: "", summary: "print the replica's state digest",
        details: "Two replicas print the same digest exactly when their merged ledgers are equal.")) { ctx, _ in
        let replica = try ctx.openReplica()
        let d = try replica.digest()
        ctx.say(d.description)
        ctx.emit(.object([("digest", .string(d.description)), ("replicaId", .string(replica.replicaID.description))]))
    }

    static let verify = CLI.Command(spec: CommandSpec(
        name: "verify", synopsis: "", summary: "check the replica's integrity",
        details: "Decodes every record, recomputes every index, per-child total and the digest, and checks the\nchange log against the version vector; recomputes the membership, the rejected and forged sets and the\ndigest from the change log alone and compares them with the stored state (in a transaction it rolls back);\nreads every page of the store. Exits 65 when it finds a problem,\n70 when the store is too damaged to read. A second household record signed by the owner's key is not\ndamage: it prints a warning (ownerKeyWarning in --json) and exits 0.")) { ctx, _ in
        let replica = try ctx.openReplica()
        var report = try replica.verify()
        // Below the records: every page of the LMDB file that LMDB can reach.
        if let environment = replica.store as? LMDBEnvironment {
            report.problems += try environment.checkPages().map { "store: \($0)" }
        }
        ctx.emit(.object([("ok", .bool(report.isIntact)), ("problems", .array(report.problems.map(JSON.string))),
                          ("transactions", .int(report.transactions)), ("children", .int(report.children)),
                          ("changes", .int(report.changes)), ("forged", .int(report.forged)),
                          ("forgedHouseholds", .int(report.forgedHouseholds)), ("rejected", .int(report.rejected)),
                          ("secondGeneses", .int(report.secondGeneses)),
                          ("ownerKeyWarning", report.ownerKeyCompromised.map { .string($0.sentence) } ?? .null),
                          ("recomputed", .bool(report.recomputationSkipped == nil)),
                          ("digest", .string(report.digest.description))]))
        if let forged = Render.forged(report.forged, households: report.forgedHouseholds) { ctx.say(forged) }
        // Not damage (the store is intact): a warning that someone else may hold the owner key.
        if let compromise = report.ownerKeyCompromised { ctx.say("warning: " + compromise.sentence) }
        if let skipped = report.recomputationSkipped {
            ctx.say("note: the state was not recomputed from the change log (the store has no room for the scratch transaction: \(skipped)); free space and run verify again")
        }
        if report.isIntact {
            ctx.say("ok: \(Render.plural(report.transactions, "transaction")), \(Render.plural(report.children, "child", "children")), \(Render.plural(report.changes, "change")); digest \(report.digest)")
        } else {
            for p in report.problems { ctx.say("problem: \(TextEscaping.terminal(p))") }
            throw CLIError("verify found \(report.problems.count) problem\(report.problems.count == 1 ? "" : "s")", code: .dataError)
        }
    }

    static let export = CLI.Command(spec: CommandSpec(
        name: "export", synopsis: "--csv FILE", summary: "write every transaction to a CSV file",
        details: """
        One row per transaction, oldest first, with a header, RFC 4180 quoting, CRLF line ends, UTF-8. FILE - writes
        to stdout. Columns: id, createdAt (ISO 8601 UTC with milliseconds), child, childId, amountCents (signed
        integer cents), amount ($1.25, -$0.25), note, source (give, take, give-all, take-all, undo, import),
        reverses (for an undo entry, the id of the transaction it compensates).
        """,
        valueOptions: ["csv"])) { ctx, args in
        guard let path = args.values["csv"] else { throw CLIError.usage("export needs --csv FILE") }
        // The periods due are paid first, as by every ledger command, so the file has them.
        let replica = try ctx.openLedger(paymentsOnStandardError: path == "-")
        _ = try LedgerCommands.requireHousehold(replica)
        var names: [RecordID: String] = [:]
        for c in try replica.children(includeArchived: true, includeMerged: true) { names[c.id] = c.name }
        let transactions = try replica.allTransactions()
        let text = LedgerCSV.export(transactions, childNames: names)
        if path == "-" {
            ctx.console.out(text)
            return
        }
        try FileSystem.writeFile(path, text)
        ctx.say("Exported \(transactions.count) transaction\(transactions.count == 1 ? "" : "s") to \(path).")
        ctx.emit(.object([("file", .string(path)), ("transactions", .int(transactions.count))]))
    }

    static let importCSV = CLI.Command(spec: CommandSpec(
        name: "import", synopsis: "--csv FILE [--dry-run]", summary: "add transactions from a CSV file (idempotent)",
        details: """
        Accepts what export writes. Every row is checked before anything is written; re-importing a file adds
        nothing. Children are matched by id, then by name; missing ones are created. createdAt is an ISO 8601
        time (2026-11-20T18:02:00.000Z, or with an offset such as +02:00), or a plain date (2026-11-20), which
        means 12:00 UTC that day: the same instant on every laptop (so importing the file on two laptops adds
        the same transactions), shown as that date in any time zone from UTC-11 to UTC+11.
          --dry-run   check the file and say what would be imported (counts, children to create); store nothing
        """,
        valueOptions: ["csv"], flagOptions: ["dry-run"])) { ctx, args in
        guard let path = args.values["csv"] else { throw CLIError.usage("import needs --csv FILE") }
        let dryRun = args.has("dry-run")
        // A real import pays the periods due first, as every ledger command does; a dry run stores nothing.
        func rows(_ replica: Replica) throws -> [ImportRow] {
            _ = try LedgerCommands.requireHousehold(replica)
            return try LedgerCSV.parse(ImportDates.withPlainDates(try FileSystem.readFile(path)))
        }
        let result: ImportResult
        if dryRun {
            let replica = try ctx.openReplicaForChanges()
            result = try dryRunImport(try rows(replica), from: replica, ctx: ctx)
        } else {
            result = try ctx.change { replica in try replica.importTransactions(try rows(replica)) }
        }
        let (verb, children) = dryRun ? ("Would import", "would add") : ("Imported", "added")
        var text = "\(verb) \(result.added) transaction\(result.added == 1 ? "" : "s") from \(path)"
        if result.alreadyPresent > 0 { text += " (\(result.alreadyPresent) already present)" }
        if !result.childrenCreated.isEmpty { text += "; \(children) \(result.childrenCreated.map(TextEscaping.terminal).joined(separator: ", "))" }
        ctx.say(text + (dryRun ? ". Nothing was stored (--dry-run)." : "."))
        ctx.emit(.object([("file", .string(path)), ("added", .int(result.added)), ("alreadyPresent", .int(result.alreadyPresent)),
                          ("childrenCreated", .array(result.childrenCreated.map(JSON.string))), ("dryRun", .bool(dryRun))]))
    }

    /// What importing `rows` would do, found by the real import on a copy of the store (taken while
    /// holding the store's write lock, so it is one committed state) that is deleted afterwards: the
    /// home's ledger is not written.
    static func dryRunImport(_ rows: [ImportRow], from replica: Replica, ctx: Context) throws -> ImportResult {
        guard let environment = replica.store as? LMDBEnvironment else { throw CLIError("no store to copy", code: .software) }
        let copy = ctx.home + "/import-dry-run-\(getpid())"
        try? FileSystem.removeTree(copy)
        try FileSystem.makeDirectory(copy)
        defer { try? FileSystem.removeTree(copy) }
        try environment.write { _ in try FileSystem.copyFile(ctx.storePath + "/data.mdb", to: copy + "/data.mdb") }
        let scratch = try ctx.openReplica(at: copy, creating: false)
        defer { (scratch.store as? LMDBEnvironment)?.close() }
        scratch.signer = replica.signer
        return try scratch.importTransactions(rows)
    }
}

/// Plain dates in an imported CSV's `createdAt` column.
enum ImportDates {
    /// `text` with every `createdAt` field that is a plain date (`2026-11-20`, a real calendar date)
    /// written as 12:00 UTC that day (`2026-11-20T12:00:00.000Z`); unchanged when there is none, or
    /// when the text is not CSV (the import then reports the error). Records stay on their lines, so
    /// errors name the file's own line numbers.
    static func withPlainDates(_ text: String) -> String {
        guard let records = try? CSV.parse(text), let header = records.first,
              let column = header.fields.firstIndex(where: { Text.trimmed($0) == "createdAt" }) else { return text }
        var changed = false
        var rewritten = records
        for i in rewritten.indices.dropFirst() where column < rewritten[i].fields.count {
            if let noon = noon(Text.trimmed(rewritten[i].fields[column])) {
                rewritten[i].fields[column] = noon
                changed = true
            }
        }
        guard changed else { return text }
        var out = ""
        var line = 1
        for record in rewritten {
            while line < record.line { out += "\n"; line += 1 }
            let row = CSV.encodeRow(record.fields)
            out += row + "\n"
            line += 1 + row.utf8.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
        }
        return out
    }

    /// "2026-11-20T12:00:00.000Z" for "2026-11-20", or nil when `date` is not a plain date.
    static func noon(_ date: String) -> String? {
        let b = Array(date.utf8)
        guard b.count == 10, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              b.enumerated().allSatisfy({ $0.offset == 4 || $0.offset == 7 || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0.element) })
        else { return nil }
        let text = date + "T12:00:00.000Z"
        return Timestamp.parseISO8601(text) == nil ? nil : text
    }
}

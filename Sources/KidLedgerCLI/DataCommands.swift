import KidLedgerDomain
import KidLedgerReplica

/// Integrity and file commands.
enum DataCommands {
    static let all: [CLI.Command] = [digest, verify, export, importCSV]

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
        details: "Decodes every record, recomputes every index, per-child total and the digest, and checks the\nchange log against the version vector. Exits 65 when it finds a problem.")) { ctx, _ in
        let replica = try ctx.openReplica()
        let report = try replica.verify()
        ctx.emit(.object([("ok", .bool(report.isIntact)), ("problems", .array(report.problems.map(JSON.string))),
                          ("transactions", .int(report.transactions)), ("children", .int(report.children)),
                          ("changes", .int(report.changes)), ("digest", .string(report.digest.description))]))
        if report.isIntact {
            ctx.say("ok: \(Render.plural(report.transactions, "transaction")), \(Render.plural(report.children, "child", "children")), \(Render.plural(report.changes, "change")); digest \(report.digest)")
        } else {
            for p in report.problems { ctx.say("problem: \(p)") }
            throw CLIError("verify found \(report.problems.count) problem\(report.problems.count == 1 ? "" : "s")", code: .dataError)
        }
    }

    static let export = CLI.Command(spec: CommandSpec(
        name: "export", synopsis: "--csv FILE", summary: "write every transaction to a CSV file",
        details: "One row per transaction, oldest first, with a header (columns: docs/CSV.md). FILE - writes to stdout.",
        valueOptions: ["csv"])) { ctx, args in
        guard let path = args.values["csv"] else { throw CLIError.usage("export needs --csv FILE") }
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        var names: [RecordID: String] = [:]
        for c in try replica.children(includeArchived: true) { names[c.id] = c.name }
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
        name: "import", synopsis: "--csv FILE", summary: "add transactions from a CSV file (idempotent)",
        details: "Accepts what export writes. Every row is checked before anything is written; re-importing a file adds\nnothing. Children are matched by id, then by name; missing ones are created.",
        valueOptions: ["csv"])) { ctx, args in
        guard let path = args.values["csv"] else { throw CLIError.usage("import needs --csv FILE") }
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        let rows = try LedgerCSV.parse(try FileSystem.readFile(path))
        let result = try replica.importTransactions(rows)
        var text = "Imported \(result.added) transaction\(result.added == 1 ? "" : "s") from \(path)"
        if result.alreadyPresent > 0 { text += " (\(result.alreadyPresent) already present)" }
        if !result.childrenCreated.isEmpty { text += "; added \(result.childrenCreated.joined(separator: ", "))" }
        ctx.say(text + ".")
        ctx.emit(.object([("file", .string(path)), ("added", .int(result.added)), ("alreadyPresent", .int(result.alreadyPresent)),
                          ("childrenCreated", .array(result.childrenCreated.map(JSON.string)))]))
    }
}

import KidLedgerDomain
import KidLedgerReplica
import KidLedgerDaemon

/// Text tables and JSON shapes shared by the commands. JSON keys are camelCase; amounts are
/// integer cents in keys ending in `Cents`; times are Unix milliseconds in keys ending in `Millis`.
enum Render {
    /// "1 child", "2 children".
    static func plural(_ n: Int, _ one: String, _ many: String? = nil) -> String { Wording.plural(n, one, many) }

    /// "just now", "4 minutes ago", "3 hours ago", "3 days ago": how long before `now` `millis`
    /// was, rounded as the page rounds it (its `ago`).
    static func ago(_ millis: Int64, now: Int64) -> String {
        let s = max(0, (now - millis + 500) / 1000)
        if s < 45 { return "just now" }
        let m = max(1, (s + 30) / 60)
        if m < 60 { return plural(Int(m), "minute") + " ago" }
        let h = (m + 30) / 60
        if h < 36 { return plural(Int(h), "hour") + " ago" }
        return plural(Int((h + 12) / 24), "day") + " ago"
    }

    /// "3 forged records refused (1 household record)", or nil when there are none.
    static func forged(_ count: Int, households: Int) -> String? {
        guard count > 0 else { return nil }
        return "\(plural(count, "forged record")) refused, never applied" + (households > 0 ? " (\(plural(households, "household record")))" : "")
    }

    static func shortID(_ id: RecordID) -> String { String(id.hex.prefix(8)) }

    /// The line `children` and `status` print for active children with one name up to case and
    /// accents (``Replica/sameNameGroups(_:)``): "Max (1a2b3c4d) and max (5e6f7a8b) have the same
    /// name …".
    static func sameNameLine(_ group: [ChildSummary]) -> String {
        let names = group.map { "\(TextEscaping.terminal($0.name)) (\(shortID($0.id)))" }
        let list = names.count == 2 ? names.joined(separator: " and ") : names.dropLast().joined(separator: ", ") + " and " + names[names.count - 1]
        return "note: \(list) have the same name up to case and accents (added on two laptops?); rename one (`kidledger child rename ID NEWNAME`) so each child has one name, or make them one child (`kidledger child merge FROM INTO`)"
    }

    /// `sameNames` in `children --json` and `status --json`: each group an array of child ids.
    static func sameNames(_ groups: [[ChildSummary]]) -> JSON {
        .array(groups.map { .array($0.map { .string($0.id.description) }) })
    }

    static func household(_ h: HouseholdSummary) -> JSON {
        .object([("id", .string(h.id.description)), ("name", .string(h.name)), ("createdAtMillis", .int(h.createdAtMillis))])
    }

    static func child(_ c: ChildSummary) -> JSON {
        .object([("id", .string(c.id.description)), ("name", .string(c.name)), ("archived", .bool(c.isArchived)),
                 ("sortOrder", .int(c.sortOrder)), ("balanceCents", .integer(c.balanceCents)),
                 ("transactionCount", .int(c.transactionCount)), ("createdAtMillis", .int(c.createdAtMillis)),
                 ("mergedInto", c.mergedInto.map { .string($0.description) } ?? .null)])
    }

    static func transaction(_ t: LedgerTransaction) -> JSON {
        .object([("id", .string(t.id.description)), ("childId", .string(t.childID.description)),
                 ("amountCents", .int(t.amountCents)), ("createdAtMillis", .int(t.createdAtMillis)),
                 ("note", .string(t.note)), ("source", .string(t.source)),
                 ("reverses", t.reverses.map { .string($0.description) } ?? .null)])
    }

    static func posting(_ p: Posting) -> JSON {
        .object([("transaction", transaction(p.transaction)), ("childName", .string(p.childName)),
                 ("balanceCents", .integer(p.balanceCents))])
    }

    static func entry(_ e: HistoryEntry) -> JSON {
        .object([("transaction", transaction(e.transaction)), ("childName", .string(e.childName)),
                 ("reversed", .bool(e.isReversed)), ("author", Names.json(e.author)),
                 ("conflicts", .array(e.conflicting.map(version)))])
    }

    /// One version of a same-id conflict: the transaction or child record, and its author.
    static func version(_ v: ConflictVersion) -> JSON {
        var fields: [(String, JSON)] = []
        if let t = v.transaction { fields.append(("transaction", transaction(t))) }
        if let c = v.child { fields.append(("child", .object([("id", .string(c.id.description)), ("createdAtMillis", .int(c.createdAtMillis))]))) }
        fields.append(("author", Names.json(v.author)))
        return .object(fields)
    }

    static func sameIDConflict(_ c: SameIDConflict) -> JSON {
        .object([("kind", .string(c.kind)), ("id", .string(c.id.description)), ("kept", version(c.winner)), ("lost", version(c.loser))])
    }

    /// "+$1.25", "-$0.25".
    static func signedAmount(_ cents: Int64) -> String {
        (cents > 0 ? "+" : "") + Money.format(cents: cents)
    }

    /// What a version shows in a conflict line: an amount and note, or a creation time.
    static func summary(_ v: ConflictVersion, time: LocalTime) -> String {
        if let t = v.transaction { return signedAmount(t.amountCents) + (t.note.isEmpty ? "" : " \"\(TextEscaping.terminal(t.note))\"") }
        if let c = v.child { return "created \(time.stamped(c.createdAtMillis))" }
        return "?"
    }

    /// "conflict on entry 1a2b3c4d: kept +$5.00 by Mom (…), lost +$50.00 by Dad (…)".
    static func sameIDLine(kind: String = "entry", id: RecordID, kept: ConflictVersion, lost: ConflictVersion, time: LocalTime) -> String {
        "conflict on \(kind) \(shortID(id)): kept \(summary(kept, time: time)) by \(Names.label(kept.author)); lost \(summary(lost, time: time)) by \(Names.label(lost.author)) (same id, other contents)"
    }

    static func sameIDLine(kept: LedgerTransaction, by author: Author, lost: ConflictVersion, time: LocalTime) -> String {
        sameIDLine(id: kept.id, kept: ConflictVersion(transaction: kept, author: author), lost: lost, time: time)
    }

    /// The widest a name (of a child, in a table column) is shown; longer ones end in "…".
    static let nameWidthMax = 24

    /// Columns padded to their widest cell, by display width (``DisplayWidth``); `rightAligned`
    /// columns are padded on the left; a cell of a column in `truncated` wider than its limit is cut
    /// and ends in "…". Trailing white space is trimmed from every line.
    static func table(header: [String]?, rightAligned: Set<Int>, rows: [[String]], truncated: [Int: Int] = [:]) -> String {
        let all = ((header.map { [$0] } ?? []) + rows).map { row in
            row.enumerated().map { i, cell in truncated[i].map { DisplayWidth.truncate(TextEscaping.terminal(cell), to: $0) } ?? TextEscaping.terminal(cell) }
        }
        guard let columns = all.map(\.count).max() else { return "" }
        var widths = [Int](repeating: 0, count: columns)
        for row in all { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], DisplayWidth.of(cell)) } }
        let lines = all.map { row -> String in
            var line = ""
            for (i, cell) in row.enumerated() {
                let pad = String(repeating: " ", count: widths[i] - DisplayWidth.of(cell))
                if i > 0 { line += "  " }
                line += rightAligned.contains(i) ? pad + cell : cell + pad
            }
            while line.last == " " { line.removeLast() }
            return line
        }
        return lines.joined(separator: "\n")
    }
}

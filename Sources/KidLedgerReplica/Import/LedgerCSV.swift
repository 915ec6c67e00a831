import KidLedgerDomain

/// One row of a transactions CSV, parsed and validated, ready to import.
public struct ImportRow: Equatable, Sendable {
    /// The 1-based line it came from.
    public var line: Int
    /// The transaction id, when the file carries one.
    public var id: RecordID?
    /// The child's id, when the file carries one.
    public var childID: RecordID?
    /// The child's name.
    public var childName: String
    /// Signed cents.
    public var amountCents: Int64
    /// Creation time, Unix milliseconds.
    public var createdAtMillis: Int64
    /// The note.
    public var note: String
    /// The source tag.
    public var source: String
    /// The reversed transaction, for undo rows.
    public var reverses: RecordID?
}

/// The transactions CSV: what `export --csv` writes and `import --csv` reads (docs/CSV.md).
public enum LedgerCSV {
    /// The columns, in order.
    public static let header = ["id", "createdAt", "child", "childId", "amountCents", "amount", "note", "source", "reverses"]

    /// One row per transaction, oldest first, with a header.
    public static func export(_ transactions: [LedgerTransaction], childNames: [RecordID: String]) -> String {
        let sorted = transactions.sorted { ($0.createdAtMillis, $0.id) < ($1.createdAtMillis, $1.id) }
        return CSV.encode(header: header, rows: sorted.map { t in
            [t.id.description, Timestamp.iso8601(millis: t.createdAtMillis), childNames[t.childID] ?? "",
             t.childID.description, String(t.amountCents), Money.format(cents: t.amountCents), t.note, t.source,
             t.reverses?.description ?? ""]
        })
    }

    /// Parses and validates a whole document. Required columns: `child` or `childId`, `amountCents`
    /// or `amount`, and `createdAt`; the others are optional. Columns may come in any order.
    ///
    /// - Throws: ``CSVError`` naming the line and the problem; nothing is imported then.
    public static func parse(_ text: String) throws(CSVError) -> [ImportRow] {
        let records = try CSV.parse(text)
        guard let head = records.first else { throw .malformed(line: 1, reason: "the file is empty (expected a header line)") }
        var column: [String: Int] = [:]
        for (i, name) in head.fields.enumerated() { column[Text.trimmed(name)] = i }
        guard column["child"] != nil || column["childId"] != nil else { throw .malformed(line: head.line, reason: "no `child` or `childId` column") }
        guard column["amountCents"] != nil || column["amount"] != nil else { throw .malformed(line: head.line, reason: "no `amountCents` or `amount` column") }
        guard column["createdAt"] != nil else { throw .malformed(line: head.line, reason: "no `createdAt` column") }
        var rows: [ImportRow] = []
        rows.reserveCapacity(records.count - 1)
        for record in records.dropFirst() {
            rows.append(try row(record, column))
        }
        return rows
    }

    static func row(_ record: CSVRecord, _ column: [String: Int]) throws(CSVError) -> ImportRow {
        let line = record.line
        func field(_ name: String) -> String {
            guard let i = column[name], i < record.fields.count else { return "" }
            return record.fields[i]
        }
        func id(_ name: String) throws(CSVError) -> RecordID? {
            let text = Text.trimmed(field(name))
            if text.isEmpty { return nil }
            guard let id = RecordID(string: text) else { throw .malformed(line: line, reason: "`\(name)` \"\(text)\" is not an id") }
            return id
        }
        guard record.fields.count == column.count else {
            throw .malformed(line: line, reason: "expected \(column.count) fields, found \(record.fields.count)")
        }
        let amount: Int64
        let centsText = Text.trimmed(field("amountCents"))
        if !centsText.isEmpty {
            guard let v = Int64(centsText), v != 0, v != .min else {
                throw .malformed(line: line, reason: "amountCents \"\(centsText)\" is not a non-zero whole number of cents")
            }
            amount = v
        } else {
            var text = Text.trimmed(field("amount"))
            let negative = text.hasPrefix("-")
            if negative { text.removeFirst() }
            do { amount = (negative ? -1 : 1) * (try Money.parseAmount(text)) } catch {
                throw .malformed(line: line, reason: "amount: \(error)")
            }
        }
        guard let created = Timestamp.parseISO8601(Text.trimmed(field("createdAt"))) else {
            throw .malformed(line: line, reason: "createdAt \"\(field("createdAt"))\" is not an ISO 8601 time like 2026-11-29T18:02:00.000Z")
        }
        let row = ImportRow(line: line, id: try id("id"), childID: try id("childId"), childName: Text.trimmed(field("child")),
                            amountCents: amount, createdAtMillis: created, note: field("note"),
                            source: Text.trimmed(field("source")).isEmpty ? "import" : Text.trimmed(field("source")),
                            reverses: try id("reverses"))
        if row.childID == nil && row.childName.isEmpty { throw .malformed(line: line, reason: "no child named") }
        if row.note.utf8.count > Limits.noteBytesMax { throw .malformed(line: line, reason: "note longer than \(Limits.noteBytesMax) bytes") }
        if row.source.utf8.count > Limits.sourceBytesMax { throw .malformed(line: line, reason: "source longer than \(Limits.sourceBytesMax) bytes") }
        if row.childName.utf8.count > Limits.nameBytesMax { throw .malformed(line: line, reason: "child name longer than \(Limits.nameBytesMax) bytes") }
        if let original = row.reverses, let given = row.id, given != LedgerTransaction.undoID(for: original) {
            throw .malformed(line: line, reason: "an undo row's id must be derived from the id it reverses")
        }
        return row
    }
}

import KidLedgerDomain

/// What `verify` found.
public struct VerifyReport: Equatable, Sendable {
    /// Problems found; empty means the replica is intact.
    public var problems: [String] = []
    /// Transactions checked.
    public var transactions = 0
    /// Children checked.
    public var children = 0
    /// Changes checked.
    public var changes = 0
    /// The digest recomputed from the records.
    public var digest = Digest256.zero
    /// Records counted as forged (refused, never applied).
    public var forged = 0
    /// Of them, household records (a forged genesis, or another household's).
    public var forgedHouseholds = 0

    /// Whether nothing is wrong.
    public var isIntact: Bool { problems.isEmpty }
}

extension Replica {
    /// Everything ``verify()`` reads: these tables, and of `meta` only the stored digest
    /// (`VerifyTests` checks it). Its report is a function of them alone.
    public static let verifiedTables: [Table] = [
        Tables.households, Tables.children, Tables.registers, Tables.transactions, Tables.byTime, Tables.byChild,
        Tables.deferred, Tables.aggregates, Tables.claims, Tables.grants, Tables.revocations, Tables.changes,
        Tables.chains, Tables.rejected, Tables.forged, Tables.vector,
    ]
    /// The one key of `meta` that ``verify()`` reads: the stored digest.
    public static let verifiedMetaKey = Keys.digest

    /// A full integrity check: every record decodes and validates, every index and per-child total
    /// matches the transactions, the stored digest matches one recomputed from the records, the
    /// change log is contiguous per origin and agrees with the version vector, and every change
    /// in the log is reflected in the merged state. Reads only.
    public func verify() throws -> VerifyReport {
        try store.read { r in
            var report = VerifyReport()
            func problem(_ text: String) { if report.problems.count < 100 { report.problems.append(text) } }
            var digest = Digest256.zero

            if try r.count(Tables.households) > 1 { problem("the households table holds more than one household") }
            report.forged = try r.count(Tables.forged)
            report.forgedHouseholds = try Self.forgedHouseholds(r)
            try r.scan(Tables.households) { key, value in
                if let h = try? RecordCodec.decodeHousehold(value), Keys.id(h.id) == key {
                    digest.insert(DigestRecord.household(h))
                } else { problem("household record \(key.count == 16 ? RecordID(bytes: key).description : "?") is damaged") }
                return true
            }
            var childIDs = Set<RecordID>()
            try r.scan(Tables.children) { key, value in
                if let c = try? RecordCodec.decodeChild(value), Keys.id(c.id) == key {
                    childIDs.insert(c.id)
                    digest.insert(DigestRecord.child(c))
                } else { problem("child record is damaged") }
                return true
            }
            report.children = childIDs.count
            try r.scan(Tables.registers) { key, value in
                if key.count == 17, Field(rawValue: key[16]) != nil, let stored = try? StoredRegister.decode(value),
                   stored.value.fits(Field(rawValue: key[16])!) {
                    digest.insert(DigestRecord.register(key: key, stored: value))
                } else { problem("register is damaged") }
                return true
            }

            var aggregates: [RecordID: Aggregate] = [:]
            var placed = 0, deferred = 0
            try r.scan(Tables.transactions) { key, value in
                report.transactions += 1
                guard let t = try? RecordCodec.decodeTransaction(value), Keys.id(t.id) == key else {
                    problem("transaction record is damaged")
                    return true
                }
                digest.insert(tag: DigestRecord.transactionTag, value)
                if childIDs.contains(t.childID) {
                    placed += 1
                    aggregates[t.childID, default: Aggregate()].add(t, idMix: Aggregate.idMix(t.id))
                    if try r.get(Tables.byTime, Keys.byTime(t)) == nil { problem("transaction \(t.id) missing from the time index") }
                    if try r.get(Tables.byChild, Keys.byChild(t)) == nil { problem("transaction \(t.id) missing from the child index") }
                } else {
                    deferred += 1
                    if try r.get(Tables.deferred, Keys.deferred(t)) == nil { problem("transaction \(t.id) of an unknown child is not deferred") }
                }
                return true
            }
            if try r.count(Tables.byTime) != placed { problem("time index has \(try r.count(Tables.byTime)) entries, expected \(placed)") }
            if try r.count(Tables.byChild) != placed { problem("child index has \(try r.count(Tables.byChild)) entries, expected \(placed)") }
            if try r.count(Tables.deferred) != deferred { problem("deferred table has \(try r.count(Tables.deferred)) entries, expected \(deferred)") }
            for child in childIDs {
                let stored = try? Aggregate.load(child, r)
                if stored != (aggregates[child] ?? Aggregate()) { problem("totals of child \(child) do not match its transactions") }
            }

            try r.scan(Tables.claims) { key, value in
                digest.insert([UInt8(ascii: "L")] + key + value)
                return true
            }
            for table in [Tables.grants, Tables.revocations] {
                try r.scan(table) { _, value in
                    digest.insert([UInt8(ascii: table == Tables.grants ? "G" : "V")] + value)
                    return true
                }
            }
            report.digest = digest
            let storedDigest = Digest256(bytes: try r.get(Tables.meta, Keys.digest))
            if storedDigest != digest { problem("stored digest \(storedDigest?.description ?? "missing") does not match the records (\(digest))") }

            // Not `&report`: `problem` writes to `report` too, and an inout access for the whole call
            // would overlap with it (a fatal exclusivity violation as soon as a problem is found).
            let changes = try verifyChangeLog(r, problem: problem)
            report.changes = changes
            return report
        }
    }

    /// Checks the change log, the hash chains and the version vector; returns the changes counted.
    private func verifyChangeLog(_ r: any KeyValueReader, problem: (String) -> Void) throws -> Int {
        var lastByOrigin: [ReplicaID: UInt64] = [:]
        var changes = 0
        // The link being hashed: the previous link, then the version of every change at one
        // (origin, sequence) (several versions when it forked). Plain locals rather than one
        // optional tuple: the hasher and arrays are then not copied at every change.
        var open = false
        var openOrigin = ReplicaID(0), openSequence: UInt64 = 0
        var previous = [UInt8](repeating: 0, count: 16)
        var hasher = SHA256Hasher()
        func closeLink() throws {
            guard open else { return }
            let link = hasher.finalizeWords().prefix(16)  // resets the hasher
            if try r.get(Tables.chains, Keys.change(openOrigin, openSequence)) != link {
                problem("hash chain of \(openOrigin) at \(openSequence) does not match the change log")
            }
            previous = link
        }
        try r.scan(Tables.changes) { key, value in
            changes += 1
            let decoded = key.count == 24 ? try? RecordCodec.decodeChange(value) : nil
            guard let change = decoded, Keys.change(change.origin, change.sequence, version: Keys.version(value)) == key else {
                problem("change log entry is damaged")
                return true
            }
            let last = lastByOrigin[change.origin] ?? 0
            if change.sequence != last && change.sequence != last + 1 {
                problem("change log of \(change.origin) jumps from \(last) to \(change.sequence)")
            }
            lastByOrigin[change.origin] = change.sequence
            if !open || openOrigin != change.origin || openSequence != change.sequence {
                let sameOrigin = open && openOrigin == change.origin
                try closeLink()
                if !sameOrigin { previous = [UInt8](repeating: 0, count: 16) }
                open = true
                openOrigin = change.origin
                openSequence = change.sequence
                hasher.update(previous)
            }
            key.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[16...])) }  // the version
            let rejected = try r.get(Tables.rejected, key) != nil
            for op in change.operations where !rejected || op.isMembership {
                try checkReflected(op, change: change, logKey: key, r, problem: problem)
            }
            return true
        }
        try closeLink()
        if try r.count(Tables.chains) != lastByOrigin.values.reduce(0, { $0 + Int($1) }) {
            problem("hash chains table does not match the change log")
        }
        var vectorEntries = 0
        try r.scan(Tables.vector) { key, value in
            vectorEntries += 1
            let origin = ReplicaID(Bytes.u64(key) ?? 0)
            if Bytes.u64(value) != lastByOrigin[origin] { problem("version vector entry of \(origin) does not match the change log") }
            return true
        }
        if vectorEntries != lastByOrigin.count { problem("version vector has \(vectorEntries) origins, the change log \(lastByOrigin.count)") }
        return changes
    }

    private func checkReflected(_ op: Operation, change: Change, logKey: [UInt8], _ r: any KeyValueReader,
                                problem: (String) -> Void) throws {
        switch op {
        case .createHousehold(let h):
            // Applied, or counted as forged (another household's, or not the owner's).
            if try r.get(Tables.households, Keys.id(h.id)) == nil {
                var counted = false
                try r.scan(Tables.forged, prefix: logKey) { _, _ in counted = true; return false }
                if !counted { problem("household \(h.id) of change \(change.origin)/\(change.sequence) is missing") }
            }
        case .createChild(let c):
            if try r.get(Tables.children, Keys.id(c.id)) == nil { problem("child \(c.id) of change \(change.origin)/\(change.sequence) is missing") }
        case .setField(let entity, let field, let value, _):
            guard let raw = try r.get(Tables.registers, Keys.register(entity, field)),
                  let stored = try? StoredRegister.decode(raw) else {
                problem("register \(field) of \(entity) is missing")
                return
            }
            let written = StoredRegister(stamp: Stamp(hlc: change.hlc, origin: change.origin), value: value)
            if written.wins(over: stored) { problem("register \(field) of \(entity) holds a value older than change \(change.origin)/\(change.sequence)") }
        case .grant, .revoke, .claim:
            break  // checked through the digest (invalid ones are in the forged table)
        case .addTransaction(let t):
            guard let raw = try r.get(Tables.transactions, Keys.id(t.id)) else {
                problem("transaction \(t.id) of change \(change.origin)/\(change.sequence) is missing")
                return
            }
            let payload = RecordCodec.encode(t)
            // Another payload won (by author, then payload): this one is kept as its loser.
            if raw != payload,
               try r.get(Tables.conflicts, Keys.conflict(kind: t.isUndo ? Conflict.undoMerge : Conflict.transaction, id: t.id, payload: payload)) == nil {
                problem("transaction \(t.id) of change \(change.origin)/\(change.sequence) neither won nor is kept as a conflict")
            }
        }
    }
}

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
    /// Of them, second geneses (creation records of this household its owner key signed that
    /// are not its pinned genesis).
    public var secondGeneses = 0
    /// What a second genesis shows (``OwnerKeyCompromise/sentence``), or nil: not a damaged
    /// store, a warning.
    public var ownerKeyCompromised: OwnerKeyCompromise?
    /// Changes the revocation rule rejected.
    public var rejected = 0
    /// Why the state could not be recomputed from the change log (the store could not start the
    /// transaction it rolls back: a full map or disk), or nil when it was. Not a problem of the
    /// replica's: the other checks ran.
    public var recomputationSkipped: String?

    /// Whether nothing is wrong.
    public var isIntact: Bool { problems.isEmpty }

    /// This report of ``Replica/verifyReads(headsToo:)`` with the recomputation's findings added.
    package func adding(_ recomputation: Recomputation) -> VerifyReport {
        var report = adding(problems: recomputation.problems)
        report.recomputationSkipped = recomputation.skipped
        return report
    }

    /// This report with `problems` added after its own (at most 100 in all, as ``Replica/verify()`` keeps).
    package func adding(problems: [String]) -> VerifyReport {
        var report = self
        for problem in problems where report.problems.count < 100 { report.problems.append(problem) }
        return report
    }
}

/// What ``Replica/verifyRecomputation()`` found.
package struct Recomputation: Equatable, Sendable {
    /// Where the stored state differs from the one recomputed from the change log.
    package var problems: [String]
    /// Why the recomputation could not run (``VerifyReport/recomputationSkipped``), or nil.
    package var skipped: String?
}

extension Replica {
    /// Everything ``verify()`` reads: these tables, and of `meta` only the stored digest
    /// (`VerifyTests` checks it). Its report is a function of them alone: its recomputation
    /// from the log also writes and reads the derived tables and `meta`, in a transaction it rolls
    /// back, but only after clearing them (the pin it writes there comes from `households`).
    public static let verifiedTables: [Table] = [
        Tables.households, Tables.children, Tables.registers, Tables.transactions, Tables.byTime, Tables.byChild,
        Tables.deferred, Tables.aggregates, Tables.conflicts, Tables.claims, Tables.grants, Tables.revocations,
        Tables.transfers, Tables.changes, Tables.chains, Tables.rejected, Tables.forged, Tables.vector, Tables.heads,
        Tables.forks, Tables.forkFloods, Tables.relay,
    ]
    /// The one key of `meta` that ``verify()`` reads: the stored digest.
    public static let verifiedMetaKey = Keys.digest
    /// What the second half of ``verify()`` (``verifyRecomputation()``) reads of the stored state,
    /// with the stored digest: the log, the household record (for the pin) and the stored tables it
    /// compares with the recomputation. Whatever else it reads it has cleared and rewritten first.
    /// Replicas that hold the same log and agree on these get the same answer
    /// (`ListingAndVerifyTests` checks the list).
    public static let recomputedFrom: [Table] = [
        Tables.changes, Tables.forks, Tables.forkFloods, Tables.households, Tables.forged, Tables.rejected,
    ]

    /// A full integrity check: every record decodes and validates, every index and per-child total
    /// matches the transactions, the stored digest matches one recomputed from the records, the
    /// change log is contiguous per origin and agrees with the version vector, and every change
    /// in the log is reflected in the merged state, and every signed head is its origin's member's
    /// signature over a change of the log. Then it recomputes the membership, the
    /// rejection set and the digest from the change log alone, in a write transaction that it
    /// rolls back (``verifyRecomputation()``), and reports where the stored state differs.
    /// Changes nothing.
    public func verify() throws -> VerifyReport {
        try verifyReads().adding(verifyRecomputation())
    }

    /// The second half of ``verify()``: the recomputation from the change log and where the stored
    /// state differs from it (``recomputationProblems()``). A function of ``recomputedFrom`` alone,
    /// so a caller verifying many replicas that hold one log (the simulator's final checks) can
    /// compute it once; `verify` is the product's one entry.
    package func verifyRecomputation() throws -> Recomputation {
        do {
            return Recomputation(problems: try recomputationProblems(), skipped: nil)
        } catch let error as LedgerError {
            throw error
        } catch {
            // The store's own failure to write (the scratch transaction needs free pages).
            return Recomputation(problems: [], skipped: "\(error)")
        }
    }

    // long-function: the list of checks made in one read transaction, in order.
    /// The first half of ``verify()``: the checks that read the store in one read transaction,
    /// the signed heads' last (``verifyHeadProblems()``; `headsToo` false leaves them out: what is
    /// left depends only on ``verifiedTables`` but the heads).
    package func verifyReads(headsToo: Bool = true) throws -> VerifyReport {
        try store.read { r in
            var report = VerifyReport()
            func problem(_ text: String) { if report.problems.count < 100 { report.problems.append(text) } }
            var digest = Digest256.zero

            if try r.count(Tables.households) > 1 { problem("the households table holds more than one household") }
            report.forged = try r.count(Tables.forged)
            (report.forgedHouseholds, report.secondGeneses) = try Self.forgedHouseholds(r)
            report.ownerKeyCompromised = try Self.ownerKeyCompromise(r)
            report.rejected = try r.count(Tables.rejected)
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
                    aggregates[t.childID, default: Aggregate()].add(t)
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

            // A member over the origin limit, or a key no longer a member: its claims are not in the
            // digest (``leaveFloodedClaimsOutOfDigest``).
            for (member, origins) in try Self.claimsByMember(r) where try Self.claimsCount(member, origins: origins.count, r) {
                for origin in origins { digest.insert([UInt8(ascii: "L")] + origin + member) }
            }
            for (table, tag) in [(Tables.grants, UInt8(ascii: "G")), (Tables.revocations, UInt8(ascii: "V")),
                                 (Tables.transfers, Self.transferDigestTag)] {
                try r.scan(table) { _, value in
                    digest.insert([tag] + value)
                    return true
                }
            }
            try r.scan(Tables.relay) { key, value in
                digest.insert(Self.relayDigestRecord(key: key, value: value))
                return true
            }
            report.digest = digest
            let storedDigest = Digest256(bytes: try r.get(Tables.meta, Keys.digest))
            if storedDigest != digest { problem("stored digest \(storedDigest?.description ?? "missing") does not match the records (\(digest))") }

            // Not `&report`: `problem` writes to `report` too, and an inout access for the whole call
            // would overlap with it (a fatal exclusivity violation as soon as a problem is found).
            let changes = try verifyChangeLog(r, problem: problem)
            report.changes = changes
            if headsToo { try verifyHeads(r, problem: problem) }
            return report
        }
    }

    /// The last checks of ``verifyReads(headsToo:)``: every signed head is its origin's member's
    /// signature over a change of the log.
    package func verifyHeadProblems() throws -> [String] {
        try store.read { r in
            var problems: [String] = []
            try verifyHeads(r) { problems.append($0) }
            return problems
        }
    }

    /// The thrown error that rolls back ``recomputationProblems()``'s transaction.
    private struct Rollback: Error {
        var problems: [String]
    }

    /// Recomputes the derived state from the change log (``rebuild(in:)``, the path a new
    /// revocation or owner transfer takes) in a write transaction that is then rolled back, and
    /// compares it with the stored state: the digest (records, claims, grants, revocations, owner
    /// transfers), the forged table and the rejected table, entry by entry. Identical logs must
    /// give identical state whatever the arrival order, so any difference is a problem: a bug in
    /// an incremental path, or a store edited behind the replica's back.
    ///
    /// The result depends only on what ``verifiedTables`` names: the log, and the stored household
    /// record for the pin (this replica's pin is the household it holds, or, with none, one that no
    /// genesis matches, since a replica without a household has forged every genesis in its log).
    func recomputationProblems() throws -> [String] {
        let verifier = self.verifier, preparer = self.preparer, now = clock.nowMillis()
        do {
            return try store.write { w -> [String] in
                func entries(_ table: Table) throws -> [[UInt8]: [UInt8]] {
                    var all: [[UInt8]: [UInt8]] = [:]
                    try w.scan(table) { key, value in all[key] = value; return true }
                    return all
                }
                let storedDigest = try w.get(Tables.meta, Keys.digest)
                let storedForged = try entries(Tables.forged), storedRejected = try entries(Tables.rejected)
                var pin = Keys.id(RecordID(high: .max, low: .max))
                var damaged = false
                try w.scan(Tables.households) { _, value in
                    if let h = try? RecordCodec.decodeHousehold(value) {
                        pin = HouseholdPin(id: h.id, owner: h.owner, ownerPending: false,
                                           genesis: h.owner.isEmpty ? nil : Membership.genesisHash(h)).encoded
                    } else { damaged = true }
                    return false
                }
                if damaged { throw Rollback(problems: []) }  // reported by the read checks
                try w.put(Tables.meta, Keys.household, pin)
                do {
                    try Self.withApplyContext(w, now: now, verifier: verifier, preparer: preparer) {
                        try Self.rebuild(in: $0)
                    }
                } catch let error as LedgerError {
                    throw Rollback(problems: ["the state could not be recomputed from the change log: \(error)"])
                }
                var problems: [String] = []
                let digest = try w.get(Tables.meta, Keys.digest)
                if digest != storedDigest {
                    problems.append("the state recomputed from the change log has digest \(Digest256(bytes: digest)?.description ?? "none"), the stored state \(Digest256(bytes: storedDigest)?.description ?? "none")")
                }
                for (table, what) in [(Tables.forged, "forged"), (Tables.rejected, "rejected")] {
                    let recomputed = try entries(table)
                    let stored = table == Tables.forged ? storedForged : storedRejected
                    guard recomputed != stored else { continue }
                    let extra = stored.keys.filter { recomputed[$0] == nil }.count
                    let missing = recomputed.keys.filter { stored[$0] == nil }.count
                    let changed = stored.keys.filter { recomputed[$0] != nil && recomputed[$0] != stored[$0] }.count
                    problems.append("the \(what) table holds \(stored.count) entries, the change log gives \(recomputed.count) (\(extra) not in it, \(missing) missing, \(changed) with another reason)")
                }
                throw Rollback(problems: problems)
            }
        } catch let rollback as Rollback {
            return rollback.problems
        }
    }

    // long-function: one pass over the log that checks versions, chains and the vector together, as they are stored.
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
        var versionsAtOpen = 0
        var flooded = Set<ReplicaID>()  // origins holding a sequence forked past the limit
        var lowestFork: [ReplicaID: UInt64] = [:]  // each forked origin's lowest forked sequence
        func closeLink() throws {
            guard open else { return }
            if versionsAtOpen > 1 && lowestFork[openOrigin] == nil { lowestFork[openOrigin] = openSequence }
            // A sequence forked past the limit links the flood, not its versions (``chainLink``).
            if versionsAtOpen > Limits.forkVersionsPerSequenceMax {
                flooded.insert(openOrigin)
                hasher = SHA256Hasher()
                hasher.update(previous)
                hasher.update(Self.forkFloodLink)
            }
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
                versionsAtOpen = 0
                hasher.update(previous)
            }
            versionsAtOpen += 1
            key.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[16...])) }  // the version
            let rejected = try r.get(Tables.rejected, key) != nil
            for op in change.operations where !rejected || op.isMembership {
                try checkReflected(op, change: change, logKey: key, r, problem: problem)
            }
            return true
        }
        try closeLink()
        // An origin is noted as a fork flood exactly when it holds a sequence with more versions
        // than the limit (the apply keeps one more than the limit, then notes it).
        var noted = Set<ReplicaID>()
        try r.scan(Tables.forkFloods) { key, _ in
            if let raw = Bytes.u64(key), key.count == 8 { noted.insert(ReplicaID(raw)) } else { problem("fork flood entry is damaged") }
            return true
        }
        for origin in flooded.subtracting(noted).sorted() { problem("\(origin) forked a change past the limit but is not noted as a fork flood") }
        for origin in noted.subtracting(flooded).sorted() { problem("\(origin) is noted as a fork flood but forked no change past the limit") }
        // The forks table names each forked origin's lowest forked sequence, and no other.
        var forks: [ReplicaID: UInt64] = [:]
        try r.scan(Tables.forks) { key, value in
            if let raw = Bytes.u64(key), key.count == 8, let sequence = Bytes.u64(value) { forks[ReplicaID(raw)] = sequence } else { problem("fork entry is damaged") }
            return true
        }
        if forks != lowestFork { problem("the forks table names \(forks.count) forked origins, the change log \(lowestFork.count) (or other sequences)") }
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
        case .grant, .revoke, .claim, .transferOwner, .relayGrant, .relayRevoke, .relayEpoch, .relayMemberKey:
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

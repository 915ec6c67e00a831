import KidLedgerDomain

/// What happened to one change offered to ``Replica/apply(_:in:now:)``.
public enum ApplyOutcome: Equatable, Sendable {
    /// New: written and merged.
    case applied
    /// Already held (this exact version): nothing written.
    case duplicate
    /// Another version of a change already held under the same (origin, sequence): its origin
    /// forked its history (a restore from stale files). Kept and merged; the chains changed.
    case forkedVersion
    /// Its predecessor from the same origin is missing: nothing written; it will be resent.
    case gap
}

extension Replica {
    /// Merges one change into the state inside write transaction `w`. Idempotent: a change whose
    /// sequence is already covered is a no-op; one that would leave a gap is refused.
    ///
    /// - Throws: ``LedgerError/invalid(_:)`` for a change that breaks a domain rule (decoded
    ///   changes are already checked; this guards changes built in memory).
    ///
    /// `prepared` is ``PreparedChange/init(_:)`` of `change` when the caller computed it ahead.
    /// A revocation recomputes the state from the log, with `cache`'s prepared changes if given.
    static func apply(_ change: Change, prepared: PreparedChange? = nil, in w: any KeyValueWriter, now: Int64,
                      verifier: any SignatureVerifier = RejectingVerifier(),
                      cache: PreparationCache? = nil) throws -> ApplyOutcome {
        guard change.hlc.millis >= 0, change.hlc.millis <= HLC.millisMax else {
            throw LedgerError.invalid("change time \(change.hlc.millis) out of range")
        }
        guard change.sequence >= 1, !change.operations.isEmpty,
              change.operations.count <= Limits.operationsPerChangeMax else {
            throw LedgerError.invalid("change shape")
        }
        // A prepared change has had its operations checked (a pure function of the change).
        if prepared?.operationsValid != true {
            for op in change.operations {
                if let problem = problem(with: op) { throw LedgerError.invalid(problem) }
            }
        }
        let originKey = Keys.origin(change.origin)
        let held = Bytes.u64(try w.get(Tables.vector, originKey)) ?? 0
        let encoded = prepared?.encoded ?? RecordCodec.encode(change)
        let version = prepared?.version ?? Keys.version(encoded)
        let logKey = prepared?.logKey ?? Keys.change(change.origin, change.sequence, version: version)
        let outcome: ApplyOutcome
        if change.sequence <= held {
            if try w.get(Tables.changes, logKey) != nil { return .duplicate }
            try w.put(Tables.changes, logKey, encoded)
            try rechain(change.origin, from: change.sequence, through: held, in: w)
            outcome = .forkedVersion
        } else if change.sequence == held + 1 {
            try w.put(Tables.changes, logKey, encoded)
            // The log holds versions of an origin only up to its vector entry, so this version is
            // the only one at the new sequence: its link needs no scan of the log.
            let previous = try previousLink(change.origin, change.sequence, w)
            // The preparing thread usually computed this link from the link it predicted here.
            let link = prepared?.chain.flatMap { $0.previous == previous ? $0.link : nil }
                ?? cache?.link(after: previous, onlyVersion: version)
                ?? Self.link(after: previous, onlyVersion: version)
            try w.put(Tables.chains, Keys.change(change.origin, change.sequence), link)
            try w.put(Tables.vector, originKey, Bytes.u64(change.sequence))
            outcome = .applied
        } else {
            return .gap
        }
        try storeHLC(try lastHLC(w).receive(change.hlc, now: now), w)

        var digest = try stateDigest(w)
        let newRevocation = try applyMembership(of: change, version: version, in: w, verifier: verifier, digest: &digest)
        if newRevocation {
            try storeStateDigest(digest, w)
            // A revocation changes which past changes count: recompute the merged state.
            try rebuild(in: w, verifier: verifier, cache: cache)
        } else {
            try applyLedger(of: change, version: version, in: w, digest: &digest, prepared: prepared, cache: cache)
            try storeStateDigest(digest, w)
        }
        return outcome
    }

    /// The state digest held in `w` (zero when none is stored or it is unreadable): decoded once
    /// per batch when `w` is a batch writer.
    static func stateDigest(_ w: any KeyValueWriter) throws -> Digest256 {
        if let batch = w.batchWriter { return try batch.stateDigest() }
        return Digest256(bytes: try w.get(Tables.meta, Keys.digest)) ?? .zero
    }

    /// Stores the state digest in `w`: encoded once per batch when `w` is a batch writer.
    static func storeStateDigest(_ digest: Digest256, _ w: any KeyValueWriter) throws {
        if let batch = w.batchWriter { return batch.setStateDigest(digest) }
        try w.put(Tables.meta, Keys.digest, digest.bytes)
    }

    /// What breaks a domain rule in `op` (a register value that does not fit its field, an invalid
    /// transaction), or nil.
    static func problem(with op: Operation) -> String? {
        switch op {
        case .setField(_, let field, let value, _) where !value.fits(field): "value for \(field)"
        case .addTransaction(let t): Validation.problem(with: t)
        default: nil
        }
    }

    /// Applies the ledger (non-membership) operations of a change, unless the revocation rule
    /// rejects the change: its author was revoked and the revocation had not seen it. The state
    /// digest is held by the caller (`digest`).
    /// `prepared` is the change prepared ahead (its transactions' records and hashes); `cache`
    /// remembers register hashes across replicas.
    static func applyLedger(of change: Change, version: [UInt8], in w: any KeyValueWriter, digest: inout Digest256,
                            prepared: PreparedChange? = nil, cache: PreparationCache? = nil) throws {
        if let reason = try rejection(of: change, in: w) {
            try w.put(Tables.rejected, Keys.change(change.origin, change.sequence, version: version), Array(reason.utf8))
            return
        }
        for (i, op) in change.operations.enumerated() where !op.isMembership {
            try apply(op, stamp: Stamp(hlc: change.hlc, origin: change.origin), in: w, digest: &digest,
                      prepared: prepared?.operation(at: i), cache: cache)
        }
    }

    /// Recomputes the hash chain of `origin` for sequences `from...through` from the versions in
    /// the log: chain(s) = SHA-256(chain(s − 1) ‖ sorted version hashes at s), first 16 bytes.
    static func rechain(_ origin: ReplicaID, from: UInt64, through: UInt64, in w: any KeyValueWriter) throws {
        var previous = from <= 1 ? [UInt8](repeating: 0, count: 16)
            : (try w.get(Tables.chains, Keys.change(origin, from - 1)) ?? [UInt8](repeating: 0, count: 16))
        var sequence = from
        while sequence <= through {
            let link = try chainLink(origin, sequence, previous: previous, w)
            try w.put(Tables.chains, Keys.change(origin, sequence), link)
            previous = link
            sequence += 1
        }
    }

    /// The link before `sequence` of `origin`: sixteen zeros at the first sequence (or when it is
    /// missing).
    static func previousLink(_ origin: ReplicaID, _ sequence: UInt64, _ r: any KeyValueReader) throws -> [UInt8] {
        guard sequence > 1 else { return zeroLink }
        // Usually the link this batch wrote last for the origin: no key to build.
        if let newest = r.batchWriter?.newestLink(origin, at: sequence - 1) { return newest }
        return try r.get(Tables.chains, Keys.change(origin, sequence - 1)) ?? zeroLink
    }

    static let zeroLink = [UInt8](repeating: 0, count: 16)

    /// The link after `previous` when `version` is the only version held at its sequence.
    static func link(after previous: [UInt8], onlyVersion version: [UInt8]) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(previous)
        hasher.update(version)
        return hasher.finalizeWords().prefix(16)
    }

    static func chainLink(_ origin: ReplicaID, _ sequence: UInt64, previous: [UInt8], _ r: any KeyValueReader) throws -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(previous)
        try r.scan(Tables.changes, prefix: Keys.change(origin, sequence)) { key, _ in
            hasher.update(Array(key.suffix(8)))
            return true
        }
        return Array(hasher.finalize().prefix(16))
    }

    static func apply(_ op: Operation, stamp: Stamp, in w: any KeyValueWriter, digest: inout Digest256,
                      prepared: PreparedOperation? = nil, cache: PreparationCache? = nil) throws {
        switch op {
        case .createHousehold(let h):
            let payload = RecordCodec.encodeRecord(h)
            _ = try mergeImmutable(Tables.households, id: h.id, payload: payload, kind: Conflict.household, in: w,
                                   digestRecord: { DigestRecord.household(try RecordCodec.decodeHousehold($0)) },
                                   digest: &digest)
        case .createChild(let c):
            let payload = RecordCodec.encodeRecord(c)
            let isNew = try w.get(Tables.children, Keys.id(c.id)) == nil
            _ = try mergeImmutable(Tables.children, id: c.id, payload: payload, kind: Conflict.child, in: w,
                                   digestRecord: { DigestRecord.child(try RecordCodec.decodeChild($0)) },
                                   digest: &digest)
            if isNew { try releaseDeferred(child: c.id, in: w, cache: cache) }
        case .setField(let entity, let field, let value, let base):
            let write = RegisterWrite(stamp: stamp, base: base, value: value)
            try mergeRegister(prepared?.register ?? PreparedRegister(write, entity: entity, field: field),
                              value: write, in: w, digest: &digest, cache: cache)
        case .addTransaction(let t):
            try mergeTransaction(t, in: w, digest: &digest, prepared: prepared?.transaction)
        case .grant, .revoke, .claim:
            break  // applied by applyMembership
        }
    }

    /// Merges an immutable creation record. Same id, different payload: the smaller canonical
    /// payload wins everywhere and the loser is kept in the conflicts table. Returns whether the
    /// record is new.
    static func mergeImmutable(_ table: Table, id: RecordID, payload: [UInt8], kind: UInt8,
                               in w: any KeyValueWriter, digestRecord: ([UInt8]) throws -> [UInt8],
                               digest: inout Digest256) throws -> Bool {
        let key = Keys.id(id)
        guard let existing = try w.get(table, key) else {
            try w.put(table, key, payload)
            digest.insert(try digestRecord(payload))
            return true
        }
        if existing == payload { return false }
        let (winner, loser) = KeyBytes.compare(payload, existing) < 0 ? (payload, existing) : (existing, payload)
        try w.put(Tables.conflicts, Keys.conflict(kind: kind, id: id, payload: loser), loser)
        if winner != existing {
            digest.remove(try digestRecord(existing))
            digest.insert(try digestRecord(winner))
            try w.put(table, key, winner)
        }
        return false
    }

    /// Merges a register write: the highest (HLC, origin, value bytes) wins. Every write is also
    /// kept in the register's history with the stamp it overwrote (its base), from which the
    /// conflict journal is derived (see ``Replica/fieldConflicts(entity:)``).
    /// `prepared` is the write's bytes and hash (`PreparedRegister(write, ...)`, made ahead or
    /// now); `cache` remembers the hashes of register records across replicas.
    static func mergeRegister(_ prepared: PreparedRegister, value write: RegisterWrite,
                              in w: any KeyValueWriter, digest: inout Digest256, cache: PreparationCache? = nil) throws {
        let key = prepared.key
        // The history is keyed by the write's stamp. Two different writes share a stamp only when
        // their origin forked (restored from a stale copy, it wrote again under a sequence number
        // its peers held, at the same clock reading): the entry with the greater bytes stays, so
        // every replica keeps the same one whatever order it merged them in.
        let held = try w.get(Tables.registerHistory, prepared.historyKey)
        if held.map({ KeyBytes.compare($0, prepared.historyValue) < 0 }) ?? true {
            try w.put(Tables.registerHistory, prepared.historyKey, prepared.historyValue)
        }
        if let raw = try w.get(Tables.registers, key) {
            let current = try StoredRegister.decode(raw)
            let incoming = StoredRegister(stamp: write.stamp, value: write.value)
            guard incoming != current, incoming.wins(over: current) else { return }
            let record = DigestRecord.register(key: key, stored: raw)
            if let cache { digest.remove(hashed: cache.registerHash(record)) } else { digest.remove(record) }
        }
        try w.put(Tables.registers, key, prepared.stored)
        digest.insert(hashed: prepared.recordHash)
    }

    /// Merges a transaction into the grow-only set.
    static func mergeTransaction(_ t: LedgerTransaction, in w: any KeyValueWriter, digest: inout Digest256,
                                 prepared: PreparedTransaction? = nil) throws {
        let key = prepared?.key ?? Keys.id(t.id)
        let payload = prepared?.payload ?? RecordCodec.encode(t)
        guard let existing = try w.get(Tables.transactions, key) else {
            try w.put(Tables.transactions, key, payload)
            if let prepared {
                digest.insert(hashed: prepared.recordHash)
            } else {
                digest.insert(tag: DigestRecord.transactionTag, payload)
            }
            try place(t, in: w, prepared: prepared)
            return
        }
        if existing == payload { return }
        let old = try decodeStoredTransaction(existing)
        let (winner, loser) = KeyBytes.compare(payload, existing) < 0 ? (payload, existing) : (existing, payload)
        // Two devices undoing the same original write the same id with different notes or times:
        // that is the designed merge, not a conflict worth alarming anyone about. The kind
        // depends only on the losing payload, so every replica counts the same conflicts.
        let losing = try decodeStoredTransaction(loser)
        try w.put(Tables.conflicts, Keys.conflict(kind: losing.isUndo ? Conflict.undoMerge : Conflict.transaction,
                                                 id: t.id, payload: loser), loser)
        guard winner != existing else { return }
        try unplace(old, in: w)
        digest.remove(tag: DigestRecord.transactionTag, existing)
        digest.insert(tag: DigestRecord.transactionTag, winner)
        try w.put(Tables.transactions, key, winner)
        try place(t, in: w)
    }

    /// Indexes a winning transaction and adds it to its child's aggregate, or defers it when the
    /// child has not arrived yet.
    /// `cache` remembers id hashes across replicas (when `prepared` has none).
    static func place(_ t: LedgerTransaction, in w: any KeyValueWriter, prepared: PreparedTransaction? = nil,
                      cache: PreparationCache? = nil) throws {
        guard try w.get(Tables.children, prepared?.childKey ?? Keys.id(t.childID)) != nil else {
            try w.put(Tables.deferred, Keys.deferred(t), [])
            return
        }
        try w.put(Tables.byTime, prepared?.byTimeKey ?? Keys.byTime(t), [])
        try w.put(Tables.byChild, prepared?.byChildKey ?? Keys.byChild(t), [])
        try Aggregate.update(t.childID, in: w) { $0.add(t, idMix: prepared?.idMix ?? cache?.idMix(t.id)) }
    }

    /// The inverse of ``place(_:in:)``.
    static func unplace(_ t: LedgerTransaction, in w: any KeyValueWriter) throws {
        guard try w.get(Tables.children, Keys.id(t.childID)) != nil else {
            try w.delete(Tables.deferred, Keys.deferred(t))
            return
        }
        try w.delete(Tables.byTime, Keys.byTime(t))
        try w.delete(Tables.byChild, Keys.byChild(t))
        try Aggregate.update(t.childID, in: w) { $0.remove(t) }
    }

    /// Applies every deferred transaction of a child that has just arrived.
    static func releaseDeferred(child: RecordID, in w: any KeyValueWriter, cache: PreparationCache? = nil) throws {
        var ids: [RecordID] = []
        try w.scan(Tables.deferred, prefix: Keys.id(child)) { key, _ in
            ids.append(try Keys.trailingID(key))
            return true
        }
        for id in ids {
            guard let raw = try w.get(Tables.transactions, Keys.id(id)) else {
                throw LedgerError.corrupted("deferred transaction \(id) missing")
            }
            let t = try decodeStoredTransaction(raw)
            try w.delete(Tables.deferred, Keys.deferred(t))
            try place(t, in: w, cache: cache)
        }
    }

    static func decodeStoredTransaction(_ raw: [UInt8]) throws -> LedgerTransaction {
        do { return try RecordCodec.decodeTransaction(raw) } catch {
            throw LedgerError.corrupted("transaction record: \(error)")
        }
    }
}

/// Kinds of same-id conflicts, the first byte of a conflicts-table key.
enum Conflict {
    static let household: UInt8 = 1
    static let child: UInt8 = 2
    static let transaction: UInt8 = 3
    /// Two undo entries for one original: merged by design, not counted as a conflict.
    static let undoMerge: UInt8 = 4
}


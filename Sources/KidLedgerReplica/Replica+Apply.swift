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
    // long-function: the apply path in its order (checks, log, chain, clock, membership, ledger) with its paired assertions, readable in one place.
    /// Merges one prepared change into the state held by `context`. Idempotent: a change whose
    /// sequence is already covered is a no-op; one that would leave a gap is refused.
    ///
    /// - Throws: ``LedgerError/invalid(_:)`` for a change that breaks a domain rule (decoded
    ///   changes are already checked; this guards changes built in memory).
    ///
    /// `prepared` is the context preparer's ``PreparedChange`` of `change`.
    static func apply(_ change: Change, _ prepared: PreparedChange, in context: ApplyContext) throws -> ApplyOutcome {
        guard change.hlc.millis >= 0, change.hlc.millis <= HLC.millisMax else {
            throw LedgerError.invalid("change time \(change.hlc.millis) out of range")
        }
        guard change.sequence >= 1, !change.operations.isEmpty,
              change.operations.count <= Limits.operationsPerChangeMax else {
            throw LedgerError.invalid("change shape")
        }
        if let problem = prepared.problem { throw LedgerError.invalid(problem) }
        let w = context.store
        let held = try context.heldSequence(change.origin)
        let outcome: ApplyOutcome
        var crossedForkLimit = false
        var forkMovesCover = false
        if change.sequence <= held {
            if try w.get(Tables.changes, prepared.logKey) != nil { return .duplicate }
            var versions: [[UInt8]] = []  // at most one more than the limit
            try w.scan(Tables.changes, prefix: Keys.change(change.origin, change.sequence)) { key, _ in
                versions.append(Array(key.suffix(8)))
                return true
            }
            // Past ``Limits/forkVersionsPerSequenceMax`` one version more is kept (the evidence)
            // and the rest change nothing (its member's ledger changes are rejected already, and
            // the chain there no longer depends on which versions are held: ``chainLink``): like
            // a duplicate.
            if versions.count > Limits.forkVersionsPerSequenceMax { return .duplicate }
            if versions.count == Limits.forkVersionsPerSequenceMax {
                try w.put(Tables.forkFloods, Keys.origin(change.origin), [])
                crossedForkLimit = true
            }
            if try noteFork(of: change.origin, at: change.sequence, held: versions, in: w) {
                context.forgetStandings()
                forkMovesCover = try forkUncovers(change.origin, from: change.sequence, in: context)
            }
            try w.put(Tables.changes, prepared.logKey, prepared.encoded)
            try rechain(change.origin, from: change.sequence, through: held, in: context)
            outcome = .forkedVersion
        } else if change.sequence == held + 1 {
            assert((try? w.get(Tables.changes, prepared.logKey)) == nil, "a change above the held sequence is in the log")
            try w.put(Tables.changes, prepared.logKey, prepared.encoded)
            // The log holds versions of an origin only up to its vector entry, so this version is
            // the only one at the new sequence: its link needs no scan of the log.
            let previous = try context.chainLink(before: change.sequence, of: change.origin)
            // The preparing thread predicted the link from the link it expected here; a
            // prediction made from another previous link does not count.
            let link: [UInt8]
            if let chain = prepared.chain, chain.previous == previous {
                link = chain.link
            } else {
                link = context.preparer.link(after: previous, onlyVersion: prepared.version)
            }
            try context.setChainLink(link, of: change.origin, at: change.sequence)
            context.setHeldSequence(change.sequence, of: change.origin)
            assert((try? w.get(Tables.changes, prepared.logKey)) == prepared.encoded, "the applied change is not in the log")
            assert((try? context.heldSequence(change.origin)) == change.sequence, "the held sequence did not advance by one")
            assert((try? context.chainLink(change.origin, at: change.sequence)) == link, "the chain does not end in the new link")
            outcome = .applied
        } else {
            return .gap
        }
        context.setLastHLC(try context.lastHLC().receive(change.hlc, now: context.now))

        var digest = try context.stateDigest()
        // Membership first: a change's own claim names the author of the children it creates.
        let membershipChanged = try applyMembership(of: change, version: prepared.version, in: context, digest: &digest)
        if try noteChildCreations(of: change, in: context) || membershipChanged || crossedForkLimit || forkMovesCover {
            context.setStateDigest(digest)
            // A revocation, an owner transfer, a member crossing a per-member limit or a fork
            // below what a revocation or transfer saw changes which past changes and owner-signed
            // records count: recompute the merged state.
            try rebuild(in: context)
        } else {
            try applyLedger(of: change, prepared, version: prepared.version, in: context, digest: &digest)
            context.setStateDigest(digest)
        }
        return outcome
    }

    /// Whether `origin`'s new lowest fork at `sequence` takes changes it already judged out of
    /// what a version vector covers (``covered(_:_:seenUpTo:forkedFrom:)``): its member is revoked
    /// with a cut at or above it there, or an owner transfer saw it (a former owner's grant or
    /// revocation carried there may no longer count).
    static func forkUncovers(_ origin: ReplicaID, from sequence: UInt64, in context: ApplyContext) throws -> Bool {
        if let member = try context.claim(origin), let cut = try revokedSeen(member, context.store),
           (cut[origin] ?? 0) >= sequence {
            return true
        }
        guard let ownership = try ownership(context.store, context.queries) else { return false }
        return ownership.terms.contains { ($0.endedBy?.seen[origin] ?? 0) >= sequence }
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

    /// Applies the ledger (non-membership) operations of a change, unless the membership rule
    /// rejects the change (``rejection(of:in:)``); a change of membership operations only has
    /// nothing to reject. The state digest is held by the caller (`digest`).
    /// Notes the children `change` creates under its author (``Tables/childCreations``), whether
    /// the rule lets them count or not. Returns whether its author now creates more than
    /// ``Limits/childrenPerMemberMax``, for the first time: its changes judged so far counted,
    /// and now none does (the caller recomputes the state).
    static func noteChildCreations(of change: Change, in context: ApplyContext) throws -> Bool {
        guard change.operations.contains(where: { if case .createChild = $0 { true } else { false } }),
              let member = try context.claim(change.origin) else { return false }
        var crossed = false
        for case .createChild(let child) in change.operations {
            if try context.noteChildCreation(child.id, by: member),
               try context.childCount(of: member) == Limits.childrenPerMemberMax + 1 {
                crossed = true
            }
        }
        return crossed
    }

    static func applyLedger(of change: Change, _ prepared: PreparedChange, version: [UInt8], in context: ApplyContext,
                            digest: inout Digest256) throws {
        if change.operations.contains(where: { !$0.isMembership }), let reason = try rejection(of: change, in: context) {
            try context.store.put(Tables.rejected, Keys.change(change.origin, change.sequence, version: version), Array(reason.utf8))
            return
        }
        for (i, op) in change.operations.enumerated() where !op.isMembership {
            try apply(op, stamp: Stamp(hlc: change.hlc, origin: change.origin), prepared: prepared.operation(at: i),
                      in: context, digest: &digest)
        }
    }

    /// Recomputes the hash chain of `origin` for sequences `from...through` from the versions in
    /// the log: chain(s) = SHA-256(chain(s − 1) ‖ sorted version hashes at s), first 16 bytes.
    static func rechain(_ origin: ReplicaID, from: UInt64, through: UInt64, in context: ApplyContext) throws {
        precondition(from >= 1, "a chain from sequence 0")
        precondition(from <= through, "an empty range to rechain")
        var previous = try context.chainLink(before: from, of: origin)
        var sequence = from
        while sequence <= through {
            let link = try chainLink(origin, sequence, previous: previous, context.store)
            try context.setChainLink(link, of: origin, at: sequence)
            previous = link
            sequence += 1
        }
        assert((try? context.chainLink(origin, at: through)) == previous, "the chain does not end in the last link rechained")
    }

    static let zeroLink = [UInt8](repeating: 0, count: 16)

    static func chainLink(_ origin: ReplicaID, _ sequence: UInt64, previous: [UInt8], _ r: any KeyValueReader) throws -> [UInt8] {
        var versions: [[UInt8]] = []
        try r.scan(Tables.changes, prefix: Keys.change(origin, sequence)) { key, _ in
            versions.append(Array(key.suffix(8)))
            return true
        }
        var hasher = SHA256Hasher()
        hasher.update(previous)
        // A sequence forked past the limit: replicas may hold different versions there (each
        // keeps the first one more than the limit it received), so the link names the flood
        // instead of them, and their chains agree once each holds that many.
        if versions.count > Limits.forkVersionsPerSequenceMax {
            hasher.update(Self.forkFloodLink)
        } else {
            for version in versions { hasher.update(version) }
        }
        return Array(hasher.finalize().prefix(16))
    }

    /// What a chain link hashes in place of the versions at a sequence forked past
    /// ``Limits/forkVersionsPerSequenceMax``.
    static let forkFloodLink = Array("kidledger fork flood".utf8)

    /// Applies one operation; `prepared` is its prepared form (present for every transaction
    /// and register write).
    static func apply(_ op: Operation, stamp: Stamp, prepared: PreparedOperation?, in context: ApplyContext,
                      digest: inout Digest256) throws {
        switch (op, prepared) {
        case (.createHousehold(let h), _):
            let key = Keys.id(h.id)
            _ = try mergeImmutable(id: h.id, payload: RecordCodec.encodeRecord(h), origin: stamp.origin,
                                   existing: try context.store.get(Tables.households, key), kind: Conflict.household, in: context,
                                   digestRecord: { DigestRecord.household(try RecordCodec.decodeHousehold($0)) },
                                   digest: &digest, write: { try context.store.put(Tables.households, key, $0) })
        case (.createChild(let c), _):
            let existing = try context.child(c.id)
            _ = try mergeImmutable(id: c.id, payload: RecordCodec.encodeRecord(c), origin: stamp.origin, existing: existing,
                                   kind: Conflict.child, in: context, digestRecord: { DigestRecord.child(try RecordCodec.decodeChild($0)) },
                                   digest: &digest, write: { try context.setChild(c.id, $0) })
            if existing == nil { try releaseDeferred(child: c.id, in: context) }
        case (.setField(_, _, let value, let base), .register(let register)?):
            try mergeRegister(register, value: RegisterWrite(stamp: stamp, base: base, value: value), in: context, digest: &digest)
        case (.addTransaction(let t), .transaction(let transaction)?):
            try mergeTransaction(t, transaction, origin: stamp.origin, in: context, digest: &digest)
        case (.setField, _), (.addTransaction, _):
            preconditionFailure("a register write or transaction applied unprepared")
        case (.grant, _), (.revoke, _), (.claim, _), (.transferOwner, _):
            break  // applied by applyMembership
        }
    }

    /// Merges an immutable creation record written under `origin` (`existing`: the one stored,
    /// if any; `write` stores the winner; `Tables.creators` holds the winner's origin). Same id,
    /// different payload: ``settleSameID(kind:id:incoming:existing:in:)`` decides, by author
    /// first, and keeps the loser with its author in the conflicts table. Returns whether the
    /// record is new.
    static func mergeImmutable(id: RecordID, payload: [UInt8], origin: ReplicaID, existing: [UInt8]?, kind: UInt8,
                               in context: ApplyContext, digestRecord: ([UInt8]) throws -> [UInt8], digest: inout Digest256,
                               write: ([UInt8]) throws -> Void) throws -> Bool {
        let creator = Keys.id(id)
        guard let existing else {
            try write(payload)
            try context.store.put(Tables.creators, creator, Bytes.u64(origin.rawValue))
            digest.insert(try digestRecord(payload))
            return true
        }
        guard let held = Bytes.u64(try context.store.get(Tables.creators, creator)) else {
            throw LedgerError.corrupted("record \(id) without its author")
        }
        switch try settleSameID(kind: { _ in kind }, id: id, incoming: AuthoredVersion(payload: payload, origin: origin),
                                existing: AuthoredVersion(payload: existing, origin: ReplicaID(held)), in: context) {
        case .unchanged:
            break
        case .author(let author):
            try context.store.put(Tables.creators, creator, Bytes.u64(author.rawValue))
        case .replaced(let author):
            digest.remove(try digestRecord(existing))
            digest.insert(try digestRecord(payload))
            try write(payload)
            try context.store.put(Tables.creators, creator, Bytes.u64(author.rawValue))
        }
        return false
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


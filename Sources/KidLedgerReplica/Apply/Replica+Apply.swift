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
    /// Not stored, in a household with an owner: it opens an origin whose claim names no member
    /// (a stranger's key, a grant not here yet), no valid claim, or a member holding
    /// ``Limits/originsPerMemberStoredMax`` origins already (``Replica/admits(_:in:)``).
    /// Offered again by its sender in later sessions (and taken once its grant is here).
    case notAdmitted
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
        // A received change opening an origin: only a member's claim makes it (docs/SECURITY.md,
        // "Only members take space").
        if held == 0 && change.sequence == 1 && context.admitsMembersOnly, try !admits(change, in: context) {
            return .notAdmitted
        }
        let outcome: ApplyOutcome
        var crossedForkLimit = false
        var forkMovesCover = false
        if change.sequence <= held {
            if try w.get(Tables.changes, prepared.logKey) != nil { return .duplicate }
            if context.admitsMembersOnly, try overByteLimit(change.origin, sequence: change.sequence, in: context) { return .notAdmitted }
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
                // Only a member's first flooded origin changes what counts: recomputed once per
                // member, not once per origin it floods.
                if let member = try context.claim(change.origin) { crossedForkLimit = try !forksFlooded(by: member, in: context) }
                try w.put(Tables.forkFloods, Keys.origin(change.origin), [])
            }
            if try noteFork(of: change.origin, at: change.sequence, held: versions, in: w) {
                context.forgetStandings()
                forkMovesCover = try forkUncovers(change.origin, from: change.sequence, in: context)
            }
            try w.put(Tables.changes, prepared.logKey, prepared.encoded)
            try rechain(change.origin, from: change.sequence, through: held, in: context)
            outcome = .forkedVersion
        } else if change.sequence == held + 1 {
            if held > 0 && context.admitsMembersOnly, try overByteLimit(change.origin, sequence: change.sequence, in: context) { return .notAdmitted }
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
                link = Replica.chainLink(after: previous, onlyVersion: prepared.version)
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
        let crossedByteLimit = try countStoredBytes(of: change, prepared.encoded.count, in: context)
        if try noteChildCreations(of: change, in: context) || membershipChanged || crossedForkLimit || forkMovesCover || crossedByteLimit
            || context.recomputePending {
            context.setStateDigest(digest)
            // A revocation, an owner transfer, a member crossing a per-member limit or a fork
            // below what a revocation or transfer saw changes which past changes and owner-signed
            // records count: the merged state is recomputed, once, when the transaction's changes
            // are all applied (``withApplyContext(_:now:verifier:preparer:_:)``), so a
            // batch costs one recomputation at most, whatever it holds.
            context.recomputePending = true
        } else {
            try applyLedger(of: change, prepared, version: prepared.version, in: context, digest: &digest)
            context.setStateDigest(digest)
        }
        return outcome
    }

    /// Whether a received change that opens its origin (its first change, of an origin not held)
    /// may be stored, in a household with an owner: it carries a valid claim of its origin, the
    /// claim's key is a member (the owner, a former owner, granted, or named the new owner by an
    /// owner transfer the recovery key signed: a revoked member stays one here, its changes are
    /// judged by its revocation), and that key holds fewer than
    /// ``Limits/originsPerMemberStoredMax`` origins here. Anything else would let a stranger's key
    /// (or one whose grant is not here yet: its sender offers it again later) or a flooding member
    /// make this replica store and pass on changes without bound. Before the household is here,
    /// nothing can be judged, and every change is taken (a joining replica receives the owner's
    /// origins first).
    static func admits(_ change: Change, in context: ApplyContext) throws -> Bool {
        guard let ownership = try ownership(context.store) else { return true }
        var member: [UInt8]?
        for case .claim(let c) in change.operations where c.origin == change.origin {
            if Membership.claimProblem(c, origin: change.origin, sequence: 1, household: ownership.household,
                                       verifier: context.verifier) == nil {
                member = c.member
                break
            }
        }
        guard let member, try ownership.hasOwned(member) || isMember(member, ownerKey: ownership.current, context.store)
                || namedByRecovery(member, carriedBy: change, ownership, in: context) else {
            return false
        }
        // The current owner is exempt from both limits: which origins of a capped key a replica
        // keeps depends on arrival order, and an owner's grant under an origin one replica refused
        // would count on another only. Whoever holds the owner key can grant keys without bound
        // anyway. So is what a transfer kept of a former owner (``keptByTransfer``).
        if member == ownership.current || keptByTransfer(change.origin, sequence: change.sequence, ownership) { return true }
        return try context.claimCount(of: member) < Limits.originsPerMemberStoredMax
            && context.storedBytes(of: member) <= Limits.bytesPerMemberMax
    }

    /// Whether `origin`'s member (not the current owner) holds more than
    /// ``Limits/bytesPerMemberMax`` bytes of change log here: its later changes are refused,
    /// except those a transfer kept (``keptByTransfer``).
    static func overByteLimit(_ origin: ReplicaID, sequence: UInt64, in context: ApplyContext) throws -> Bool {
        guard let member = try context.claim(origin), try context.storedBytes(of: member) > Limits.bytesPerMemberMax,
              let ownership = try ownership(context.store) else { return false }
        return member != ownership.current && !keptByTransfer(origin, sequence: sequence, ownership)
    }

    /// Whether a transfer that ended an owner's term names a change of `origin` (operation 9:
    /// the former owner's grants and revocations it kept) and `sequence` is within what it saw of
    /// that origin. Such changes are stored whatever their member's limits, so every replica holds
    /// what the transfer kept; the transfer's `seen` bounds them.
    static func keptByTransfer(_ origin: ReplicaID, sequence: UInt64, _ ownership: Ownership) -> Bool {
        ownership.terms.contains { term in
            guard let transfer = term.endedBy, let named = transfer.seenChanges,
                  sequence <= transfer.seen[origin] ?? 0 else { return false }
            return OwnerTransfer.namesOrigin(named, origin)
        }
    }

    /// Counts `bytes` (the stored encoding of `change`) for the member its origin's claim names,
    /// if any; returns whether that takes a member other than the current owner past
    /// ``Limits/bytesPerMemberMax`` just now (its changes then stop counting: recomputed).
    static func countStoredBytes(of change: Change, _ bytes: Int, in context: ApplyContext) throws -> Bool {
        guard let member = try context.claim(change.origin), try context.addStoredBytes(bytes, to: member) else { return false }
        return try ownership(context.store)?.current != member
    }

    /// Whether an owner transfer signed by the household's recovery key names `member` as the new
    /// owner: one `change` carries (a recovering laptop's first change carries its transfer), or
    /// one stored (the loser of two transfers at one epoch too).
    static func namedByRecovery(_ member: [UInt8], carriedBy change: Change, _ ownership: Ownership,
                                in context: ApplyContext) throws -> Bool {
        guard !ownership.recovery.isEmpty else { return false }
        for case .transferOwner(let t) in change.operations where t.newOwner == member {
            let message = Membership.transferMessage(household: ownership.household, t)
            if context.verifier.isValid(signature: t.signature, message: message, key: ownership.recovery) { return true }
        }
        var named = false
        try context.store.scan(Tables.transfers) { _, value in
            var reader = ByteReader(value)
            if case .transferOwner(let t)? = try? RecordCodec.decodeOperation(&reader) { named = t.newOwner == member }
            return !named
        }
        return named
    }

    /// Whether `origin`'s new lowest fork at `sequence` takes changes it already judged out of
    /// what a version vector covers (``covered(_:_:seenUpTo:forkedFrom:)``): its member is revoked
    /// with a cut at or above it there, or an owner transfer saw it (a former owner's grant or
    /// revocation carried there may no longer count). A transfer that names the changes it saw
    /// (``OwnerTransfer/seenChanges``) is not moved by a fork.
    static func forkUncovers(_ origin: ReplicaID, from sequence: UInt64, in context: ApplyContext) throws -> Bool {
        if let member = try context.claim(origin), let cut = try revokedSeen(member, context.store),
           (cut[origin] ?? 0) >= sequence {
            return true
        }
        guard let ownership = try ownership(context.store) else { return false }
        return ownership.terms.contains { term in
            guard let end = term.endedBy, end.seenChanges == nil else { return false }
            return (end.seen[origin] ?? 0) >= sequence
        }
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

    /// The hash-chain link after `previous` when `version` is the only version held at its sequence.
    public static func chainLink(after previous: [UInt8], onlyVersion version: [UInt8]) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(previous)
        hasher.update(version)
        return hasher.finalizeWords().prefix(16)
    }

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
        case (.relayMemberKey(let k), _):
            try recordRelayMemberKey(k, stamp: stamp, in: context, digest: &digest)
        case (.grant, _), (.revoke, _), (.claim, _), (.transferOwner, _), (.relayGrant, _), (.relayRevoke, _), (.relayEpoch, _):
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


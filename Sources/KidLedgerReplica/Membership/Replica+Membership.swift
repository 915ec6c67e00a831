import KidLedgerDomain

extension Tables {
    /// Claims: origin (8) → the member key whose replica it is.
    public static let claims = Table("claims")
    /// Valid grants: member key (32) + grant hash (16) → encoded grant op.
    public static let grants = Table("grants")
    /// Valid revocations: member key (32) + revocation hash (16) → encoded revocation op.
    public static let revocations = Table("revocations")
    /// Changes the membership rule rejected (a revoked member's past its revocation's cut, an
    /// origin no valid claim names, or a key that is neither the owner nor granted): log key →
    /// reason. Their ledger operations are not applied; a later grant reconsiders them (rebuild).
    public static let rejected = Table("rejected")
    /// Signed records whose signature failed: log key + op index (4) → reason. Counted, never applied.
    public static let forged = Table("forged")
    /// Membership operations that arrived before the household they belong to (changes of other
    /// origins can overtake it: a member's claim, or the owner's grants and revocations). Claims:
    /// origin (8) → encoded claim op; grants and revocations: log key + op index (4) → encoded op.
    /// The household's arrival, when the log holds other changes, triggers a rebuild, which
    /// applies the household first and judges them all.
    public static let pendingClaims = Table("pendingClaims")
    /// Bytes of change log each member's origins hold: member key (32) → u64 (the changes'
    /// encodings, every version). Derived from the log (recomputed with the state); bounds what
    /// one member makes every replica store (``Limits/bytesPerMemberMax``).
    public static let memberBytes = Table("memberBytes")
}

extension Operation {
    /// Whether this is a membership operation (household creation, grant, revocation, claim,
    /// owner transfer, and the owner's relay grants, relay revocations and epoch records),
    /// applied whatever the revocation rule says of its change. A member's relay key
    /// (``Operation/relayMemberKey(_:)``) is not: like its display name, the rule judges it.
    public var isMembership: Bool {
        switch self {
        case .createHousehold, .grant, .revoke, .claim, .transferOwner, .relayGrant, .relayRevoke, .relayEpoch: true
        default: false
        }
    }
}

/// A member as `members` lists it.
public struct MemberSummary: Equatable, Sendable {
    /// The account key.
    public var key: [UInt8]
    /// The name shown: the one the member chose (``chosenName``), else the one its grant gave
    /// ("owner" for the owner).
    public var name: String
    /// The display name the member chose itself (`Replica+Names`), or nil.
    public var chosenName: String?
    /// Whether this is the household's owner.
    public var isOwner: Bool
    /// Whether revoked.
    public var isRevoked: Bool
    /// Whether this key owned the household before an owner transfer (a member until revoked).
    public var isFormerOwner = false
    /// The replica ids (devices) that write as this member.
    public var devices: [ReplicaID]
}

extension Replica {
    /// The household's id and current owner key, or nil for a household without membership.
    /// The genesis owner comes from the pin once the genesis is here (a genesis is applied only
    /// with the pinned owner); the current owner is the genesis owner unless a valid transfer
    /// names another (``ownership(_:_:)``).
    static func owner(_ r: any KeyValueReader) throws -> (RecordID, [UInt8])? {
        guard let ownership = try ownership(r) else { return nil }
        return (ownership.household, ownership.current)
    }

    // long-function: one case per membership operation, applied in the change's order.
    /// Applies (after checking signatures) the membership operations of a change that `include`
    /// selects (all of them outside a rebuild). Returns whether the merged state must be
    /// recomputed from the log (``rebuild(in:)``): a revocation or an owner transfer that was not
    /// known before, a grant of a key whose claimed origins' changes were judged without it, or
    /// the household's genesis arriving after other changes.
    static func applyMembership(of change: Change, version: [UInt8], in context: ApplyContext, digest: inout Digest256,
                                including include: (Operation) -> Bool = \.isMembership) throws -> Bool {
        let w = context.store, verifier = context.verifier
        var needsRebuild = false
        for (index, op) in change.operations.enumerated() where op.isMembership && include(op) {
            func opKey() -> [UInt8] {
                Keys.change(change.origin, change.sequence, version: version)
                    + [UInt8(index >> 24 & 255), UInt8(index >> 16 & 255), UInt8(index >> 8 & 255), UInt8(index & 255)]
            }
            func forged(_ reason: String) throws { try w.put(Tables.forged, opKey(), Array(reason.utf8)) }
            /// A membership record whose household has not arrived waits for it (not forged).
            func parkedBeforeHousehold(_ key: [UInt8]) throws -> Bool {
                guard try household(w) == nil else { return false }
                try w.put(Tables.pendingClaims, key, RecordCodec.encodeOperation(op))
                return true
            }
            /// Stores a verified grant or revocation of `member` once; returns whether it was new.
            func storeSigned(of member: [UInt8], in table: Table, tag: UInt8) throws -> Bool {
                let encoded = RecordCodec.encodeOperation(op)
                let key = member + Array(SHA256.hash(encoded).prefix(16))
                guard try w.get(table, key) == nil else { return false }
                try context.putSigned(table, key, encoded)
                digest.insert([tag] + encoded)
                return true
            }
            switch op {
            case .createHousehold(let h):
                if let problem = try genesisProblem(h, in: context) { try forged(problem); continue }
                try apply(op, stamp: Stamp(hlc: change.hlc, origin: change.origin), prepared: nil, in: context, digest: &digest)
                // Changes that came first were judged without the household (claims and owner-signed
                // records waited): the rebuild applies it first and judges them again.
                if try w.count(Tables.changes) > 1 { needsRebuild = true }
            case .claim(let c):
                guard try !parkedBeforeHousehold(Keys.origin(c.origin)) else { continue }
                guard let (household, _) = try owner(w) else { try forged("claim in a household without an owner"); continue }
                if let problem = Membership.claimProblem(c, origin: change.origin, sequence: change.sequence,
                                                         household: household, verifier: verifier) {
                    try forged(problem); continue
                }
                if try record(c, in: context, digest: &digest) { needsRebuild = true }
            case .grant(let g):
                guard try !parkedBeforeHousehold(opKey()) else { continue }
                // Signed by the owner whose term covers the change: a former owner's key signs
                // nothing after the transfer that ended its term.
                guard let ownership = try ownership(w), ownership.signedByOwner(of: change, forkedFrom: try forkedFrom(change.origin, w), {
                    verifier.isValid(signature: g.signature, message: Membership.grantMessage(household: ownership.household, g), key: $0)
                }) else {
                    try forged("grant not signed by the owner"); continue
                }
                if try storeSigned(of: g.member, in: Tables.grants, tag: UInt8(ascii: "G")),
                   try !isMember(g.member, ownerKey: ownership.current, w, grantsBefore: 1), try claimsAnOrigin(g.member, in: context) {
                    needsRebuild = true
                }
            case .revoke(let rv):
                guard try !parkedBeforeHousehold(opKey()) else { continue }
                guard let ownership = try ownership(w), rv.member != ownership.current,
                      ownership.signedByOwner(of: change, forkedFrom: try forkedFrom(change.origin, w), {
                    verifier.isValid(signature: rv.signature, message: Membership.revocationMessage(household: ownership.household, rv), key: $0)
                }) else {
                    try forged("revocation not signed by the owner"); continue
                }
                if try storeSigned(of: rv.member, in: Tables.revocations, tag: UInt8(ascii: "V")) { needsRebuild = true }
            case .transferOwner(let t):
                guard try !parkedBeforeHousehold(opKey()) else { continue }
                let (problem, isNew) = try recordTransfer(t, encoded: RecordCodec.encodeOperation(op), in: context, digest: &digest)
                if let problem { try forged(problem); continue }
                if isNew { needsRebuild = true }
            case .relayGrant, .relayRevoke, .relayEpoch:
                // The relay's records change no judgment of a change: never a rebuild.
                guard try !parkedBeforeHousehold(opKey()) else { continue }
                if let problem = try recordRelay(op, of: change, in: context, digest: &digest) { try forged(problem) }
            default:
                break
            }
        }
        return needsRebuild
    }

    /// Whether `member` is the owner or holds more than `grantsBefore` valid grants (0: any grant).
    static func isMember(_ member: [UInt8], ownerKey: [UInt8], _ r: any KeyValueReader, grantsBefore: Int = 0) throws -> Bool {
        if member == ownerKey { return true }
        var grants = 0
        try r.scan(Tables.grants, prefix: member) { _, _ in
            grants += 1
            return grants <= grantsBefore
        }
        return grants > grantsBefore
    }

    /// Whether a valid claim names `member` (its changes were judged while it was not granted).
    /// Asked only of a member's first grant: it writes the context's claims out, then scans them.
    static func claimsAnOrigin(_ member: [UInt8], in context: ApplyContext) throws -> Bool {
        try context.flush()
        var found = false
        try context.store.scan(Tables.claims) { _, value in
            found = value == member
            return !found
        }
        return found
    }

    /// Why this replica does not apply the genesis `h`, or nil (then it is pinned, if it was not).
    /// Only the one genesis of the pinned household is applied: the pinned owner's, signed by it,
    /// and the exact record the pin names (``Membership/genesisHash(_:)``: the invitation's, or
    /// the first genuine one a replica applies, `init`'s own). Every other household record is
    /// forged; another genuine creation record of the pinned household (it can only be signed by
    /// the genesis owner's key) is ``ForgedReason/secondGenesis``: evidence that the key is in
    /// someone else's hands, which `status` and `verify` show. A replica without a pin takes the
    /// first genuine genesis it applies (`init` and `join` pin before any other record can arrive).
    static func genesisProblem(_ h: Household, in context: ApplyContext) throws -> String? {
        if let problem = Membership.genesisProblem(h, verifier: context.verifier) { return problem }
        let hash = Membership.genesisHash(h)
        guard let pin = try pinnedHousehold(context.store) else {
            try pin(h.id, owner: h.owner, genesis: hash, in: context.store)
            return nil
        }
        if pin.id != h.id { return ForgedReason.otherGenesis }
        if pin.ownerPending ? h.owner.isEmpty : pin.owner != h.owner { return "household genesis without the pinned owner" }
        if h.owner.isEmpty { return nil }
        if let pinned = pin.genesis {
            if pinned != hash { return ForgedReason.secondGenesis }
        } else if let stored = try context.store.get(Tables.households, Keys.id(h.id)), stored != RecordCodec.encodeRecord(h) {
            // Pinned without its hash (by `pinHousehold`), and the first genuine one is applied.
            return ForgedReason.secondGenesis
        }
        if pin.ownerPending || pin.genesis == nil { try Self.pin(h.id, owner: h.owner, genesis: hash, in: context.store) }
        return nil
    }

    /// Records a valid claim. Origins are derived from their member's key, so two valid claims
    /// name one origin only when two keys' derivations collide (about 2^63 work to find): then
    /// the smaller key wins everywhere, and the caller rebuilds (returns true) since changes were
    /// judged under the other. It also
    /// rebuilds when the claim changes the author of a version already merged in a same-id
    /// conflict (``claimTouchesConflicts(_:in:)``).
    static func record(_ c: OriginClaim, in context: ApplyContext, digest: inout Digest256) throws -> Bool {
        let key = Keys.origin(c.origin)
        var replaced = false
        let existing = try context.claim(c.origin)
        if let existing {
            if KeyBytes.compare(c.member, existing) >= 0 { return false }
            digest.remove([UInt8(ascii: "L")] + key + existing)
            replaced = true
        }
        context.setClaim(c.member, of: c.origin, replacing: replaced ? existing : nil)
        digest.insert([UInt8(ascii: "L")] + key + c.member)
        // The claim that takes its member over ``Limits/originsPerMemberMax``: the member's
        // changes judged so far counted, and now none does.
        let overLimit = try context.claimCount(of: c.member) == Limits.originsPerMemberMax + 1
        return try replaced || overLimit || claimTouchesConflicts(c.origin, in: context) || judgedUnclaimed(c.origin, in: context)
    }

    /// Whether a change of `origin` was judged before its claim arrived (another version of the
    /// claim's change, sent first by a member forking its origin's first change: rejected as
    /// unclaimed, and the claim changes why). Usually one cursor step on an empty range.
    static func judgedUnclaimed(_ origin: ReplicaID, in context: ApplyContext) throws -> Bool {
        var any = false  // written straight to the store (``applyLedger``)
        try context.store.scan(Tables.rejected, prefix: Keys.origin(origin)) { _, _ in any = true; return false }
        return any
    }

    /// The cut a revocation of `member` carries: this replica's version vector on the origins
    /// whose valid claim names `member` (the rule judges only those by it; another origin's entry
    /// would change nothing), at most
    /// ``Limits/cutEntriesMax`` of them, the smallest. A member with more origins than that is
    /// flooding the household: the changes of its origins beyond the cut are rejected whole.
    public func cut(of member: [UInt8]) throws -> VersionVector {
        try store.read { r in try Self.cut(of: member, r) }
    }

    static func cut(of member: [UInt8], _ r: any KeyValueReader) throws -> VersionVector {
        let vector = try versionVector(r)
        var cut: VersionVector = [:]
        try r.scan(Tables.claims) { key, value in
            if value == member, let raw = Bytes.u64(key), let held = vector[ReplicaID(raw)] { cut[ReplicaID(raw)] = held }
            return cut.count < Limits.cutEntriesMax
        }
        return cut
    }

    /// A grant as the grants table stores it. One that does not decode, or holds another
    /// operation, is a damaged store: it throws, never counts as no grant.
    static func storedGrant(_ value: [UInt8]) throws -> MemberGrant {
        var reader = ByteReader(value)
        let operation: Operation
        do { operation = try RecordCodec.decodeOperation(&reader) } catch {
            throw LedgerError.corrupted("a stored grant does not decode: \(error)")
        }
        guard case .grant(let g) = operation else { throw LedgerError.corrupted("a stored grant holds another operation") }
        return g
    }

    /// What the revocations of `member` have seen: the pointwise minimum of their vectors (every
    /// further revocation can only reject more), or nil when the member is not revoked. A stored
    /// revocation that does not decode is a damaged store: it throws, never counts as none.
    static func revokedSeen(_ member: [UInt8], _ r: any KeyValueReader) throws -> [ReplicaID: UInt64]? {
        var seen: [ReplicaID: UInt64]?
        try r.scan(Tables.revocations, prefix: member) { _, value in
            var reader = ByteReader(value)
            let operation: Operation
            do { operation = try RecordCodec.decodeOperation(&reader) } catch {
                throw LedgerError.corrupted("a stored revocation does not decode: \(error)")
            }
            guard case .revoke(let rv) = operation else {
                throw LedgerError.corrupted("a stored revocation holds another operation")
            }
            if let current = seen {
                var merged: [ReplicaID: UInt64] = [:]
                for origin in Set(current.keys).union(rv.seen.keys) {
                    let v = min(current[origin] ?? 0, rv.seen[origin] ?? 0)
                    if v > 0 { merged[origin] = v }
                }
                seen = merged
            } else {
                seen = rv.seen
            }
            return true
        }
        return seen
    }

    /// Why the membership rule rejects `change`, or nil. In a household with an owner, a change
    /// counts only when its origin's valid claim names the owner or a granted key, and, when that
    /// key is revoked, when its revocations' cut covers it. Judged by the claim's key (the author),
    /// never by who relayed the change; the claim and grants come from the log, so every replica
    /// holding the same log judges alike (a grant or revocation arriving later rebuilds).
    static func rejection(of change: Change, in context: ApplyContext) throws -> String? {
        // Every change of a batch asks; the context remembers the answer per origin.
        let standing = try context.horizon(ofOrigin: change.origin) { () throws -> Standing? in
            guard let ownership = try ownership(context.store) else { return nil }
            guard let member = try context.claim(change.origin) else { return Standing(cut: [:], reason: RejectedReason.unclaimed) }
            // Former owners stay members until revoked (their term's end only takes their
            // owner's powers: ``Ownership/signedByOwner(of:_:)``).
            guard try ownership.hasOwned(member) || isMember(member, ownerKey: ownership.current, context.store) else {
                return Standing(cut: [:], reason: RejectedReason.notMember)
            }
            if try context.claimCount(of: member) > Limits.originsPerMemberMax {
                return Standing(cut: [:], reason: RejectedReason.overOriginLimit)
            }
            if try context.childCount(of: member) > Limits.childrenPerMemberMax {
                return Standing(cut: [:], reason: RejectedReason.overChildLimit)
            }
            if member != ownership.current, try context.storedBytes(of: member) > Limits.bytesPerMemberMax {
                return Standing(cut: [:], reason: RejectedReason.overByteLimit)
            }
            if try forksFlooded(by: member, in: context) {
                return Standing(cut: [:], reason: RejectedReason.overForkLimit)
            }
            guard var cut = try revokedSeen(member, context.store) else { return nil }
            // What the cut covers of this origin: not a forked sequence, nor any after it.
            cut[change.origin] = coveredThrough(cut, change.origin, forkedFrom: try forkedFrom(change.origin, context.store))
            return Standing(cut: cut, reason: RejectedReason.revoked)
        }
        guard let standing else { return nil }
        if change.sequence > (standing.cut[change.origin] ?? 0) { return standing.reason }
        return nil
    }

    /// The lowest sequence at which the log holds several versions of `origin`'s change
    /// (``Tables/forks``), or nil when it never forked.
    static func forkedFrom(_ origin: ReplicaID, _ r: any KeyValueReader) throws -> UInt64? {
        Bytes.u64(try r.get(Tables.forks, Keys.origin(origin)))
    }

    /// Whether a version vector entry `seen` (a revocation's cut, an owner transfer's `seen`)
    /// covers `origin`'s change at `sequence`: at or below the entry, and below the lowest
    /// sequence where the origin forked (`forkedFrom`). At and after a fork a vector cannot tell
    /// which version was seen, so none is: otherwise a revoked member's modified client (or a
    /// former owner's key) could write a new version of a change its revocation (or the transfer
    /// ending its term) saw, and have it count (`RevokedForkTests`).
    static func covered(_ sequence: UInt64, _ origin: ReplicaID, seenUpTo seen: [ReplicaID: UInt64], forkedFrom: UInt64?) -> Bool {
        sequence <= coveredThrough(seen, origin, forkedFrom: forkedFrom)
    }

    /// The last sequence of `origin` that `seen` covers (``covered(_:_:seenUpTo:forkedFrom:)``).
    static func coveredThrough(_ seen: [ReplicaID: UInt64], _ origin: ReplicaID, forkedFrom: UInt64?) -> UInt64 {
        min(seen[origin] ?? 0, (forkedFrom ?? .max) - 1)
    }

    /// Whether an origin `member`'s claim names forked a sequence into too many versions
    /// (``Tables/forkFloods``: usually empty, so one cursor step).
    static func forksFlooded(by member: [UInt8], in context: ApplyContext) throws -> Bool {
        var flooded = false
        try context.store.scan(Tables.forkFloods) { key, _ in
            guard let raw = Bytes.u64(key) else { throw LedgerError.corrupted("fork flood key") }
            flooded = try context.claim(ReplicaID(raw)) == member
            return !flooded
        }
        return flooded
    }

    /// Recomputes the merged state from the change log: membership first (the genesis, then the
    /// owner transfers, then the rest, so every revocation is known), then every change's ledger
    /// operations under the revocation rule. Used when a new revocation or owner transfer
    /// arrives; order-independent like everything else.
    static func rebuild(in context: ApplyContext) throws {
        let w = context.store
        let derived = [Tables.households, Tables.children, Tables.registers, Tables.registerHistory, Tables.transactions,
                       Tables.byTime, Tables.byChild, Tables.aggregates, Tables.deferred, Tables.conflicts,
                       Tables.creators, Tables.claims, Tables.grants, Tables.revocations, Tables.transfers, Tables.rejected, Tables.forged,
                       Tables.pendingClaims, Tables.childCreations, Tables.memberBytes, Tables.relay]
        // What the context holds of these tables is written first, then forgotten with them.
        try context.flushAndForgetDerived()
        // A pin that does not name its genesis yet names the one applied (never the first in log order).
        _ = try completeGenesisPin(replica: nil, in: w)
        for table in derived { try w.clear(table) }
        var digest = Digest256.zero
        var log: [(change: Change, version: [UInt8], encoded: [UInt8])] = []
        try w.scan(Tables.changes) { key, value in
            log.append((try decodeLogEntry(value), Array(key.suffix(8)), value))
            return true
        }
        func isGenesis(_ op: Operation) -> Bool { if case .createHousehold = op { true } else { false } }
        func isTransfer(_ op: Operation) -> Bool { if case .transferOwner = op { true } else { false } }
        // The household's creation first, so every claim can be checked against it; then the
        // owner transfers, so every grant and revocation is judged against the whole ownership.
        for pass in [isGenesis, isTransfer, { $0.isMembership && !isGenesis($0) && !isTransfer($0) }] {
            for entry in log where entry.change.operations.contains(where: pass) {
                _ = try applyMembership(of: entry.change, version: entry.version, in: context, digest: &digest, including: pass)
            }
        }
        // What each member's origins hold, then which members flood.
        for entry in log {
            if let member = try context.claim(entry.change.origin) { _ = try context.addStoredBytes(entry.encoded.count, to: member) }
        }
        try leaveFloodedClaimsOutOfDigest(in: context, digest: &digest)
        // Every child each member's changes create, before any is judged.
        for entry in log { _ = try noteChildCreations(of: entry.change, in: context) }
        for entry in log {
            // A log entry is its change's canonical encoding.
            let prepared = context.preparer.prepare(entry.change, encoded: entry.encoded)
            try applyLedger(of: entry.change, prepared, version: entry.version, in: context, digest: &digest)
        }
        context.setStateDigest(digest)
    }

    /// Takes the claims of every member holding more than ``Limits/originsPerMemberMax`` origins
    /// out of the state digest: each replica stores the first ``Limits/originsPerMemberStoredMax``
    /// such claims it receives and refuses the rest, so replicas may hold different ones, and
    /// they count for nothing (every ledger change of that member is rejected). One scan of the
    /// claims, in a recomputation (crossing the limit recomputes).
    /// So are the claims of a key that is no longer a member: one whose grant a later owner
    /// transfer voided (signed by a former owner after its term: the thief's accomplice). A
    /// replica that judged the grant valid stored the key's origins; one that had the transfer
    /// first refused them (``admits(_:in:)``), so replicas hold different ones, and they count for
    /// nothing (its changes are rejected as a non-member's).
    static func leaveFloodedClaimsOutOfDigest(in context: ApplyContext, digest: inout Digest256) throws {
        try context.flush()
        for (member, origins) in try claimsByMember(context.store) where try !claimsCount(member, origins: origins.count, context.store) {
            for origin in origins { digest.remove([UInt8(ascii: "L")] + origin + member) }
        }
    }

    /// Whether `member`'s claims (of `origins` origins here) are in the state digest: it is a
    /// member (the owner, a former owner, or granted: revoked or not) and does not flood.
    static func claimsCount(_ member: [UInt8], origins: Int, _ r: any KeyValueReader) throws -> Bool {
        if try floods(member, origins: origins, r) { return false }
        guard let ownership = try ownership(r) else { return true }
        return try ownership.hasOwned(member) || isMember(member, ownerKey: ownership.current, r)
    }

    /// Whether `member`, whose claims name `origins` origins here, is over a limit replicas may
    /// reach with different changes: more than ``Limits/originsPerMemberMax`` origins, or more than
    /// ``Limits/bytesPerMemberMax`` bytes of change log (not the current owner). Its claims are
    /// then not in the digest.
    static func floods(_ member: [UInt8], origins: Int, _ r: any KeyValueReader) throws -> Bool {
        if origins > Limits.originsPerMemberMax { return true }
        guard (Bytes.u64(try r.get(Tables.memberBytes, member)) ?? 0) > Limits.bytesPerMemberMax else { return false }
        return try ownership(r)?.current != member
    }

    /// The stored claims, grouped by member key: each member's origins (8-byte keys), ascending.
    static func claimsByMember(_ r: any KeyValueReader) throws -> [[UInt8]: [[UInt8]]] {
        var byMember: [[UInt8]: [[UInt8]]] = [:]
        try r.scan(Tables.claims) { key, value in
            byMember[value, default: []].append(key)
            return true
        }
        return byMember
    }

    /// The members whose claims here name more origins, or whose origins hold more bytes, than a
    /// member may (``floods(_:origins:_:)``): replicas may hold different ones of their origins
    /// (each keeps what it received first), and none of their ledger changes counts.
    public func floodingMembers() throws -> Set<[UInt8]> {
        try store.read { r in Set(try Self.claimsByMember(r).filter { try Self.floods($0.key, origins: $0.value.count, r) }.keys) }
    }

    /// The origins of ``floodingMembers()``.
    public func originsOfFloodingMembers() throws -> Set<ReplicaID> {
        try store.read { r in
            Set(try Self.claimsByMember(r).filter { try Self.floods($0.key, origins: $0.value.count, r) }.values.joined()
                .compactMap { Bytes.u64($0) }.map { ReplicaID($0) })
        }
    }

    static func decodeLogEntry(_ value: [UInt8]) throws -> Change {
        do { return try RecordCodec.decodeChange(value) } catch {
            throw LedgerError.corrupted("change log entry: \(error)")
        }
    }

    /// The household's members: the owner and every granted key, with revocation and devices.
    public func members() throws -> [MemberSummary] {
        try store.read { r in try Self.members(r) }
    }

    /// ``members()`` in a read.
    static func members(_ r: any KeyValueReader) throws -> [MemberSummary] {
        guard let ownership = try Self.ownership(r) else { return [] }
        let ownerKey = ownership.current
        var byKey: [[UInt8]: MemberSummary] = [ownerKey: MemberSummary(key: ownerKey, name: "owner", chosenName: nil, isOwner: true, isRevoked: false, devices: [])]
        // A former owner stays a member (its laptop may turn up again) until it is revoked.
        for term in ownership.terms.dropLast() where byKey[term.owner] == nil {
            byKey[term.owner] = MemberSummary(key: term.owner, name: "former owner", chosenName: nil, isOwner: false, isRevoked: false,
                                              isFormerOwner: true, devices: [])
        }
        try r.scan(Tables.grants) { _, value in
            let g = try Self.storedGrant(value)
            if byKey[g.member] == nil {
                byKey[g.member] = MemberSummary(key: g.member, name: g.name, chosenName: nil, isOwner: false, isRevoked: false, devices: [])
            }
            return true
        }
        for key in byKey.keys where try Self.revokedSeen(key, r) != nil { byKey[key]?.isRevoked = true }
        for key in byKey.keys {
            guard let chosen = try Self.chosenName(of: key, r) else { continue }
            byKey[key]?.name = chosen
            byKey[key]?.chosenName = chosen
        }
        try r.scan(Tables.claims) { key, value in
            if let origin = Bytes.u64(key) { byKey[value]?.devices.append(ReplicaID(origin)) }
            return true
        }
        return byKey.values.sorted {
            if $0.isOwner != $1.isOwner { return $0.isOwner }
            if $0.name != $1.name { return $0.name < $1.name }
            return $0.key.lexicographicallyPrecedes($1.key)
        }
    }

    /// How many signed records failed verification (of them, how many are household records:
    /// forged or other households' geneses), and how many changes the revocation rule rejected.
    public func membershipCounts() throws -> MembershipCounts {
        try store.read { r in
            let (households, second) = try Self.forgedHouseholds(r)
            return MembershipCounts(forged: try r.count(Tables.forged), forgedHouseholds: households, secondGeneses: second,
                                    rejected: try r.count(Tables.rejected), ownerKeyCompromised: try Self.ownerKeyCompromise(r))
        }
    }

    /// How many entries of the forged table are household records, and of them second geneses
    /// (``ForgedReason/secondGenesis``).
    static func forgedHouseholds(_ r: any KeyValueReader) throws -> (households: Int, secondGeneses: Int) {
        var count = 0, second = 0
        let secondReason = Array(ForgedReason.secondGenesis.utf8)
        try r.scan(Tables.forged) { _, reason in
            if reason.starts(with: ForgedReason.householdPrefix) { count += 1 }
            if reason == secondReason { second += 1 }
            return true
        }
        return (count, second)
    }

    /// What a second genesis in the log says (nil: none): the genesis owner's key signed a
    /// second household record, so someone else may hold it. ``OwnerKeyCompromise/current``: that
    /// key still owns the household (run `recover`); ``OwnerKeyCompromise/former``: a recovery
    /// has since made another key the owner, and the record changes nothing.
    static func ownerKeyCompromise(_ r: any KeyValueReader) throws -> OwnerKeyCompromise? {
        let secondReason = Array(ForgedReason.secondGenesis.utf8)
        var found = false
        try r.scan(Tables.forged) { _, reason in
            found = reason == secondReason
            return !found
        }
        guard found else { return nil }
        guard let ownership = try ownership(r) else { return .current }
        return ownership.current == ownership.genesisOwner ? .current : .former
    }
}

/// Whose key a second genesis shows in someone else's hands (``MembershipCounts/ownerKeyCompromised``).
public enum OwnerKeyCompromise: String, Equatable, Sendable {
    /// The current owner's: run `recover` if that laptop was lost.
    case current
    /// A former owner's: a recovery already replaced it, and its records change nothing.
    case former

    /// The plain sentence `status`, `verify` and the page show.
    public var sentence: String {
        switch self {
        case .current: "the owner's key signed a second household record: if that laptop was lost, run recover"
        case .former: "the former owner's key signed a second household record; the recovery replaced that key, and nothing it signs counts"
        }
    }
}

/// What ``Replica/membershipCounts()`` counts.
public struct MembershipCounts: Equatable, Sendable {
    /// Records that failed verification (forged table entries).
    public var forged: Int
    /// Of them, household records (a forged genesis or another household's).
    public var forgedHouseholds: Int
    /// Of them, second geneses: creation records of this household, signed by its owner key,
    /// that are not its pinned genesis.
    public var secondGeneses: Int
    /// Changes the revocation rule rejected.
    public var rejected: Int
    /// Whether a second genesis shows the owner key in someone else's hands (nil: it does not).
    public var ownerKeyCompromised: OwnerKeyCompromise?

    /// Creates counts.
    public init(forged: Int, forgedHouseholds: Int, secondGeneses: Int = 0, rejected: Int, ownerKeyCompromised: OwnerKeyCompromise? = nil) {
        self.forged = forged
        self.forgedHouseholds = forgedHouseholds
        self.secondGeneses = secondGeneses
        self.rejected = rejected
        self.ownerKeyCompromised = ownerKeyCompromised
    }
}

/// Reasons stored in the forged table. Every reason given for a household record starts with
/// "household ", which is how they are counted apart.
enum ForgedReason {
    static let householdPrefix = Array("household ".utf8)
    /// A genuine genesis, but of a household other than the pinned one.
    static let otherGenesis = "household genesis of another household"
    /// A genuine creation record of the pinned household that is not its pinned genesis: only the
    /// genesis owner's key signs one, so whoever holds that key signed a second household record.
    static let secondGenesis = "household record signed by the owner's key that is not this household's genesis"
}

/// Reasons stored in the rejected table.
enum RejectedReason {
    static let revoked = "made by a revoked member after the revocation"
    static let unclaimed = "made under an origin no valid claim names"
    static let notMember = "made by a key that is neither the owner nor granted"
    static let overOriginLimit = "made by a member that claims more than \(Limits.originsPerMemberMax) origins"
    static let overChildLimit = "made by a member whose changes create more than \(Limits.childrenPerMemberMax) children"
    static let overForkLimit = "made by a member that forked a change into more than \(Limits.forkVersionsPerSequenceMax) versions"
    static let overByteLimit = "made by a member whose changes take more than \(Limits.bytesPerMemberMax >> 20) MiB"
}

/// What the membership rule says of an origin's changes (``Replica/rejection(of:in:)``): those
/// past `cut` at the origin are rejected, for `reason`.
struct Standing {
    var cut: [ReplicaID: UInt64]
    var reason: String
}

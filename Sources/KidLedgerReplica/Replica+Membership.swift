import KidLedgerDomain

extension Tables {
    /// Claims: origin (8) → the member key whose replica it is.
    public static let claims = Table("claims")
    /// Valid grants: member key (32) + grant hash (16) → encoded grant op.
    public static let grants = Table("grants")
    /// Valid revocations: member key (32) + revocation hash (16) → encoded revocation op.
    public static let revocations = Table("revocations")
    /// Changes the revocation rule rejected: log key → reason. Their operations are not applied.
    public static let rejected = Table("rejected")
    /// Signed records whose signature failed: log key + op index (4) → reason. Counted, never applied.
    public static let forged = Table("forged")
    /// Membership operations that arrived before the household they belong to (changes of other
    /// origins can overtake it: a member's claim, or the owner's grants and revocations from a
    /// device id the owner took after a restore from a stale copy). Claims: origin (8) → encoded
    /// claim op, verified (and recorded or counted as forged) when the household arrives. Grants and
    /// revocations: log key + op index (4) → encoded op; their arrival with the household triggers
    /// a rebuild, which applies the household first.
    public static let pendingClaims = Table("pendingClaims")
}

extension Operation {
    /// Whether this is a membership operation (household creation, grant, revocation, claim),
    /// applied whatever the revocation rule says of its change.
    public var isMembership: Bool {
        switch self {
        case .createHousehold, .grant, .revoke, .claim: true
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
    /// The replica ids (devices) that write as this member.
    public var devices: [ReplicaID]
}

extension Replica {
    /// The household's owner key, or nil for a household without membership.
    /// Read from the pin once the household's genesis is here (a genesis is applied only with
    /// the pinned owner; ``household(_:_:)`` throws when its stored record is damaged).
    static func owner(_ r: any KeyValueReader, _ queries: any QueryCache) throws -> (RecordID, [UInt8])? {
        guard try household(r, queries) != nil, let pin = try pinnedHousehold(r), !pin.owner.isEmpty else { return nil }
        return (pin.id, pin.owner)
    }

    /// Applies (after checking signatures) the membership operations of a change. Returns whether
    /// it recorded a revocation that was not known before.
    static func applyMembership(of change: Change, version: [UInt8], in context: ApplyContext,
                                digest: inout Digest256) throws -> Bool {
        let w = context.store, verifier = context.verifier, queries = context.queries
        var newRevocation = false
        for (index, op) in change.operations.enumerated() where op.isMembership {
            func opKey() -> [UInt8] {
                Keys.change(change.origin, change.sequence, version: version)
                    + [UInt8(index >> 24 & 255), UInt8(index >> 16 & 255), UInt8(index >> 8 & 255), UInt8(index & 255)]
            }
            func forged(_ reason: String) throws { try w.put(Tables.forged, opKey(), Array(reason.utf8)) }
            /// A grant or revocation whose household has not arrived waits for it (not forged).
            func parkedBeforeHousehold() throws -> Bool {
                guard try household(w, queries) == nil else { return false }
                try w.put(Tables.pendingClaims, opKey(), RecordCodec.encodeOperation(op))
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
                // Owner-signed operations that came first: the rebuild applies them in order.
                if try releasePendingClaims(in: context, digest: &digest) { newRevocation = true }
            case .claim(let c):
                guard c.origin == change.origin else { try forged("claim of another origin"); continue }
                guard let (household, _) = try owner(w, queries) else {
                    // The household has not arrived yet (changes of other origins can overtake it).
                    try w.put(Tables.pendingClaims, Keys.origin(c.origin), RecordCodec.encodeOperation(op))
                    continue
                }
                guard verifier.isValid(signature: c.signature, message: Membership.claimMessage(household: household, c), key: c.member) else {
                    try forged("claim with a bad signature"); continue
                }
                if try record(c, in: context, digest: &digest) { newRevocation = true }
            case .grant(let g):
                guard try !parkedBeforeHousehold() else { continue }
                guard let (household, ownerKey) = try owner(w, queries),
                      verifier.isValid(signature: g.signature, message: Membership.grantMessage(household: household, g), key: ownerKey) else {
                    try forged("grant not signed by the owner"); continue
                }
                _ = try storeSigned(of: g.member, in: Tables.grants, tag: UInt8(ascii: "G"))
            case .revoke(let rv):
                guard try !parkedBeforeHousehold() else { continue }
                guard let (household, ownerKey) = try owner(w, queries), rv.member != ownerKey,
                      verifier.isValid(signature: rv.signature, message: Membership.revocationMessage(household: household, rv), key: ownerKey) else {
                    try forged("revocation not signed by the owner"); continue
                }
                if try storeSigned(of: rv.member, in: Tables.revocations, tag: UInt8(ascii: "V")) { newRevocation = true }
            default:
                break
            }
        }
        return newRevocation
    }

    /// Why this replica does not apply the genesis `h`, or nil (then it is pinned, if it was not).
    /// Only the genesis of the pinned household, with the pinned owner and that owner's signature,
    /// is applied; a replica without a pin takes the first genuine genesis it applies (`init` and
    /// `join` pin before any other record can arrive). Every other household record is forged.
    static func genesisProblem(_ h: Household, in context: ApplyContext) throws -> String? {
        if let problem = Membership.genesisProblem(h, verifier: context.verifier) { return problem }
        guard let pin = try pinnedHousehold(context.store) else {
            try pin(h.id, owner: h.owner, in: context.store)
            return nil
        }
        if pin.id != h.id { return ForgedReason.otherGenesis }
        if pin.owner != h.owner { return "household genesis without the pinned owner" }
        return nil
    }

    /// Records a verified claim. One member per origin: the smaller key wins everywhere (a fork
    /// could carry two). Returns whether the state must be rebuilt: the claim changes the author
    /// of a version already merged in a same-id conflict (``claimTouchesConflicts(_:in:)``).
    @discardableResult
    static func record(_ c: OriginClaim, in context: ApplyContext, digest: inout Digest256) throws -> Bool {
        let key = Keys.origin(c.origin)
        if let existing = try context.claim(c.origin) {
            if KeyBytes.compare(c.member, existing) >= 0 { return false }
            digest.remove([UInt8(ascii: "L")] + key + existing)
        }
        context.setClaim(c.member, of: c.origin)
        digest.insert([UInt8(ascii: "L")] + key + c.member)
        return try claimTouchesConflicts(c.origin, in: context)
    }

    /// Verifies the claims that waited for the household, now that it is here. Returns whether
    /// grants or revocations waited too: they are left for the rebuild that the caller then runs.
    static func releasePendingClaims(in context: ApplyContext, digest: inout Digest256) throws -> Bool {
        let w = context.store, verifier = context.verifier, queries = context.queries
        guard let (household, _) = try owner(w, queries) else { return false }
        var pending: [([UInt8], [UInt8])] = []
        var ownerSigned = false
        try w.scan(Tables.pendingClaims) { key, value in
            if key.count == 8 { pending.append((key, value)) } else { ownerSigned = true }
            return true
        }
        for (key, value) in pending {
            try w.delete(Tables.pendingClaims, key)
            var reader = ByteReader(value)
            guard case .claim(let c)? = try? RecordCodec.decodeOperation(&reader),
                  verifier.isValid(signature: c.signature, message: Membership.claimMessage(household: household, c), key: c.member) else {
                try w.put(Tables.forged, key + [0xFF, 0xFF, 0xFF, 0xFF], Array("claim with a bad signature".utf8))
                continue
            }
            if try record(c, in: context, digest: &digest) { ownerSigned = true }
        }
        return ownerSigned
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

    /// Why the revocation rule rejects `change`, or nil.
    static func rejection(of change: Change, in context: ApplyContext) throws -> String? {
        // Every change of a batch asks; the context remembers the answer per origin.
        let found = try context.horizon(ofOrigin: change.origin) {
            guard let member = try context.claim(change.origin) else { return nil }
            return try revokedSeen(member, context.store)
        }
        guard let seen = found else { return nil }
        if change.sequence > (seen[change.origin] ?? 0) { return "made by a revoked member after the revocation" }
        return nil
    }

    /// Recomputes the merged state from the change log: membership first (so every revocation is
    /// known), then every change's ledger operations under the revocation rule. Used when a new
    /// revocation arrives; order-independent like everything else.
    static func rebuild(in context: ApplyContext) throws {
        let w = context.store
        let derived = [Tables.households, Tables.children, Tables.registers, Tables.registerHistory, Tables.transactions,
                       Tables.byTime, Tables.byChild, Tables.aggregates, Tables.deferred, Tables.conflicts,
                       Tables.creators, Tables.claims, Tables.grants, Tables.revocations, Tables.rejected, Tables.forged, Tables.pendingClaims]
        // What the context holds of these tables is written first, then forgotten with them.
        try context.flushAndForgetDerived()
        for table in derived {
            // Last key first: the in-memory store then removes each entry from the end of its
            // array, instead of moving every later entry down one place per delete.
            var keys: [[UInt8]] = []
            try w.scan(table, prefix: [], from: nil, reverse: true) { key, _ in keys.append(key); return true }
            for key in keys { try w.delete(table, key) }
        }
        var digest = Digest256.zero
        var log: [(change: Change, version: [UInt8], encoded: [UInt8])] = []
        try w.scan(Tables.changes) { key, value in
            log.append((try decodeLogEntry(value), Array(key.suffix(8)), value))
            return true
        }
        func createsHousehold(_ change: Change) -> Bool {
            change.operations.contains { if case .createHousehold = $0 { true } else { false } }
        }
        // The household's creation first, so every claim can be checked against it.
        for entry in log.filter({ createsHousehold($0.change) }) + log.filter({ !createsHousehold($0.change) }) {
            _ = try applyMembership(of: entry.change, version: entry.version, in: context, digest: &digest)
        }
        for entry in log {
            // A log entry is its change's canonical encoding.
            let prepared = context.preparer.prepare(entry.change, encoded: entry.encoded)
            try applyLedger(of: entry.change, prepared, version: entry.version, in: context, digest: &digest)
        }
        context.setStateDigest(digest)
    }

    static func decodeLogEntry(_ value: [UInt8]) throws -> Change {
        do { return try RecordCodec.decodeChange(value) } catch {
            throw LedgerError.corrupted("change log entry: \(error)")
        }
    }

    /// The household's members: the owner and every granted key, with revocation and devices.
    public func members() throws -> [MemberSummary] {
        try store.read { r in
            guard let (_, ownerKey) = try Self.owner(r, queryCache) else { return [] }
            var byKey: [[UInt8]: MemberSummary] = [ownerKey: MemberSummary(key: ownerKey, name: "owner", chosenName: nil, isOwner: true, isRevoked: false, devices: [])]
            try r.scan(Tables.grants) { _, value in
                var reader = ByteReader(value)
                if case .grant(let g)? = try? RecordCodec.decodeOperation(&reader), byKey[g.member] == nil {
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
    }

    /// How many signed records failed verification (of them, how many are household records:
    /// forged or other households' geneses), and how many changes the revocation rule rejected.
    public func membershipCounts() throws -> MembershipCounts {
        try store.read { r in
            MembershipCounts(forged: try r.count(Tables.forged), forgedHouseholds: try Self.forgedHouseholds(r),
                             rejected: try r.count(Tables.rejected))
        }
    }

    /// How many entries of the forged table are household records.
    static func forgedHouseholds(_ r: any KeyValueReader) throws -> Int {
        var count = 0
        try r.scan(Tables.forged) { _, reason in
            if reason.starts(with: ForgedReason.householdPrefix) { count += 1 }
            return true
        }
        return count
    }
}

/// What ``Replica/membershipCounts()`` counts.
public struct MembershipCounts: Equatable, Sendable {
    /// Records that failed verification (forged table entries).
    public var forged: Int
    /// Of them, household records (a forged genesis or another household's).
    public var forgedHouseholds: Int
    /// Changes the revocation rule rejected.
    public var rejected: Int

    /// Creates counts.
    public init(forged: Int, forgedHouseholds: Int, rejected: Int) {
        self.forged = forged
        self.forgedHouseholds = forgedHouseholds
        self.rejected = rejected
    }
}

/// Reasons stored in the forged table. Every reason given for a household record starts with
/// "household ", which is how they are counted apart.
enum ForgedReason {
    static let householdPrefix = Array("household ".utf8)
    /// A genuine genesis, but of a household other than the pinned one.
    static let otherGenesis = "household genesis of another household"
}

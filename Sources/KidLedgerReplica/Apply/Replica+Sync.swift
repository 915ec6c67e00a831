import KidLedgerDomain

/// A version vector: for each origin replica, the highest contiguous sequence held.
public typealias VersionVector = [ReplicaID: UInt64]

/// How many changes `holder` has that `have` does not cover, clamped to `Int.max`: either vector
/// may come from a peer (or be a receipt stored from one), so no entry or sum of entries may trap.
public func changesMissing(from have: VersionVector, in holder: VersionVector) -> Int {
    var total = 0
    for (origin, sequence) in holder {
        let missing = Int(clamping: sequence - min(sequence, have[origin] ?? 0))
        let (sum, overflow) = total.addingReportingOverflow(missing)
        if overflow { return .max }
        total = sum
    }
    return total
}

/// One change of the log in its canonical encoding.
public struct EncodedChange: Equatable, Sendable {
    /// The replica that made it.
    public var origin: ReplicaID
    /// Its sequence number at that origin.
    public var sequence: UInt64
    /// `RecordCodec.encode(change)`.
    public var bytes: [UInt8]
    /// The signed head this replica holds at this change, if any.
    public var head: SignedHead?
    /// Whether a batch may end after this change: the household needs no heads, or this change
    /// has one (and is the last version at its sequence). A batch that ends elsewhere leaves
    /// changes its receiver cannot authenticate.
    public var mayEndBatch = true

    /// Creates an entry.
    public init(origin: ReplicaID, sequence: UInt64, bytes: [UInt8], head: SignedHead? = nil, mayEndBatch: Bool = true) {
        self.origin = origin
        self.sequence = sequence
        self.bytes = bytes
        self.head = head
        self.mayEndBatch = mayEndBatch
    }
}

/// What applying a batch of received changes did.
public struct ApplyReport: Equatable, Sendable {
    /// Changes written.
    public var applied = 0
    /// Changes already held.
    public var duplicates = 0
    /// Changes refused because a predecessor is missing.
    public var gaps = 0
    /// Other versions of changes already held (a forked origin), kept and merged.
    public var forkedVersions = 0
    /// Whether this replica learned that its own history forked (it was restored from a stale
    /// copy of its files) and continues under a new replica id.
    public var rotatedReplicaID = false
    /// Changes refused because no signed head of their origin's member reaches them (a household
    /// with an owner): forged, altered on the way, or sent without their heads. Nothing of them
    /// is stored.
    public var unauthenticated = 0
    /// Changes held back, not stored, because they (or an earlier change of their origin in the
    /// batch) are stamped more than ``Limits/clockAheadMillisMax`` ahead of this replica's clock.
    /// Their sender offers them again in later sessions.
    public var heldBack = 0
    /// Changes not stored because they open an origin that no member's valid claim names (a
    /// stranger's key, a grant not here yet, no claim) or whose member holds
    /// ``Limits/originsPerMemberStoredMax`` origins already (``ApplyOutcome/notAdmitted``), and
    /// the later changes of such origins in the batch. Their sender offers them again later.
    public var notAdmitted = 0
    /// Whether the batch made this replica recompute its merged state (once at most a batch).
    public var recomputed = false
}

extension Replica {
    /// The version vector of what this replica holds.
    public func versionVector() throws -> VersionVector {
        try store.read { r in try Self.versionVector(r) }
    }


    static func versionVector(_ r: any KeyValueReader) throws -> VersionVector {
        var vector: VersionVector = [:]
        try r.scan(Tables.vector) { key, value in
            if let origin = Bytes.u64(key), let sequence = Bytes.u64(value) { vector[ReplicaID(origin)] = sequence }
            return true
        }
        return vector
    }

    /// The hash chain of `origin` at `sequence` (16 bytes), or nil when not held.
    public func chain(_ origin: ReplicaID, at sequence: UInt64) throws -> [UInt8]? {
        try store.read { r in try r.get(Tables.chains, Keys.change(origin, sequence)) }
    }

    /// The hash chain at the head of every origin in `vector`.
    public func chains(at vector: VersionVector) throws -> [ReplicaID: [UInt8]] {
        try store.read { r in
            var result: [ReplicaID: [UInt8]] = [:]
            for (origin, sequence) in vector where sequence > 0 {
                result[origin] = try r.get(Tables.chains, Keys.change(origin, sequence))
            }
            return result
        }
    }

    /// Changes this replica holds that `vector` does not cover, origin by origin in sequence
    /// order (every version of a forked sequence, never split), about `limit` of them. Costs one
    /// cursor range per origin: proportional to what is missing, not to the size of the ledger.
    /// The owners' origins come first (the current and former owners'; then the others, each group in ascending order), so a
    /// joining replica receives the genesis, grants and revocations before the members' changes
    /// they judge, and need not recompute its state when the genesis arrives.
    public func changes(notCoveredBy vector: VersionVector, limit: Int = .max) throws -> [Change] {
        try batch(notCoveredBy: vector, limit: limit).changes
    }

    /// ``changes(notCoveredBy:limit:)`` as the log holds them: each change's canonical encoding,
    /// with its origin and sequence (from the log key), not decoded, and the signed head stored
    /// at it. What a sync sends. In a household with an owner each origin's part ends at a change
    /// with a head (the rest of it comes in a later call), so the changes can be authenticated.
    // long-function: one read of the log, origin by origin, whose cut at signed heads needs the
    // whole walk's state; splitting it would pass that state around.
    public func encodedChanges(notCoveredBy vector: VersionVector, limit: Int = .max) throws -> [EncodedChange] {
        try store.read { r in
            var result: [EncodedChange] = []
            let mine = try Self.versionVector(r)
            var missing = mine.filter { (vector[$0.key] ?? 0) < $0.value }.keys.sorted()
            if let ownership = try Self.ownership(r) {
                // Every owner's, the former ones' too: their grants are what lets a receiver store
                // the members' changes (it refuses an origin whose claim names no member).
                var owners: [ReplicaID] = [], others: [ReplicaID] = []
                for origin in missing {
                    if let key = try r.get(Tables.claims, Keys.origin(origin)), ownership.hasOwned(key) {
                        owners.append(origin)
                    } else {
                        others.append(origin)
                    }
                }
                missing = owners + others
            }
            let needsHeads = try Self.needsHeads(r).needed
            for origin in missing {
                guard result.count < limit else { break }
                let startSequence = (vector[origin] ?? 0) + 1
                let start = Keys.change(origin, startSequence)
                guard needsHeads else {
                    var lastSequence: UInt64 = 0
                    try r.scan(Tables.changes, prefix: Keys.origin(origin), from: start, reverse: false) { key, value in
                        guard key.count == 24 else { throw LedgerError.corrupted("change log key") }
                        let sequence = Bytes.u64(at: 8, key)
                        if result.count >= limit && sequence != lastSequence { return false }
                        result.append(EncodedChange(origin: origin, sequence: sequence, bytes: value))
                        lastSequence = sequence
                        return true
                    }
                    continue
                }
                if try r.get(Tables.forks, Keys.origin(origin)) != nil {
                    try Self.appendForkedPart(of: origin, from: startSequence, room: limit - result.count, in: r, to: &result)
                    continue
                }
                // The part ends at the highest head that fits, or, as a page's first part, at the
                // first head (a replica holds one at every ``Membership/headInterval``-th sequence
                // and at the end of what it received): changes no head covers are not sent.
                let room = UInt64(limit - result.count)
                let roomEnd = startSequence > UInt64.max - room ? UInt64.max : startSequence + room
                var heads: [UInt64: [(version: UInt64, head: SignedHead)]] = [:]
                var bound: UInt64?
                try r.scan(Tables.heads, prefix: Keys.origin(origin), from: start, reverse: false) { key, value in
                    let head = try StoredHead.decode(key: key, value: value)
                    if head.sequence >= roomEnd && (bound != nil || !result.isEmpty) { return false }
                    heads[head.sequence, default: []].append((Bytes.u64(at: 16, key), head))
                    bound = head.sequence
                    return head.sequence < roomEnd
                }
                guard let bound else { continue }
                let first = result.count
                try r.scan(Tables.changes, prefix: Keys.origin(origin), from: start, reverse: false) { key, value in
                    guard key.count == 24 else { throw LedgerError.corrupted("change log key") }
                    let sequence = Bytes.u64(at: 8, key)
                    guard sequence <= bound else { return false }
                    let version = Bytes.u64(at: 16, key)
                    result.append(EncodedChange(origin: origin, sequence: sequence, bytes: value,
                                                head: heads[sequence]?.first { $0.version == version }?.head, mayEndBatch: false))
                    return true
                }
                for i in first..<result.count {
                    let sequence = result[i].sequence
                    result[i].mayEndBatch = heads[sequence] != nil && (i + 1 == result.count || result[i + 1].sequence != sequence)
                }
            }
            return result
        }
    }

    /// The part of a forked origin (one that holds several versions at some sequence) from
    /// `start`: what ``encodedChanges(notCoveredBy:limit:)`` sends of it. A receiver takes a
    /// batch of an origin only when the batch's heads reach every version in it, and a head
    /// reaches a version at a forked sequence only when its branch chooses that version there
    /// (or it is that version's own head). So here a batch may end only after a head that leaves
    /// no version before it unreached, and the part runs on to such a point however far it is
    /// (up to the origin's last head; forks are rare: restores from stale copies, or a member
    /// forking on purpose). A version that no head this replica holds reaches is not sent:
    /// no receiver could authenticate it, and it would hold back the rest of the origin.
    static func appendForkedPart(of origin: ReplicaID, from start: UInt64, room: Int, in r: any KeyValueReader,
                                 to result: inout [EncodedChange]) throws {
        struct Held { var sequence: UInt64; var version: UInt64; var bytes: [UInt8]; var head: SignedHead? }
        var heads: [UInt64: [(version: UInt64, head: SignedHead)]] = [:]
        var lastHead: UInt64?
        try r.scan(Tables.heads, prefix: Keys.origin(origin), from: Keys.change(origin, start), reverse: false) { key, value in
            let head = try StoredHead.decode(key: key, value: value)
            heads[head.sequence, default: []].append((Bytes.u64(at: 16, key), head))
            lastHead = head.sequence
            return true
        }
        guard let lastHead else { return }
        var held: [Held] = []
        var versionsAt: [UInt64: Int] = [:]
        try r.scan(Tables.changes, prefix: Keys.origin(origin), from: Keys.change(origin, start), reverse: false) { key, value in
            guard key.count == 24 else { throw LedgerError.corrupted("change log key") }
            let sequence = Bytes.u64(at: 8, key), version = Bytes.u64(at: 16, key)
            guard sequence <= lastHead else { return false }
            held.append(Held(sequence: sequence, version: version, bytes: value, head: heads[sequence]?.first { $0.version == version }?.head))
            versionsAt[sequence, default: 0] += 1
            return true
        }
        // Whether `head` (stored at the version `tip` of its sequence) reaches the version of `c`.
        func reaches(_ head: SignedHead, tip: UInt64, _ c: Held) -> Bool {
            guard c.sequence <= head.sequence else { return false }
            if c.sequence == head.sequence { return c.version == tip }
            if versionsAt[c.sequence] == 1 { return true }
            return head.choices.contains { $0.sequence == c.sequence && $0.version == c.version }
        }
        let allHeads = heads.flatMap { entry in entry.value.map { (sequence: entry.key, version: $0.version, head: $0.head) } }
        held.removeAll { c in
            versionsAt[c.sequence]! > 1 && !allHeads.contains { reaches($0.head, tip: $0.version, c) }
        }
        versionsAt = [:]
        for c in held { versionsAt[c.sequence, default: 0] += 1 }
        // Walk the part: the versions of forked sequences not yet reached by a head at or before
        // each point; a batch may end at a head once that set is empty.
        var unreached: [Held] = []
        var part: [EncodedChange] = []
        for (i, c) in held.enumerated() {
            if versionsAt[c.sequence]! > 1 { unreached.append(c) }
            if let head = c.head { unreached.removeAll { reaches(head, tip: c.version, $0) } }
            let lastAtSequence = i + 1 == held.count || held[i + 1].sequence != c.sequence
            let mayEnd = c.head != nil && lastAtSequence && unreached.isEmpty
            part.append(EncodedChange(origin: origin, sequence: c.sequence, bytes: c.bytes, head: c.head, mayEndBatch: mayEnd))
            if mayEnd && part.count >= room { break }
        }
        // What follows the last point a batch may end at could not be authenticated: left out.
        guard let end = part.lastIndex(where: \.mayEndBatch) else { return }
        result += part[...end]
    }

    /// Applies received changes in one write transaction, idempotently. Each change is applied
    /// whole or not at all; duplicates are skipped and gaps refused (they will be sent again).
    ///
    /// In a household with an owner, every new change must be reached by one of `heads`, signed
    /// by the member key its origin's claim names (docs/SECURITY.md, "Signed chain heads"): the
    /// changes of an origin that are not all reached are refused (nothing of that origin is
    /// stored; counted in ``ApplyReport/unauthenticated``), the rest of the batch applies. The
    /// heads that verified are stored, to pass on.
    ///
    /// A received (authenticated) change of this replica's own origin that it does not hold
    /// proves its files were restored from an older copy: it then continues under a fresh
    /// replica id (in the same transaction), so it never hands out a (replica id, sequence) pair
    /// twice.
    ///
    /// `received`, when given, holds the bytes each change was decoded from (one per change, not
    /// necessarily canonical): a ``preparer`` that remembers changes may find a change's
    /// prepared form by them without encoding it again.
    ///
    /// `recomputes` false: a batch that would make this replica recompute its merged state is
    /// not applied (``RecomputationsSpent`` is thrown, nothing is written); a session passes it
    /// once it spent ``Limits/recomputationsPerSessionMax``.
    @discardableResult
    public func applyRemote(_ changes: [Change], heads: [SignedHead] = [], recomputes: Bool = true) throws -> ApplyReport {
        let early = Self.heldBack(changes, heads: heads, now: clock.nowMillis())
        guard !early.isEmpty else {
            return try applyAuthenticatedOrigins(changes, heads: heads, recomputes: recomputes)
        }
        let kept = changes.indices.filter { !early.contains($0) }
        var report = try applyAuthenticatedOrigins(kept.map { changes[$0] },
                                                   heads: heads, recomputes: recomputes)
        report.heldBack = early.count
        return report
    }

    /// Thrown by ``applyRemote(_:heads:recomputes:)`` for a batch that needs a
    /// recomputation when none is allowed: a session spent its recomputations.
    public struct RecomputationsSpent: Error, CustomStringConvertible {
        public var description: String {
            "the peer's changes already made this laptop recompute its ledger \(Limits.recomputationsPerSessionMax) times "
                + "in this session (the most one session may); the rest comes in the next session"
        }
    }

    /// ``applyRemote(_:heads:recomputes:)`` of the changes not held back.
    private func applyAuthenticatedOrigins(_ changes: [Change], heads: [SignedHead],
                                           recomputes: Bool) throws -> ApplyReport {
        // The batch is applied, then checked, in one transaction; when an origin fails the check
        // the transaction is rolled back and the batch applied again without that origin. Each
        // round refuses at least one more origin, so this ends.
        var refused: Set<ReplicaID> = []
        while true {
            do {
                if refused.isEmpty { return try applyAuthenticated(changes, heads: heads, recomputes: recomputes) }
                let kept = changes.indices.filter { !refused.contains(changes[$0].origin) }
                var report = try applyAuthenticated(kept.map { changes[$0] },
                                                    heads: heads.filter { !refused.contains($0.origin) }, recomputes: recomputes)
                report.unauthenticated = changes.count - kept.count
                return report
            } catch let failed as UnauthenticatedOrigins {
                refused.formUnion(failed.origins)
            }
        }
    }

    /// The indices of the changes in a received batch to hold back because of clock skew: for each
    /// origin with a change stamped more than ``Limits/clockAheadMillisMax`` after `now`, that
    /// change and every later one of the origin, and the ones before it back to the last that
    /// `heads` reaches (the batch's heads for the origin, if it has any), so what is kept can be
    /// authenticated. Depends only on the batch and `now`: identical on every replica with the
    /// same clock, and once every clock passes a stamp, every replica admits the same changes.
    static func heldBack(_ changes: [Change], heads: [SignedHead], now: Int64) -> Set<Int> {
        let (latest, overflow) = now.addingReportingOverflow(Limits.clockAheadMillisMax)
        guard !overflow else { return [] }
        var cut: [ReplicaID: UInt64] = [:]  // origin → first sequence held back
        for change in changes where change.hlc.millis > latest {
            cut[change.origin] = min(cut[change.origin] ?? .max, change.sequence)
        }
        guard !cut.isEmpty else { return [] }
        for (origin, first) in cut {
            let reached = heads.filter { $0.origin == origin }.map(\.sequence)
            if !reached.isEmpty { cut[origin] = (reached.filter { $0 < first }.max() ?? 0) + 1 }
        }
        return Set(changes.indices.filter { i in cut[changes[i].origin].map { changes[i].sequence >= $0 } ?? false })
    }

    /// Thrown inside ``applyRemote(_:heads:recomputes:)``'s transaction to roll it back.
    private struct UnauthenticatedOrigins: Error {
        var origins: Set<ReplicaID>
    }

    // long-function: one write transaction whose steps (apply, offer refused first versions again,
    // authenticate, rotate) share its counts and outcomes and roll back together.
    private func applyAuthenticated(_ changes: [Change], heads: [SignedHead], recomputes: Bool) throws -> ApplyReport {
        let now = clock.nowMillis()
        var generator = random
        let verifier = self.verifier
        let splitter = workSplitter
        let (report, current): (ApplyReport, ReplicaID) = try store.write { w in
            // Read here, not from `replicaID`: another process (the CLI, when this is the daemon)
            // may have taken a derived id for its first change in the household, or rotated.
            let me = try Self.currentReplicaID(w)
            var report = ApplyReport()
            var ownHistoryForked = false
            var outcomes: [ApplyOutcome] = [], versions: [[UInt8]] = []
            outcomes.reserveCapacity(changes.count)
            versions.reserveCapacity(changes.count)
            var needsHeads = false
            var notAdmitted: Set<ReplicaID> = []
            try Self.withApplyContext(w, now: now, verifier: verifier, preparer: preparer) { context in
                context.admitsMembersOnly = true
                defer { report.recomputed = context.recomputePending }
                // The pure part of each change (encodings and hashes) is prepared on the
                // injected splitter's producing side, on another core in the CLI, while this
                // thread applies.
                func count(_ change: Change, _ outcome: ApplyOutcome) {
                    switch outcome {
                    case .applied: report.applied += 1
                    case .duplicate: report.duplicates += 1
                    case .gap where notAdmitted.contains(change.origin): report.notAdmitted += 1
                    case .gap: report.gaps += 1
                    case .forkedVersion: report.forkedVersions += 1
                    case .notAdmitted: report.notAdmitted += 1
                    }
                    if outcome == .notAdmitted { notAdmitted.insert(change.origin) }
                    if change.origin == me && (outcome == .applied || outcome == .forkedVersion) { ownHistoryForked = true }
                }
                try Self.apply(changes, in: context, splitter: splitter) { change, outcome, version in
                    count(change, outcome)
                    outcomes.append(outcome)
                    versions.append(version)
                }
                // A version of an origin's first change refused before the version carrying the
                // claim opened the origin later in the batch (versions go in hash order): now it
                // is another version of a claimed origin, offered once more.
                var again: [Int] = []
                for i in changes.indices where outcomes[i] == .notAdmitted && changes[i].sequence == 1 {
                    if try context.heldSequence(changes[i].origin) > 0 { again.append(i) }
                }
                if !again.isEmpty {
                    var next = again.makeIterator()
                    try Self.apply(again.map { changes[$0] }, in: context,
                                   splitter: splitter) { change, outcome, _ in
                        guard let i = next.next() else { return }
                        report.notAdmitted -= 1
                        count(change, outcome)
                        outcomes[i] = outcome
                    }
                }
                if context.recomputePending && !recomputes { throw RecomputationsSpent() }
                // Read after applying: a replica without a pin takes the first genuine genesis
                // it applies, and the changes after it in the batch are then checked too.
                let household: RecordID
                (household, needsHeads) = try Self.needsHeads(w)
                guard needsHeads else { return }
                let failed = try Self.unauthenticatedOrigins(changes, versions: versions, outcomes: outcomes, heads: heads,
                                                             household: household, in: context)
                if !failed.isEmpty { throw UnauthenticatedOrigins(origins: failed) }
            }
            guard ownHistoryForked else { return (report, me) }
            // In a household with an owner such changes are authenticated: only this device's own
            // key (a stale copy of this device) signs them. Without one they prove nothing (no
            // member keys), so a replica takes at most ``rotationsMax`` fresh ids in its life for
            // them, then refuses the batch.
            if !needsHeads {
                let rotations = Bytes.u64(try w.get(Tables.meta, Keys.rotations)) ?? 0
                guard rotations < UInt64(Self.rotationsMax) else { throw LedgerError.tooManyRotations }
                try w.put(Tables.meta, Keys.rotations, Bytes.u64(rotations + 1))
            }
            report.rotatedReplicaID = true
            return (report, try Self.rotate(from: me, in: w, generator: &generator))
        }
        random = generator
        replicaID = current
        return report
    }

    /// The most fresh replica ids a replica takes because changes of its own origin that it
    /// does not hold arrived (restores from stale copies: rare; see docs/SYNC.md).
    public static let rotationsMax = 8

    static func currentReplicaID(_ r: any KeyValueReader) throws -> ReplicaID {
        guard let raw = Bytes.u64(try r.get(Tables.meta, Keys.replica)) else { throw LedgerError.corrupted("replica id missing") }
        return ReplicaID(raw)
    }

    static func rotate(from old: ReplicaID, in w: any KeyValueWriter, generator: inout any RandomNumberGenerator) throws -> ReplicaID {
        var fresh = ReplicaID(generator.next() | 1)
        while true {
            let taken = try w.get(Tables.vector, Keys.origin(fresh)) != nil
            if fresh != old && !taken { break }
            fresh = ReplicaID(generator.next() | 1)
        }
        try w.put(Tables.meta, Keys.replica, Bytes.u64(fresh.rawValue))
        return fresh
    }
}

extension Replica {
    /// Moves this replica to a fresh replica id (not one its vector holds): what `restore` does,
    /// since a restored copy may be behind changes its earlier self made under its id after the
    /// backup, so writing on under that id could reuse an (origin, sequence) pair. In a household
    /// with an owner, its next local change then claims a fresh id derived from its key as usual.
    public func continueUnderFreshReplicaID() throws {
        var generator = random
        let fresh = try store.write { w in try Self.rotate(from: try Self.currentReplicaID(w), in: w, generator: &generator) }
        random = generator
        replicaID = fresh
    }
}

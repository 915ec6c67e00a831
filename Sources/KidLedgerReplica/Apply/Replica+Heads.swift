import KidLedgerDomain

extension Tables {
    /// Signed chain heads (issue 20, point 2; docs/SECURITY.md, "Signed chain heads"): the log key
    /// (origin 8 + sequence 8 + version hash 8) of the change at a head's sequence on its branch →
    /// the 64-byte signature, then the head's choices (``HeadChoice``: sequence u64 and version
    /// u64, 16 bytes each, ascending). Written by the author at commit and by a receiver for every
    /// head it verified; part of the log (not of the merged state, not in the digest, untouched by
    /// a rebuild).
    public static let heads = Table("heads")
    /// Forked origins: origin (8) → the lowest sequence at which the log holds several versions
    /// (u64). Below it every replica's hash chain is every branch's.
    public static let forks = Table("forks")
    /// Origins that forked a sequence into more than ``Limits/forkVersionsPerSequenceMax``
    /// versions: origin (8) → empty. Part of the log like ``forks`` (written when the log first
    /// holds one version too many, never removed): every ledger change of the member whose claim
    /// names such an origin is rejected (``RejectedReason/overForkLimit``).
    public static let forkFloods = Table("forkFloods")
}

/// A signed head as the heads table holds it.
enum StoredHead {
    static func value(_ head: SignedHead) -> [UInt8] {
        var w = ByteWriter(capacity: 64 + 16 * head.choices.count)
        w.write(raw: head.signature)
        for choice in head.choices {
            w.write(bigEndian: choice.sequence)
            w.write(bigEndian: choice.version)
        }
        return w.bytes
    }

    /// The head stored under log key `key` with `value`.
    static func decode(key: [UInt8], value: [UInt8]) throws -> SignedHead {
        guard key.count == 24, value.count >= 64, (value.count - 64) % 16 == 0 else {
            throw LedgerError.corrupted("a signed head's entry is damaged")
        }
        var head = SignedHead(origin: ReplicaID(Bytes.u64(at: 0, key)), sequence: Bytes.u64(at: 8, key),
                              signature: Array(value.prefix(64)))
        var at = 64
        while at < value.count {
            head.choices.append(HeadChoice(sequence: Bytes.u64(at: at, value), version: Bytes.u64(at: at + 8, value)))
            at += 16
        }
        return head
    }
}

/// A head's branch as a replica's log holds it: the chain there, and the version it takes at each
/// forked sequence it crosses.
struct Branch {
    var chain: [UInt8]
    /// Sequence → version hash (8 bytes), at the log's forked sequences up to the head.
    var choices: [UInt64: [UInt8]] = [:]
    /// Sequence → version hash, at every sequence from ``forkedFrom`` up to the head.
    var path: [UInt64: [UInt8]] = [:]
    /// The origin's lowest forked sequence (`UInt64.max`: none).
    var forkedFrom: UInt64
}

extension Replica {
    /// Whether changes in the household `r` holds must be authenticated by signed heads: it has
    /// an owner (member keys exist).
    static func needsHeads(_ r: any KeyValueReader) throws -> (household: RecordID, needed: Bool) {
        guard let pin = try pinnedHousehold(r) else { return (RecordID(high: 0, low: 0), false) }
        return (pin.id, !pin.owner.isEmpty || pin.ownerPending)
    }

    /// Signs and stores the heads of `changes` (just committed under one origin, in sequence
    /// order; `versions` holds their version hashes): at the last one and at every sequence that
    /// is a multiple of ``Membership/headInterval``, over the origin's chain there. Only in an
    /// owned household, and only when the origin is `signer`'s (its claim names the key): an
    /// origin of a household without an owner, or one this key did not claim, has no member key
    /// to authenticate to. A replica never extends a forked origin of its own (it takes a new id
    /// when it learns of the fork), so its chain is its branch's.
    static func signHeads(of changes: [Change], versions: [[UInt8]], signer: MemberSigner?, in w: any KeyValueWriter) throws {
        guard let signer, let last = changes.last, case let (household, true) = try needsHeads(w),
              try w.get(Tables.claims, Keys.origin(last.origin)) == signer.key else { return }
        for (i, change) in changes.enumerated() where i == changes.count - 1 || change.sequence % Membership.headInterval == 0 {
            guard let chain = try w.get(Tables.chains, Keys.change(change.origin, change.sequence)) else {
                throw LedgerError.corrupted("a committed change without its chain link")
            }
            let head = signer.head(household: household, origin: change.origin, sequence: change.sequence, chain: chain)
            try w.put(Tables.heads, Keys.change(change.origin, change.sequence, version: versions[i]), StoredHead.value(head))
        }
    }

    /// The signed heads this replica holds for `origin`, in sequence order.
    public func signedHeads(of origin: ReplicaID) throws -> [SignedHead] {
        try store.read { r in
            var heads: [SignedHead] = []
            try r.scan(Tables.heads, prefix: Keys.origin(origin)) { key, value in
                heads.append(try StoredHead.decode(key: key, value: value))
                return true
            }
            return heads
        }
    }

    /// The branch of `head` in the log `r` holds: below the origin's lowest forked sequence the
    /// stored chain; from there one link per sequence, over the version the head chooses, else the
    /// one `preferred` names (the version a batch brought at that sequence, when it brought one),
    /// else the only one held. Nil when the log lacks a sequence, or a forked sequence has no
    /// choice, or a choice names a version the log does not hold (at a sequence forked past
    /// ``Limits/forkVersionsPerSequenceMax``, the choice's hash is the version).
    static func branch(of head: SignedHead, preferred: [UInt64: [UInt8]] = [:], in r: any KeyValueReader) throws -> Branch? {
        let forkedFrom = Bytes.u64(try r.get(Tables.forks, Keys.origin(head.origin))) ?? .max
        guard head.sequence >= forkedFrom else {
            return try r.get(Tables.chains, Keys.change(head.origin, head.sequence)).map { Branch(chain: $0, forkedFrom: forkedFrom) }
        }
        var choices: [UInt64: UInt64] = [:]
        for choice in head.choices { choices[choice.sequence] = choice.version }
        var previous = forkedFrom > 1 ? try r.get(Tables.chains, Keys.change(head.origin, forkedFrom - 1)) : zeroLink
        var branch = Branch(chain: [], forkedFrom: forkedFrom)
        var sequence = forkedFrom
        while let link = previous, sequence <= head.sequence {
            var held: [[UInt8]] = []
            try r.scan(Tables.changes, prefix: Keys.change(head.origin, sequence)) { key, _ in
                held.append(Array(key.suffix(8)))
                return true
            }
            let chosen: [UInt8]?
            if let choice = choices[sequence] {
                // At a sequence forked past the limit, replicas keep different versions (each the
                // first ones it received): the head's choice there names its version by hash, and
                // the chain through it needs no more. Otherwise a replica that kept others could
                // never take the origin's later changes (hostile seed 4001288).
                chosen = held.first { Bytes.u64(at: 0, $0) == choice }
                    ?? (held.count > Limits.forkVersionsPerSequenceMax ? Bytes.u64(choice) : nil)
            } else if let batch = preferred[sequence], held.contains(batch) {
                chosen = batch
            } else {
                chosen = held.count == 1 ? held[0] : nil
            }
            guard let chosen else { return nil }
            if held.count > 1 { branch.choices[sequence] = chosen }
            branch.path[sequence] = chosen
            previous = Replica.chainLink(after: link, onlyVersion: chosen)
            sequence += 1
        }
        guard let chain = previous else { return nil }
        branch.chain = chain
        return branch
    }

    /// Records that `origin` forks at `sequence` (a version other than the `held` ones arrives
    /// there), before the new version is written: a head stored at or above a sequence that held
    /// one version until now chooses that version there, so its branch stays known.
    /// Returns whether `sequence` is the origin's new lowest forked sequence.
    @discardableResult
    static func noteFork(of origin: ReplicaID, at sequence: UInt64, held: [[UInt8]], in w: any KeyValueWriter) throws -> Bool {
        let forkedFrom = Bytes.u64(try w.get(Tables.forks, Keys.origin(origin))) ?? .max
        let lowered = sequence < forkedFrom
        if lowered { try w.put(Tables.forks, Keys.origin(origin), Bytes.u64(sequence)) }
        guard held.count == 1 else { return lowered }  // several already: the heads above choose there
        var rewritten: [([UInt8], [UInt8])] = []
        try w.scan(Tables.heads, prefix: Keys.origin(origin), from: Keys.change(origin, sequence), reverse: false) { key, value in
            var head = try StoredHead.decode(key: key, value: value)
            head.choices.append(HeadChoice(sequence: sequence, version: Bytes.u64(at: 0, held[0])))
            head.choices.sort { $0.sequence < $1.sequence }
            rewritten.append((key, StoredHead.value(head)))
            return true
        }
        for (key, value) in rewritten { try w.put(Tables.heads, key, value) }
        return lowered
    }

    /// The origins of a just-applied batch (in `context`, which wrote it) whose new versions are
    /// not all authenticated by the batch's verified heads: their member's claim is unknown, or
    /// no valid head among `heads` reaches them (docs/SECURITY.md, "Signed chain heads"). Stores
    /// the verified heads. `changes`, `versions` and `outcomes` are the batch, each change's
    /// version hash and what applying it did. One signature check per head: the batch's changes
    /// are checked through the hash chain.
    static func unauthenticatedOrigins(_ changes: [Change], versions: [[UInt8]], outcomes: [ApplyOutcome],
                                       heads: [SignedHead], household: RecordID, in context: ApplyContext) throws -> Set<ReplicaID> {
        var batches: [ReplicaID: [Int]] = [:]
        for i in changes.indices { batches[changes[i].origin, default: []].append(i) }
        var refused: Set<ReplicaID> = []
        var verified: [([UInt8], [UInt8])] = []
        for (origin, indices) in batches {
            guard indices.contains(where: { outcomes[$0] == .applied || outcomes[$0] == .forkedVersion }) else { continue }
            guard let key = try authorKey(of: origin, batch: indices.map { changes[$0] }, household: household, in: context) else {
                refused.insert(origin)
                continue
            }
            let forked = try context.store.get(Tables.forks, Keys.origin(origin)) != nil
            // At a sequence where the batch brought one version: that one (a forked origin only).
            var preferred: [UInt64: [UInt8]] = [:]
            if forked {
                var counts: [UInt64: Int] = [:]
                for i in indices { counts[changes[i].sequence, default: 0] += 1 }
                for i in indices where counts[changes[i].sequence] == 1 { preferred[changes[i].sequence] = versions[i] }
            }
            var reached: [(sequence: UInt64, branch: Branch)] = []
            for (n, head) in heads.enumerated() where head.origin == origin {
                // A head counts once, and only at the sequence of a change of its origin in the batch.
                guard !heads[..<n].contains(head), let at = indices.first(where: { changes[$0].sequence == head.sequence }),
                      let branch = try branch(of: head, preferred: preferred, in: context.store),
                      Membership.isValid(head, chain: branch.chain, household: household, key: key, verifier: context.verifier)
                else { continue }
                reached.append((head.sequence, branch))
                var stored = head
                stored.choices = branch.choices
                    .map { HeadChoice(sequence: $0.key, version: Bytes.u64(at: 0, $0.value)) }.sorted { $0.sequence < $1.sequence }
                let tip = branch.path[head.sequence] ?? versions[at]
                verified.append((Keys.change(origin, head.sequence, version: tip), StoredHead.value(stored)))
            }
            let covered = indices.allSatisfy { i in
                guard outcomes[i] == .applied || outcomes[i] == .forkedVersion else { return true }
                let sequence = changes[i].sequence
                return reached.contains { head in
                    head.sequence >= sequence && (sequence < head.branch.forkedFrom || head.branch.path[sequence] == versions[i])
                }
            }
            if !covered { refused.insert(origin) }
        }
        // A head at a version the log did not keep (one over the fork limit) names no change.
        for (key, value) in verified where !refused.contains(ReplicaID(Bytes.u64(at: 0, key))) {
            guard try context.store.get(Tables.changes, key) != nil else { continue }
            try context.store.put(Tables.heads, key, value)
        }
        return refused
    }

    /// The member key `origin`'s changes are authenticated to: the one its stored claim names, or
    /// a valid claim in its first change in `batch` (which the membership rule may have parked,
    /// when the genesis is not in yet). Nil when neither.
    private static func authorKey(of origin: ReplicaID, batch: [Change], household: RecordID, in context: ApplyContext) throws -> [UInt8]? {
        if let key = try context.claim(origin) { return key }
        for change in batch where change.sequence == 1 {
            for case .claim(let c) in change.operations
            where Membership.claimProblem(c, origin: origin, sequence: 1, household: household, verifier: context.verifier) == nil {
                return c.member
            }
        }
        return nil
    }

    /// ``verify()``'s check of the signed heads: each names a change the log holds and is the
    /// signature, over its branch's chain, of the key its origin's claim names.
    func verifyHeads(_ r: any KeyValueReader, problem: (String) -> Void) throws {
        // The household's id from its record (verify reads no other key of meta than the digest);
        // before the genesis is in, the signatures cannot be checked.
        var household: RecordID?
        try r.scan(Tables.households) { key, _ in
            if key.count == 16 { household = Keys.id(in: key, at: 0) }
            return false
        }
        try r.scan(Tables.heads) { key, value in
            let head: SignedHead
            do { head = try StoredHead.decode(key: key, value: value) } catch {
                problem("a signed head's entry is damaged")
                return true
            }
            guard try r.get(Tables.changes, key) != nil else {
                problem("signed head of \(head.origin) at \(head.sequence) names no change of the log")
                return true
            }
            guard let household else { return true }
            guard let member = try r.get(Tables.claims, Keys.origin(head.origin)),
                  let branch = try Self.branch(of: head, in: r),
                  Membership.isValid(head, chain: branch.chain, household: household, key: member, verifier: verifier) else {
                problem("signed head of \(head.origin) at \(head.sequence) is not its member's signature over its branch")
                return true
            }
            return true
        }
    }
}

extension SignedHead {
    /// The heads a batch of `changes` carries: of those stored at its changes, the ones at a
    /// multiple of ``Membership/headInterval`` (so every receiver holds a head at least that often,
    /// and can end its own batches there) and the ones at the last sequence of each origin in
    /// the batch (which authenticate the rest), and the ones at a sequence where the batch holds
    /// several versions (the tips of a forked origin's shorter branches are there).
    public static func sent(with changes: ArraySlice<EncodedChange>) -> [SignedHead] {
        var lastSequence: [ReplicaID: UInt64] = [:]
        for change in changes { lastSequence[change.origin] = max(lastSequence[change.origin] ?? 0, change.sequence) }
        // An origin with several versions at a sequence in the slice: all its heads, since each
        // reaches only its own branch's versions (``Replica/appendForkedPart``).
        var forked: Set<ReplicaID> = []
        for i in changes.indices.dropFirst() where changes[i - 1].origin == changes[i].origin && changes[i - 1].sequence == changes[i].sequence {
            forked.insert(changes[i].origin)
        }
        return changes.indices.compactMap { i in
            guard let head = changes[i].head,
                  head.sequence == lastSequence[head.origin] || head.sequence % Membership.headInterval == 0 || forked.contains(head.origin)
            else { return nil }
            return head
        }
    }
}

extension Replica {
    /// ``encodedChanges(notCoveredBy:limit:)`` decoded, with the heads a batch of them carries
    /// (``SignedHead/sent(with:)``): what a peer's ``applyRemote(_:heads:recomputes:)`` takes.
    public func batch(notCoveredBy vector: VersionVector, limit: Int = .max) throws -> (changes: [Change], heads: [SignedHead]) {
        let encoded = try encodedChanges(notCoveredBy: vector, limit: limit)
        let changes = try encoded.map { entry in
            do { return try RecordCodec.decodeChange(entry.bytes) } catch {
                throw LedgerError.corrupted("change log entry: \(error)")
            }
        }
        return (changes, SignedHead.sent(with: encoded[...]))
    }

    /// Applies a ``batch(notCoveredBy:limit:)`` of another replica.
    @discardableResult
    public func applyRemote(_ batch: (changes: [Change], heads: [SignedHead])) throws -> ApplyReport {
        try applyRemote(batch.changes, heads: batch.heads)
    }
}

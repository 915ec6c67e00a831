import KidLedgerDomain

extension Tables {
    /// Valid owner transfers: epoch (8, big-endian) + hash of the encoded operation (16) → encoded
    /// operation. Key order is the ownership rule's order: by epoch, then the smaller hash first.
    public static let transfers = Table("transfers")
}

/// Who owns the household: a function of its genesis and the set of valid transfers in the log
/// alone, so every replica holding the same log agrees (docs/SECURITY.md, "A stolen laptop").
struct Ownership: Equatable {
    /// One owner's term: the owner, and the transfer that ended it (nil for the current owner).
    struct Term: Equatable {
        var owner: [UInt8]
        var endedBy: OwnerTransfer?
    }

    var household: RecordID
    /// The owner the genesis names (and the pin holds).
    var genesisOwner: [UInt8]
    /// The recovery key the genesis names, or empty.
    var recovery: [UInt8]
    /// Every term, oldest first: the genesis owner's, then one per epoch's winning transfer.
    var terms: [Term]
    /// The epoch of the current owner's transfer (0: the genesis owner).
    var epoch: UInt64
    /// How many valid transfers there are.
    var transfers: Int
    /// Epochs with more than one valid transfer (the smaller hash won).
    var conflictedEpochs: [UInt64]

    var current: [UInt8] { terms[terms.count - 1].owner }

    /// Whether an owner whose term covers `change` made `isSignedBy`'s signature: the current
    /// owner, or a former owner whose term's ending transfer has seen the change
    /// (``OwnerTransfer/sawChange(_:forkedFrom:)``).
    func signedByOwner(of change: Change, forkedFrom: UInt64?, _ isSignedBy: ([UInt8]) -> Bool) -> Bool {
        ownerSigning(change, forkedFrom: forkedFrom, isSignedBy) != nil
    }

    /// The owner whose signature ``signedByOwner(of:forkedFrom:_:)`` found, or nil.
    func ownerSigning(_ change: Change, forkedFrom: UInt64?, _ isSignedBy: ([UInt8]) -> Bool) -> [UInt8]? {
        var key: [UInt8]?  // the change's seen-change key, computed once, for a transfer that names them
        for term in terms {
            if let end = term.endedBy, !end.sawChange(change, forkedFrom: forkedFrom, key: &key) { continue }
            if isSignedBy(term.owner) { return term.owner }
        }
        return nil
    }

    /// Whether `key` is or was the owner (a member until revoked, granted or not).
    func hasOwned(_ key: [UInt8]) -> Bool { terms.contains { $0.owner == key } }
}

extension OwnerTransfer {
    /// Whether this transfer saw `change` (whose origin's lowest forked sequence is
    /// `forkedFrom`): it names the change exactly (``seenChanges``: any other version of it, a
    /// thief's fork of the former owner's origin, is not seen, and does not unsee this one); a
    /// transfer of the older format, which names sequences only, covers it when at or below its
    /// `seen` entry and below `forkedFrom` (``Replica/covered(_:_:seenUpTo:forkedFrom:)``: there a
    /// vector cannot tell which version it saw). `key` caches the change's seen-change key.
    func sawChange(_ change: Change, forkedFrom: UInt64?, key: inout [UInt8]?) -> Bool {
        guard let named = seenChanges else {
            return Replica.covered(change.sequence, change.origin, seenUpTo: seen, forkedFrom: forkedFrom)
        }
        guard change.sequence <= seen[change.origin] ?? 0 else { return false }
        let mine = key ?? Membership.seenChangeKey(origin: change.origin, encodedChange: RecordCodec.encode(change))
        key = mine
        return Self.contains(named, mine)
    }

    /// Whether the ascending seen-change keys `sorted` name a change of `origin` (their first 8
    /// bytes: ``Membership/seenChangeKey(origin:encodedChange:)``; binary search).
    static func namesOrigin(_ sorted: [[UInt8]], _ origin: ReplicaID) -> Bool {
        var prefix = ByteWriter(capacity: 8)
        prefix.write(bigEndian: origin.rawValue)
        var low = 0, high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if sorted[mid].prefix(8).lexicographicallyPrecedes(prefix.bytes) { low = mid + 1 } else { high = mid }
        }
        return low < sorted.count && sorted[low].prefix(8).elementsEqual(prefix.bytes)
    }

    /// Whether the ascending `sorted` holds `key` (binary search).
    static func contains(_ sorted: [[UInt8]], _ key: [UInt8]) -> Bool {
        var low = 0, high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if sorted[mid] == key { return true }
            if sorted[mid].lexicographicallyPrecedes(key) { low = mid + 1 } else { high = mid }
        }
        return false
    }
}

extension Operation {
    /// Whether the owner signs this operation and it counts only under the ownership rule
    /// (``Ownership/signedByOwner(of:forkedFrom:_:)``): a grant, a revocation, a relay grant,
    /// a relay revocation, an epoch record. An owner transfer names the changes carrying them.
    var isOwnerSigned: Bool {
        switch self {
        case .grant, .revoke, .relayGrant, .relayRevoke, .relayEpoch: true
        default: false
        }
    }
}

/// The household's ownership as `status` and `recover` show it.
public struct OwnershipSummary: Equatable, Sendable {
    /// The current owner's key.
    public var owner: [UInt8]
    /// The owner the genesis names.
    public var genesisOwner: [UInt8]
    /// The owners before the current one, oldest first (the genesis owner first).
    public var formerOwners: [[UInt8]]
    /// The current owner's transfer epoch (0: nothing was transferred).
    public var epoch: UInt64
    /// Valid transfers in the log.
    public var transfers: Int
    /// Epochs where two valid transfers competed (both signed with the recovery secret: two
    /// recoveries at once). The smaller hash won everywhere; people should check who owns.
    public var conflictedEpochs: [UInt64]
    /// Whether the genesis names a recovery key (households created before it existed have none).
    public var hasRecoveryKey: Bool
}

extension Replica {
    /// The household's ownership, or nil for a household without membership or before its
    /// genesis is here. A stored genesis or transfer that does not decode throws (a damaged store).
    static func ownership(_ r: any KeyValueReader) throws -> Ownership? {
        guard let (pin, raw) = try pinnedHouseholdRecord(r), !pin.owner.isEmpty else { return nil }
        let genesis: Household
        do { genesis = try RecordCodec.decodeHousehold(raw) } catch {
            throw LedgerError.corrupted("household record: \(error)")
        }
        var ownership = Ownership(household: pin.id, genesisOwner: pin.owner, recovery: genesis.recovery,
                                  terms: [Ownership.Term(owner: pin.owner, endedBy: nil)], epoch: 0, transfers: 0,
                                  conflictedEpochs: [])
        try r.scan(Tables.transfers) { key, value in
            var reader = ByteReader(value)
            let operation: Operation
            do { operation = try RecordCodec.decodeOperation(&reader) } catch {
                throw LedgerError.corrupted("a stored owner transfer does not decode: \(error)")
            }
            guard key.count == 24, case .transferOwner(let t) = operation else {
                throw LedgerError.corrupted("a stored owner transfer has a bad key or holds another operation")
            }
            ownership.transfers += 1
            if t.epoch == ownership.epoch && ownership.terms.count > 1 {
                // Key order puts the smaller hash first: it won this epoch.
                if ownership.conflictedEpochs.last != t.epoch { ownership.conflictedEpochs.append(t.epoch) }
                return true
            }
            ownership.terms[ownership.terms.count - 1].endedBy = t
            ownership.terms.append(Ownership.Term(owner: t.newOwner, endedBy: nil))
            ownership.epoch = t.epoch
            return true
        }
        return ownership
    }

    /// The household's ownership, or nil for a household without membership (or none yet).
    public func ownership() throws -> OwnershipSummary? {
        try store.read { r in
            guard let o = try Self.ownership(r) else { return nil }
            return OwnershipSummary(owner: o.current, genesisOwner: o.genesisOwner, formerOwners: o.terms.dropLast().map(\.owner),
                                    epoch: o.epoch, transfers: o.transfers, conflictedEpochs: o.conflictedEpochs,
                                    hasRecoveryKey: !o.recovery.isEmpty)
        }
    }

    /// Makes `newOwner` the household's owner with its recovery key: `recoveryKey` is the public
    /// key of the recovery secret and `sign` signs with it. The transfer's epoch is one more than
    /// the highest this replica knows, and it names the exact changes this replica holds that
    /// carry owner-signed records (``transferSeen(_:_:_:)``): what a former owner signed that
    /// this replica holds stays valid, anything else a former owner key signs is forged from now
    /// on, whatever versions of its origin appear later. Applied through the one apply path
    /// (every replica then agrees).
    ///
    /// - Throws: ``LedgerError/invalid(_:)`` when the household has no membership or no recovery
    ///   key, when `recoveryKey` is not the household's, or when `newOwner` already owns it.
    @discardableResult
    public func transferOwnership(to newOwner: [UInt8], recoveryKey: [UInt8], atMillis: Int64,
                                  sign: ([UInt8]) -> [UInt8]) throws -> OwnerTransfer {
        guard newOwner.count == Membership.keyBytes else { throw LedgerError.invalid("an owner key is 32 bytes") }
        let (_, transfer) = try commitLocal { w, _ in
            let t = try Self.transfer(to: newOwner, recoveryKey: recoveryKey, atMillis: atMillis, sign: sign, w)
            return ([.transferOwner(t)], t)
        }
        return transfer
    }

    /// The transfer ``transferOwnership(to:recoveryKey:atMillis:sign:)`` commits, made in `w`.
    static func transfer(to newOwner: [UInt8], recoveryKey: [UInt8], atMillis: Int64, sign: ([UInt8]) -> [UInt8],
                         _ w: any KeyValueReader) throws -> OwnerTransfer {
        guard let ownership = try Self.ownership(w) else {
            throw LedgerError.invalid("this household has no owner to replace (it was created without membership)")
        }
        guard !ownership.recovery.isEmpty else {
            throw LedgerError.invalid("this household was created without a recovery secret")
        }
        guard recoveryKey == ownership.recovery else { throw LedgerError.invalid("that recovery secret is not this household's") }
        guard newOwner != ownership.current else { throw LedgerError.unchanged("that key already owns the household") }
        var highest: UInt64 = 0
        try w.scan(Tables.transfers, prefix: [], from: nil, reverse: true) { key, _ in
            highest = Bytes.u64(Array(key.prefix(8))) ?? 0
            return false
        }
        let (seen, changes) = try Self.transferSeen(ownership, w)
        var t = OwnerTransfer(newOwner: newOwner, epoch: highest + 1, transferredAtMillis: atMillis, seen: seen,
                              seenChanges: changes, signature: [])
        t.signature = sign(Membership.transferMessage(household: ownership.household, t))
        return t
    }

    /// What an owner transfer covers: its `seen`, this replica's version vector on the origins
    /// whose changes can carry a record the ending owner signed (a grant or a revocation, or a
    /// relay's grant, revocation or epoch record: only
    /// those are judged by ``Ownership/signedByOwner(of:forkedFrom:_:)``), and its
    /// `seenChanges`, the exact changes of those origins that carry one (issue 39: a thief's
    /// other version of such a change, a fork of the former owner's origin, then neither counts
    /// nor voids the one the transfer saw). Never the whole vector, so a transfer stays within
    /// ``Limits/cutEntriesMax`` entries of each however many origins the household has (issue
    /// 39: with more than 10,000 origins a full vector did not decode, and `recover` failed).
    /// Those origins: every origin a key that owned the household claims, then every other origin
    /// whose changes in the log carry a grant or a revocation (a refused laptop records the
    /// revocation it learned in a change of its own), the smallest first, up to the limit; the
    /// changes are named in the same order, up to the limit. A former owner's record relayed
    /// beyond the limit (only a flood makes one) is forged. Reads the change log once: `recover`
    /// is rare, and local.
    static func transferSeen(_ ownership: Ownership, _ r: any KeyValueReader) throws
        -> (seen: VersionVector, changes: [[UInt8]]) {
        let vector = try versionVector(r)
        let owners = Set(ownership.terms.map { $0.owner })
        var owned: [ReplicaID] = []
        try r.scan(Tables.claims) { key, value in
            if owners.contains(value), let raw = Bytes.u64(key) { owned.append(ReplicaID(raw)) }
            return true
        }
        let ownedSet = Set(owned)
        // Per origin, the seen-change keys of its changes that carry a grant or a revocation.
        var carried: [ReplicaID: [[UInt8]]] = [:]
        try r.scan(Tables.changes) { key, value in
            guard let raw = Bytes.u64(Array(key.prefix(8))) else { return true }
            let change = try decodeLogEntry(value)
            if change.operations.contains(where: \.isOwnerSigned) {
                carried[ReplicaID(raw), default: []].append(Membership.seenChangeKey(origin: change.origin, encodedChange: value))
            }
            return true
        }
        let carriers = carried.keys.filter { !ownedSet.contains($0) }
        var seen: VersionVector = [:]
        var changes: [[UInt8]] = []
        for origin in owned.sorted() + carriers.sorted() where seen.count < Limits.cutEntriesMax {
            guard let held = vector[origin] else { continue }
            seen[origin] = held
            for key in carried[origin] ?? [] where changes.count < Limits.cutEntriesMax { changes.append(key) }
        }
        changes.sort { $0.lexicographicallyPrecedes($1) }
        return (seen, changes)
    }

    /// Verifies and stores an owner transfer of a change (the caller has checked that the
    /// household is here). Returns why it is forged, or whether it is new: then the caller
    /// rebuilds, since it changes which owner-signed records count.
    static func recordTransfer(_ t: OwnerTransfer, encoded: [UInt8], in context: ApplyContext,
                               digest: inout Digest256) throws -> (forged: String?, isNew: Bool) {
        guard let ownership = try ownership(context.store) else {
            return ("owner transfer in a household without an owner", false)
        }
        guard !ownership.recovery.isEmpty,
              context.verifier.isValid(signature: t.signature, message: Membership.transferMessage(household: ownership.household, t),
                                       key: ownership.recovery) else {
            return ("owner transfer not signed by the recovery key", false)
        }
        var key = [UInt8]()
        key.reserveCapacity(24)
        for shift in stride(from: 56, through: 0, by: -8) { key.append(UInt8(t.epoch >> UInt64(shift) & 255)) }
        key += SHA256.hash(encoded).prefix(16)
        guard try context.store.get(Tables.transfers, key) == nil else { return (nil, false) }
        try context.putSigned(Tables.transfers, key, encoded)
        digest.insert([transferDigestTag] + encoded)
        return (nil, true)
    }

    /// The first byte of a transfer's digest record.
    static let transferDigestTag = UInt8(ascii: "O")
}

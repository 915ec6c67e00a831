import KidLedgerDomain
import KidLedgerSecurity

extension Tables {
    /// The relay's membership state (docs/RELAY-DESIGN.md, "Membership operations"), derived from
    /// the log (recomputed with the state), one kind per first byte:
    ///
    /// ```
    /// "G" | relay key 32 | hash 16   → encoded relayGrant op        (a valid owner-signed grant)
    /// "V" | relay key 32 | hash 16   → encoded relayRevoke op       (a valid owner-signed revocation)
    /// "E" | epoch u32 | hash 16      → signer 32 | encoded relayEpoch op (a valid epoch record)
    /// "M" | relay key 32 | origin 8  → HLC ms u64 | counter u32 | member relay key 32
    ///                                  (the newest relayMemberKey write of that origin)
    /// ```
    ///
    /// hash: the first 16 bytes of SHA-256 of the encoded operation. Every entry is in the state
    /// digest (``Replica/relayDigestRecord(key:value:)``).
    public static let relay = Table("relay")
}

/// A relay the owner granted and did not revoke (``Replica/relays()``).
public struct GrantedRelay: Equatable, Sendable {
    /// The relay's Ed25519 device key (pinned when dialling it).
    public var key: [UInt8]
    /// Where to dial it, in the owner's order.
    public var addresses: [String]
    /// The household's stream key on it (``RelayStreamKey``; secret to the members).
    public var streamKey: [UInt8]
    /// When the grant that counts was made.
    public var grantedAtMillis: Int64
}

/// A current member's published relay key for one relay (``Replica/relayMemberKeys(relay:)``).
public struct PublishedRelayKey: Equatable, Sendable {
    /// The member's identity key.
    public var member: [UInt8]
    /// Its relay public key for that relay (what the owner's access list names).
    public var key: [UInt8]
}

/// A valid epoch record and the owner key that signed it (its boxes carry that owner's signature).
public struct ValidEpochRecord: Equatable, Sendable {
    /// The record.
    public var record: EpochRecord
    /// The owner key that signed it (the owner whose term covers its change).
    public var signer: [UInt8]
}

enum RelayKind {
    static let grant = UInt8(ascii: "G")
    static let revocation = UInt8(ascii: "V")
    static let epoch = UInt8(ascii: "E")
    static let memberKey = UInt8(ascii: "M")
}

// MARK: - Applying

extension Replica {
    /// The digest record of a relay-table entry: "r", its key, its value.
    static func relayDigestRecord(key: [UInt8], value: [UInt8]) -> [UInt8] {
        [UInt8(ascii: "r")] + key + value
    }

    /// Verifies and stores an owner-signed relay operation of `change` (the household is here).
    /// Returns why it is forged, or nil. It counts when the owner whose term covers the change
    /// signed it (``Ownership/signedByOwner(of:forkedFrom:_:)``, the member grant's rule); an
    /// epoch record must also decode (`EpochRecord.decode`).
    static func recordRelay(_ op: Operation, of change: Change, in context: ApplyContext, digest: inout Digest256) throws -> String? {
        let w = context.store, verifier = context.verifier
        guard let ownership = try ownership(w) else { return "relay record in a household without an owner" }
        let forkedFrom = try forkedFrom(change.origin, w)
        func signer(_ signature: [UInt8], _ message: [UInt8]) -> [UInt8]? {
            ownership.ownerSigning(change, forkedFrom: forkedFrom) { verifier.isValid(signature: signature, message: message, key: $0) }
        }
        let encoded = RecordCodec.encodeOperation(op)
        let hash = Array(SHA256.hash(encoded).prefix(16))
        let key: [UInt8], value: [UInt8]
        switch op {
        case .relayGrant(let g):
            guard signer(g.signature, Membership.relayGrantMessage(household: ownership.household, g)) != nil else {
                return "relay grant not signed by the owner"
            }
            (key, value) = ([RelayKind.grant] + g.relay + hash, encoded)
        case .relayRevoke(let rv):
            guard signer(rv.signature, Membership.relayRevocationMessage(household: ownership.household, rv)) != nil else {
                return "relay revocation not signed by the owner"
            }
            (key, value) = ([RelayKind.revocation] + rv.relay + hash, encoded)
        case .relayEpoch(let e):
            guard let owner = signer(e.signature, Membership.relayEpochMessage(household: ownership.household, e)) else {
                return "relay epoch record not signed by the owner"
            }
            let record: EpochRecord
            do { record = try EpochRecord.decode(e.record) } catch { return "relay epoch record does not decode (\(error))" }
            var k = ByteWriter(capacity: 21)
            k.write(RelayKind.epoch)
            k.write(bigEndian: record.epoch)
            k.write(raw: hash)
            (key, value) = (k.bytes, owner + encoded)
        default:
            preconditionFailure("not an owner-signed relay operation")
        }
        guard try w.get(Tables.relay, key) == nil else { return nil }
        try w.put(Tables.relay, key, value)
        digest.insert(relayDigestRecord(key: key, value: value))
        return nil
    }

    /// Records a member's relay key written under `stamp`'s origin (a change the membership rule
    /// let count): per (relay, origin) the newest write stays, by stamp, then key bytes, so the
    /// stored entry does not depend on arrival order. Whose it is is decided when read, from the
    /// claims (``relayMemberKeys(relay:)``).
    static func recordRelayMemberKey(_ k: MemberRelayKey, stamp: Stamp, in context: ApplyContext, digest: inout Digest256) throws {
        let key = [RelayKind.memberKey] + k.relay + Bytes.u64(stamp.origin.rawValue)
        var v = ByteWriter(capacity: 44)
        v.write(bigEndian: UInt64(stamp.hlc.millis))
        v.write(bigEndian: stamp.hlc.counter)
        v.write(raw: k.key)
        let value = v.bytes
        if let held = try context.store.get(Tables.relay, key) {
            guard held.lexicographicallyPrecedes(value) else { return }  // fixed width: byte order is (stamp, key) order
            digest.remove(relayDigestRecord(key: key, value: held))
        }
        try context.store.put(Tables.relay, key, value)
        digest.insert(relayDigestRecord(key: key, value: value))
    }
}

// MARK: - Queries

extension Replica {
    /// The relays granted by the owner and not revoked, ascending by key. Of several valid grants
    /// of one relay, the latest (`grantedAtMillis`, then the smaller hash of its operation)
    /// counts; a revocation of a relay key is permanent.
    public func relays() throws -> [GrantedRelay] {
        try store.read { r in try Self.relays(r) }
    }

    static func relays(_ r: any KeyValueReader) throws -> [GrantedRelay] {
        var revoked = Set<[UInt8]>()
        try r.scan(Tables.relay, prefix: [RelayKind.revocation]) { key, _ in
            revoked.insert(Array(key[1..<33]))
            return true
        }
        var byKey: [[UInt8]: GrantedRelay] = [:]
        try r.scan(Tables.relay, prefix: [RelayKind.grant]) { key, value in
            guard case .relayGrant(let g) = try storedRelayOperation(value) else { throw LedgerError.corrupted("a stored relay grant holds another operation") }
            guard !revoked.contains(g.relay) else { return true }
            // Keys ascend by hash within a relay: a later one replaces only with a later time.
            if let held = byKey[g.relay], held.grantedAtMillis >= g.grantedAtMillis { return true }
            byKey[g.relay] = GrantedRelay(key: g.relay, addresses: g.addresses, streamKey: g.streamKey, grantedAtMillis: g.grantedAtMillis)
            return true
        }
        return byKey.values.sorted { $0.key.lexicographicallyPrecedes($1.key) }
    }

    /// The valid epoch records, one per epoch, ascending: of two valid records of one epoch (two
    /// owner laptops, or a recovery racing the former owner), the smaller hash of its operation
    /// counts, on every replica.
    public func relayEpochRecords() throws -> [ValidEpochRecord] {
        try store.read { r in try Self.relayEpochRecords(r) }
    }

    static func relayEpochRecords(_ r: any KeyValueReader) throws -> [ValidEpochRecord] {
        var records: [ValidEpochRecord] = []
        try r.scan(Tables.relay, prefix: [RelayKind.epoch]) { _, value in
            guard value.count > 32, case .relayEpoch(let e) = try storedRelayOperation(Array(value[32...])),
                  let record = try? EpochRecord.decode(e.record) else {
                throw LedgerError.corrupted("a stored relay epoch record is damaged")
            }
            // Key order: by epoch, then the smaller hash first, which counts.
            if records.last?.record.epoch != record.epoch { records.append(ValidEpochRecord(record: record, signer: Array(value[..<32]))) }
            return true
        }
        return records
    }

    /// The current epoch's record: the highest valid epoch (``relayEpochRecords()``), or nil before
    /// the first relay.
    public func currentRelayEpoch() throws -> ValidEpochRecord? {
        try relayEpochRecords().last
    }

    /// The epoch keys `identity` holds: for each valid record with a box for it (newest first),
    /// the key in that box once the signing owner's signature verifies, and from it every earlier
    /// key the chain opens (``EpochRecord/previousKey(with:)``). A revoked member's keyring stops
    /// at the last epoch that had a box for it; a new member's opens the whole chain. A box or a
    /// link that does not open is damage, thrown, never taken for "no key".
    public func relayKeyring(identity: Identity) throws -> EpochKeyring {
        try store.read { r in
            guard let household = try Self.ownership(r)?.household else { return EpochKeyring() }
            return try Self.keyring(of: identity, records: try Self.relayEpochRecords(r), household: household)
        }
    }

    /// ``relayKeyring(identity:)`` of the valid `records`.
    /// - Throws: ``LedgerError/corrupted(_:)`` when a box for `identity` or a link of the chain
    ///   does not open: the owner signed the record, so the record or this store is damaged. Only
    ///   "no box for this member" (a revoked member, a later epoch) means no key.
    static func keyring(of identity: Identity, records: [ValidEpochRecord], household: RecordID) throws -> EpochKeyring {
        var byEpoch: [UInt32: EpochRecord] = [:]
        for valid in records { byEpoch[valid.record.epoch] = valid.record }
        var keyring = EpochKeyring()
        for valid in records.reversed() where keyring[valid.record.epoch] == nil {
            guard let owner = PublicKey(bytes: valid.signer) else { throw LedgerError.corrupted("a stored relay epoch record's signer is damaged") }
            var key: EpochKey
            do { key = try valid.record.openKey(as: identity, owner: owner, household: household) } catch {
                if error == .noBoxForMember { continue }
                throw LedgerError.corrupted("relay epoch \(valid.record.epoch): this member's key does not open (\(error))")
            }
            keyring.insert(key)
            // Each step adds a key not held before: at most one per epoch.
            while key.epoch > 0, keyring[key.epoch - 1] == nil, let record = byEpoch[key.epoch] {
                do { key = try record.previousKey(with: key) } catch {
                    throw LedgerError.corrupted("relay epoch \(record.epoch): the earlier epoch's key does not open (\(error))")
                }
                keyring.insert(key)
            }
        }
        return keyring
    }

    /// The relay keys the current members (not revoked) published for `relay`, ascending by
    /// member: per member, the newest write (stamp, then key bytes) under an origin that member
    /// claimed. Members that published none are left out. What the owner signs into the access list.
    public func relayMemberKeys(relay: [UInt8]) throws -> [PublishedRelayKey] {
        try store.read { r in try Self.relayMemberKeys(relay: relay, r) }
    }

    static func relayMemberKeys(relay: [UInt8], _ r: any KeyValueReader) throws -> [PublishedRelayKey] {
        let current = Set(try members(r).filter { !$0.isRevoked }.map(\.key))
        var best: [[UInt8]: [UInt8]] = [:]  // member → value (stamp | key), the greatest
        try r.scan(Tables.relay, prefix: [RelayKind.memberKey] + relay) { key, value in
            guard key.count == 41, value.count == 44 else { throw LedgerError.corrupted("a stored member relay key is damaged") }
            guard let member = try r.get(Tables.claims, Array(key[33...])), current.contains(member) else { return true }
            if best[member].map({ $0.lexicographicallyPrecedes(value) }) ?? true { best[member] = value }
            return true
        }
        return best.map { PublishedRelayKey(member: $0.key, key: Array($0.value[12...])) }
            .sorted { $0.member.lexicographicallyPrecedes($1.member) }
    }

    static func storedRelayOperation(_ value: [UInt8]) throws -> Operation {
        var reader = ByteReader(value)
        do {
            let op = try RecordCodec.decodeOperation(&reader)
            try reader.expectEnd()
            return op
        } catch {
            throw LedgerError.corrupted("a stored relay record does not decode: \(error)")
        }
    }
}

// MARK: - Writing

extension Replica {
    /// The owner grants the relay with device key `relay`, dialled at `addresses`, with a fresh
    /// stream key from `random`, as one local change; when no epoch record exists yet, the same
    /// change carries epoch 0, sealed to every current member. Returns the grant.
    ///
    /// - Throws: ``LedgerError/invalid(_:)`` when `owner` is not the household's owner, the key is
    ///   not 32 bytes or was removed before (a removal is permanent: a replacement is a new key),
    ///   or an address is not "host:port"; ``LedgerError/unchanged(_:)`` when it is granted already.
    @discardableResult
    public func addRelay(_ relay: [UInt8], addresses: [String], owner: Identity,
                         using random: inout some RandomNumberGenerator) throws -> RelayGrant {
        guard relay.count == Membership.keyBytes else { throw LedgerError.invalid("a relay key is 32 bytes") }
        if let problem = RelayAddress.listProblem(addresses) { throw LedgerError.invalid(problem) }
        let start = random
        var used = random
        let (_, grant) = try commitLocal { w, hlc -> ([Operation], RelayGrant) in
            var generator = start
            let ownership = try Self.requireOwner(owner, w)
            if try Self.relayRevoked(relay, w) { throw LedgerError.invalid("that relay was removed; a relay once removed can't be added again") }
            if try Self.relays(w).contains(where: { $0.key == relay }) { throw LedgerError.unchanged("that relay is granted already") }
            var g = RelayGrant(relay: relay, addresses: addresses, streamKey: RelayStreamKey.generate(using: &generator).bytes,
                               grantedAtMillis: hlc.millis, signature: [])
            g.signature = owner.sign(Membership.relayGrantMessage(household: ownership.household, g))
            var operations: [Operation] = [.relayGrant(g)]
            if try Self.relayEpochRecords(w).isEmpty {
                let members = try Self.members(w).filter { !$0.isRevoked }.map(\.key)
                operations.append(try Self.sealedEpoch(members: members, owner: owner, household: ownership.household, w, using: &generator))
            }
            used = generator
            return (operations, g)
        }
        random = used
        return grant
    }

    /// The owner removes the relay with device key `relay` (permanently), as one local change.
    /// - Throws: ``LedgerError/invalid(_:)`` when `owner` is not the owner or the relay is not granted.
    @discardableResult
    public func removeRelay(_ relay: [UInt8], owner: Identity) throws -> RelayRevocation {
        let (_, revocation) = try commitLocal { w, hlc -> ([Operation], RelayRevocation) in
            let ownership = try Self.requireOwner(owner, w)
            guard try Self.relays(w).contains(where: { $0.key == relay }) else { throw LedgerError.invalid("that relay is not granted") }
            var rv = RelayRevocation(relay: relay, revokedAtMillis: hlc.millis, signature: [])
            rv.signature = owner.sign(Membership.relayRevocationMessage(household: ownership.household, rv))
            return ([.relayRevoke(rv)], rv)
        }
        return revocation
    }

    /// Commits membership records signed elsewhere (grants, revocations, owner transfers) as one
    /// local change, like ``commitMembership(_:)``, and, while a relay is granted and they grant,
    /// revoke or transfer, a new epoch in the same change: sealed by `owner` (the owner once they
    /// apply: the new owner of a transfer among them) to the members they leave (a revoked member
    /// gets no box, a granted one gets one), the earlier key sealed under the new one. Returns
    /// whether an epoch was written.
    @discardableResult
    public func commitMembership(_ operations: [Operation], rotatingRelayEpochAs owner: Identity,
                                 using random: inout some RandomNumberGenerator) throws -> Bool {
        precondition(operations.allSatisfy(\.isMembership), "membership operations only")
        let start = random
        var used = random
        let (_, rotated) = try commitLocal { w, _ -> ([Operation], Bool) in
            var generator = start
            let epoch = try Self.relayRotation(after: operations, owner: owner, w, using: &generator)
            used = generator
            return (operations + (epoch.map { [$0] } ?? []), epoch != nil)
        }
        random = used
        return rotated
    }

    /// ``transferOwnership(to:recoveryKey:atMillis:sign:)`` with a new relay epoch in the same
    /// change while a relay is granted, sealed by `newOwner` (the new owner draws it after a
    /// recovery, as ``commitMembership(_:rotatingRelayEpochAs:using:)`` does).
    @discardableResult
    public func transferOwnership(to newOwner: Identity, recoveryKey: [UInt8], atMillis: Int64, sign: ([UInt8]) -> [UInt8],
                                  using random: inout some RandomNumberGenerator) throws -> OwnerTransfer {
        let start = random
        var used = random
        let (_, transfer) = try commitLocal { w, _ -> ([Operation], OwnerTransfer) in
            var generator = start
            let t = try Self.transfer(to: newOwner.publicKey.bytes, recoveryKey: recoveryKey, atMillis: atMillis, sign: sign, w)
            let epoch = try Self.relayRotation(after: [.transferOwner(t)], owner: newOwner, w, using: &generator)
            used = generator
            return ([.transferOwner(t)] + (epoch.map { [$0] } ?? []), t)
        }
        random = used
        return transfer
    }

    /// The new epoch that `operations` (membership records about to be committed) call for, or
    /// nil: one while a relay is granted and they grant, revoke or transfer, sealed by `owner`
    /// (the owner once they apply: the new owner of a transfer among them) to the members they
    /// leave (a revoked member gets no box, a granted one gets one).
    static func relayRotation(after operations: [Operation], owner: Identity, _ r: any KeyValueReader,
                              using random: inout some RandomNumberGenerator) throws -> Operation? {
        guard let ownership = try ownership(r), try !relays(r).isEmpty else { return nil }
        var members = Set(try members(r).filter { !$0.isRevoked }.map(\.key))
        var newOwner = ownership.current
        var changesMembers = false
        for op in operations {
            switch op {
            case .grant(let g): members.insert(g.member); changesMembers = true
            case .revoke(let rv): members.remove(rv.member); changesMembers = true
            case .transferOwner(let t): members.insert(t.newOwner); newOwner = t.newOwner; changesMembers = true
            default: break
            }
        }
        guard changesMembers else { return nil }
        guard owner.publicKey.bytes == newOwner else { throw LedgerError.invalid("only the household's owner writes the relay's new epoch") }
        return try sealedEpoch(members: members.sorted { $0.lexicographicallyPrecedes($1) }, owner: owner,
                               household: ownership.household, r, using: &random)
    }

    /// This member (`identity`, whose origin this device writes under) publishes its relay key
    /// for every granted relay whose published key here is not already it, as one local change
    /// (none when nothing is missing). The key pair is ``RelayMemberIdentity/derive(from:relay:)``.
    /// Returns how many relays it wrote a key for.
    /// - Throws: ``LedgerError/noHousehold``; ``LedgerError/invalid(_:)`` when this device's origin
    ///   belongs to another member (the write would never count).
    @discardableResult
    public func publishRelayKeys(identity: Identity) throws -> Int {
        let me = identity.publicKey.bytes
        var written = 0
        try change {
            let operations: [Operation] = try store.read { r in
                _ = try Self.requireHousehold(r)
                if let claimed = try r.get(Tables.claims, Keys.origin(try Self.currentReplicaID(r))), claimed != me {
                    throw LedgerError.invalid("this device writes as another member")
                }
                // Only a current member's key counts: a device whose member this replica holds
                // revoked (or that is no member) would otherwise write again at every call.
                guard try Self.members(r).contains(where: { $0.key == me && !$0.isRevoked }) else { return [] }
                var operations: [Operation] = []
                for relay in try Self.relays(r) {
                    let key = try Self.memberRelayKey(identity, relay: relay.key)
                    let published = try Self.relayMemberKeys(relay: relay.key, r).first { $0.member == me }?.key
                    if published != key { operations.append(.relayMemberKey(MemberRelayKey(relay: relay.key, key: key))) }
                }
                return operations
            }
            written = operations.count
            if !operations.isEmpty { try commitLocal { _, _ in (operations, ()) } }
        }
        return written
    }

    static func memberRelayKey(_ identity: Identity, relay: [UInt8]) throws -> [UInt8] {
        do { return try RelayMemberIdentity.derive(from: identity, relay: relay).publicKey.bytes } catch {
            throw LedgerError.invalid("\(error)")
        }
    }

    /// The ownership, when `owner` is the household's current owner.
    static func requireOwner(_ owner: Identity, _ r: any KeyValueReader) throws -> Ownership {
        _ = try requireHousehold(r)
        guard let ownership = try ownership(r) else { throw LedgerError.invalid("this household has no owner (it was created without membership)") }
        guard ownership.current == owner.publicKey.bytes else { throw LedgerError.invalid("only the household's owner manages relays") }
        return ownership
    }

    static func relayRevoked(_ relay: [UInt8], _ r: any KeyValueReader) throws -> Bool {
        var found = false
        try r.scan(Tables.relay, prefix: [RelayKind.revocation] + relay) { _, _ in found = true; return false }
        return found
    }

    /// The next epoch's record operation, sealed by `owner` to `members`: epoch 0 when none is
    /// valid, else one above the current epoch, with the current key (from `owner`'s own box, or
    /// the chain) sealed under the new one. An owner that holds no key of the current epoch (a
    /// recovery by a key that had no box) seals a fresh key in its place: the chain back stops
    /// there, and members keep the earlier keys from their own boxes.
    static func sealedEpoch(members: [[UInt8]], owner: Identity, household: RecordID, _ r: any KeyValueReader,
                            using random: inout some RandomNumberGenerator) throws -> Operation {
        let keys = members.compactMap { PublicKey(bytes: $0) }
        let records = try relayEpochRecords(r)
        var previous: EpochKey?
        var epoch: UInt32 = 0
        if let current = records.last {
            // Epochs from 2^31 up are join requests' mailbox slots (RelayJoinRequest.slotMin). No
            // `+ 1` before the check: a record an owner signed may name any epoch up to UInt32.max.
            guard current.record.epoch < RelayJoinRequest.slotMin - 1 else { throw LedgerError.invalid("the relay's epochs are used up") }
            epoch = current.record.epoch + 1
            previous = try keyring(of: owner, records: records, household: household)[current.record.epoch]
                ?? EpochKey.generate(epoch: current.record.epoch, using: &random)
        }
        let record: EpochRecord
        do {
            record = try EpochRecord.seal(key: EpochKey.generate(epoch: epoch, using: &random), previous: previous, members: keys,
                                          owner: owner, household: household, using: &random)
        } catch {
            throw LedgerError.invalid("the relay's epoch could not be sealed: \(error)")
        }
        var e = RelayEpoch(record: record.encoded, signature: [])
        e.signature = owner.sign(Membership.relayEpochMessage(household: household, e))
        return .relayEpoch(e)
    }
}

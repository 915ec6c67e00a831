import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerSecurity
import KidLedgerTestSupport
import Testing
@testable import KidLedgerReplica

/// The relay's membership operations in the ledger (issue 44; docs/RELAY-DESIGN.md, "Membership
/// operations"), with real Ed25519 keys and libsodium's boxes: only the owner's grants,
/// revocations and epoch records count; every grant, revocation and owner transfer while a relay
/// is granted writes a new epoch; a revoked member's keyring stops before it, a new member's opens
/// the whole chain; the state is the same in every arrival order.
@Suite("The relay's membership")
struct RelayMembershipTests {
    static func identity(_ byte: UInt8) -> Identity { try! Identity(seed: [UInt8](repeating: byte, count: 32)) }
    let owner = Self.identity(1), spouse = Self.identity(2), newcomer = Self.identity(3), mallory = Self.identity(4)
    let recovery = Self.identity(5)
    let relayKey = Self.identity(9).publicKey.bytes
    let salt = [UInt8](repeating: 7, count: 16)
    var household: RecordID { Membership.householdID(owner: owner.publicKey.bytes, salt: salt) }

    func replica(_ who: Identity?, seed: UInt64) throws -> Replica {
        let r = try Replica(store: MemoryStore(), clock: FixedClock(millis: 1_000_000 + Int64(seed)), random: SplitMix64(seed: seed),
                            verifier: SodiumVerifier())
        r.signer = who?.signer
        return r
    }

    /// A replica that joined the household (pinned to its owner) as `who`, holding `from`'s log.
    func joined(_ who: Identity?, seed: UInt64, from: Replica) throws -> Replica {
        let r = try replica(who, seed: seed)
        try r.pinHousehold(household, owner: owner.publicKey.bytes)
        try r.receive(try from.changeLog())
        return r
    }

    /// The owner's replica with the spouse granted, and the spouse's replica holding it.
    func family() throws -> (owner: Replica, spouse: Replica) {
        let o = try replica(owner, seed: 1)
        try o.createHousehold(name: "Home", owner: owner.publicKey.bytes, salt: salt, recovery: recovery.publicKey.bytes,
                              sign: owner.sign)
        try o.commitMembership([.grant(owner.grant(spouse.publicKey, name: "Dad", household: household, atMillis: 5))])
        return (o, try joined(spouse, seed: 2, from: o))
    }

    @Test func theOwnersRelayGrantCountsWithEpochZeroSealedToEveryMember() throws {
        let (o, s) = try family()
        var random = SplitMix64(seed: 11)
        let grant = try o.addRelay(relayKey, addresses: ["relay.example.org:7447"], owner: owner, using: &random)
        #expect(grant.streamKey.count == 32)
        try exchange(o, s)
        for r in [o, s] {
            #expect(try r.relays() == [GrantedRelay(key: relayKey, addresses: ["relay.example.org:7447"], streamKey: grant.streamKey,
                                                    grantedAtMillis: grant.grantedAtMillis)])
            let epochs = try r.relayEpochRecords()
            #expect(epochs.map(\.record.epoch) == [0] && epochs[0].signer == owner.publicKey.bytes)
            #expect(epochs[0].record.members == [owner.publicKey, spouse.publicKey].sorted())
        }
        let ownersKey = try #require(try o.relayKeyring(identity: owner)[0])
        #expect(try s.relayKeyring(identity: spouse)[0] == ownersKey)
        #expect(try s.relayKeyring(identity: mallory).newestEpoch == nil)
        // A second add of the same relay changes nothing; a second relay gets no second epoch 0.
        #expect(throws: LedgerError.self) { try o.addRelay(relayKey, addresses: [], owner: owner, using: &random) }
        try o.addRelay(Self.identity(10).publicKey.bytes, addresses: [], owner: owner, using: &random)
        #expect(try o.relayEpochRecords().count == 1 && o.relays().count == 2)
        #expect(try o.verify().isIntact && s.verify().isIntact)
    }

    @Test func aMembersForgedRelayRecordsCountNowhere() throws {
        let (o, s) = try family()
        // The spouse signs a grant, a revocation and an epoch record with its own key.
        var g = RelayGrant(relay: relayKey, addresses: [], streamKey: [UInt8](repeating: 1, count: 32), grantedAtMillis: 1, signature: [])
        g.signature = spouse.sign(Membership.relayGrantMessage(household: household, g))
        var random = SplitMix64(seed: 3)
        let record = try EpochRecord.seal(key: EpochKey.generate(epoch: 0, using: &random), previous: nil,
                                          members: [owner.publicKey, spouse.publicKey], owner: spouse, household: household,
                                          using: &random)
        var e = RelayEpoch(record: record.encoded, signature: [])
        e.signature = spouse.sign(Membership.relayEpochMessage(household: household, e))
        try s.commitMembership([.relayGrant(g), .relayEpoch(e)])
        // The owner's genuine grant, then the spouse's forged revocation of it.
        try exchange(o, s)
        try o.addRelay(relayKey, addresses: [], owner: owner, using: &random)
        try exchange(o, s)
        var rv = RelayRevocation(relay: relayKey, revokedAtMillis: 2, signature: [])
        rv.signature = spouse.sign(Membership.relayRevocationMessage(household: household, rv))
        try s.commitMembership([.relayRevoke(rv)])
        try exchange(o, s)
        for r in [o, s] {
            #expect(try r.relays().map(\.key) == [relayKey])
            #expect(try r.relays()[0].streamKey != g.streamKey)
            #expect(try r.relayEpochRecords().map(\.signer) == [owner.publicKey.bytes])
            #expect(try r.membershipCounts().forged == 3)
        }
        #expect(try o.digest() == s.digest())
        // The spouse can't add or remove a relay through the replica's writes either.
        #expect(throws: LedgerError.self) { try s.addRelay(Self.identity(11).publicKey.bytes, addresses: [], owner: spouse, using: &random) }
        #expect(throws: LedgerError.self) { try s.removeRelay(relayKey, owner: spouse) }
    }

    /// An epoch record an owner signed (its stolen key, say) may name any epoch up to UInt32.max:
    /// the next rotation is refused as "used up", without trapping on the arithmetic, and nothing
    /// is written. Epochs from 2^31 are join requests' mailbox slots, so 2^31 - 1 is the last.
    @Test(arguments: [UInt32.max, RelayJoinRequest.slotMin, RelayJoinRequest.slotMin - 1])
    func anEpochAtTheTopIsUsedUpWithoutATrap(top: UInt32) throws {
        let (o, _) = try family()
        var random = SplitMix64(seed: 12)
        try o.addRelay(relayKey, addresses: [], owner: owner, using: &random)
        let record = try EpochRecord.seal(key: EpochKey.generate(epoch: top, using: &random),
                                          previous: EpochKey.generate(epoch: top - 1, using: &random),
                                          members: [owner.publicKey, spouse.publicKey], owner: owner, household: household,
                                          using: &random)
        var e = RelayEpoch(record: record.encoded, signature: [])
        e.signature = owner.sign(Membership.relayEpochMessage(household: household, e))
        try o.commitMembership([.relayEpoch(e)])
        #expect(try o.relayEpochRecords().last?.record.epoch == top)
        let digest = try o.digest()
        let grant = owner.grant(newcomer.publicKey, name: "Gran", household: household, atMillis: 6)
        #expect(throws: LedgerError.self) { try o.commitMembership([.grant(grant)], rotatingRelayEpochAs: owner, using: &random) }
        #expect(try o.digest() == digest)
    }

    /// Grant a newcomer (epoch 1), revoke the spouse (epoch 2): the spouse's keyring stops at 1,
    /// the newcomer's opens 0 to 2 (no box in 0: the chain), the owner's all.
    @Test func revocationRotatesAndTheRevokedKeyringStops() throws {
        let (o, s) = try family()
        var random = SplitMix64(seed: 5)
        try o.addRelay(relayKey, addresses: [], owner: owner, using: &random)
        #expect(try o.commitMembership([.grant(owner.grant(newcomer.publicKey, name: "Gran", household: household, atMillis: 6))],
                                       rotatingRelayEpochAs: owner, using: &random))
        let n = try joined(newcomer, seed: 3, from: o)
        try exchange(o, s)
        let revocation = owner.revocation(of: spouse.publicKey.bytes, seen: try o.cut(of: spouse.publicKey.bytes), household: household,
                                          atMillis: 9)
        #expect(try o.commitMembership([.revoke(revocation)], rotatingRelayEpochAs: owner, using: &random))
        for r in [s, n] { try exchange(o, r) }
        let records = try o.relayEpochRecords()
        #expect(records.map(\.record.epoch) == [0, 1, 2])
        #expect(records[1].record.members == [owner.publicKey, spouse.publicKey, newcomer.publicKey].sorted())
        #expect(records[2].record.members == [owner.publicKey, newcomer.publicKey].sorted())

        let owners = try o.relayKeyring(identity: owner)
        let spouses = try s.relayKeyring(identity: spouse)
        let newcomers = try n.relayKeyring(identity: newcomer)
        #expect(owners.newestEpoch == 2 && newcomers.newestEpoch == 2 && spouses.newestEpoch == 1)
        #expect(spouses[2] == nil)
        #expect(throws: RelaySealError.noBoxForMember) {
            try records[2].record.openKey(as: spouse, owner: owner.publicKey, household: household)
        }
        for epoch in UInt32(0)...2 { #expect(newcomers[epoch] != nil && newcomers[epoch] == owners[epoch]) }
        for epoch in UInt32(0)...1 { #expect(spouses[epoch] == owners[epoch]) }
        // Every replica computes the same keyring of one identity.
        #expect(try s.relayKeyring(identity: newcomer)[0] == newcomers[0] && n.relayKeyring(identity: spouse)[1] == spouses[1])
        // A grant or revocation without a relay writes no epoch; membership records alone don't either.
        let plain = try replica(owner, seed: 9)
        try plain.createHousehold(name: "Home", owner: owner.publicKey.bytes, salt: salt, sign: owner.sign)
        #expect(try !plain.commitMembership([.grant(owner.grant(spouse.publicKey, name: "Dad", household: household, atMillis: 5))],
                                            rotatingRelayEpochAs: owner, using: &random))
        #expect(try plain.relayEpochRecords().isEmpty)
    }

    @Test func membersPublishTheirDerivedRelayKeysAndTheRevokedDropOut() throws {
        let (o, s) = try family()
        var random = SplitMix64(seed: 6)
        try o.addRelay(relayKey, addresses: [], owner: owner, using: &random)
        try exchange(o, s)
        #expect(try s.publishRelayKeys(identity: spouse) == 1)
        #expect(try s.publishRelayKeys(identity: spouse) == 0)  // published already
        #expect(try o.publishRelayKeys(identity: owner) == 1)
        try exchange(o, s)
        let ownersRelayKey = try RelayMemberIdentity.derive(from: owner, relay: relayKey).publicKey.bytes
        let spousesRelayKey = try RelayMemberIdentity.derive(from: spouse, relay: relayKey).publicKey.bytes
        let expected = [PublishedRelayKey(member: owner.publicKey.bytes, key: ownersRelayKey),
                        PublishedRelayKey(member: spouse.publicKey.bytes, key: spousesRelayKey)]
            .sorted { $0.member.lexicographicallyPrecedes($1.member) }
        #expect(try o.relayMemberKeys(relay: relayKey) == expected && s.relayMemberKeys(relay: relayKey) == expected)
        // A key written for the spouse under the owner's origin is not the spouse's (nor the owner's: newest per member).
        let revocation = owner.revocation(of: spouse.publicKey.bytes, seen: try o.cut(of: spouse.publicKey.bytes), household: household,
                                          atMillis: 9)
        try o.commitMembership([.revoke(revocation)], rotatingRelayEpochAs: owner, using: &random)
        try exchange(o, s)
        #expect(try o.relayMemberKeys(relay: relayKey).map(\.member) == [owner.publicKey.bytes])
        #expect(try s.relayMemberKeys(relay: relayKey).map(\.member) == [owner.publicKey.bytes])
        #expect(try o.digest() == s.digest() && o.verify().isIntact)
        // The revoked spouse's key no longer counts, and its laptop writes it no more (a daemon
        // calls this at every relay round: it must not grow its log each time).
        let before = try s.versionVector()
        #expect(try s.publishRelayKeys(identity: spouse) == 0)
        #expect(try s.publishRelayKeys(identity: spouse) == 0)
        #expect(try s.versionVector() == before)
    }

    /// A recovery writes the new owner's epoch in the same change; what the former owner signs
    /// after it (a removal) is forged once the transfer is known.
    @Test func aRecoveryRotatesAndEndsTheFormerOwnersRelayRecords() throws {
        let (o, s) = try family()
        var random = SplitMix64(seed: 8)
        try o.addRelay(relayKey, addresses: [], owner: owner, using: &random)
        try exchange(o, s)
        try s.transferOwnership(to: spouse, recoveryKey: recovery.publicKey.bytes, atMillis: 20, sign: recovery.sign, using: &random)
        // The former owner, not yet told, removes the relay.
        try o.removeRelay(relayKey, owner: owner)
        try exchange(o, s)
        for r in [o, s] {
            #expect(try r.ownership()?.owner == spouse.publicKey.bytes)
            #expect(try r.relays().map(\.key) == [relayKey])
            let records = try r.relayEpochRecords()
            #expect(records.map(\.record.epoch) == [0, 1] && records[1].signer == spouse.publicKey.bytes)
        }
        // The former owner stays a member: it holds the new epoch, and both hold the old one.
        let spouses = try s.relayKeyring(identity: spouse), owners = try o.relayKeyring(identity: owner)
        #expect(spouses.newestEpoch == 1 && owners[1] == spouses[1] && owners[0] == spouses[0])
        #expect(try o.digest() == s.digest() && o.verify().isIntact && s.verify().isIntact)
    }

    /// Every arrival order gives the same relay state and digest, and verify agrees.
    @Test(arguments: UInt64(0)..<8)
    func relayStateConvergesInEveryOrder(seed: UInt64) throws {
        let (o, s) = try family()
        var random = SplitMix64(seed: 21)
        try o.addRelay(relayKey, addresses: ["a:1"], owner: owner, using: &random)
        try exchange(o, s)
        try s.publishRelayKeys(identity: spouse)
        try o.commitMembership([.grant(owner.grant(newcomer.publicKey, name: "Gran", household: household, atMillis: 6))],
                               rotatingRelayEpochAs: owner, using: &random)
        let n = try joined(newcomer, seed: 3, from: o)
        try n.publishRelayKeys(identity: newcomer)
        try exchange(o, n)
        try exchange(o, s)
        try s.transferOwnership(to: spouse, recoveryKey: recovery.publicKey.bytes, atMillis: 20, sign: recovery.sign, using: &random)
        try o.removeRelay(relayKey, owner: owner)  // forged once the transfer is known
        try o.addRelay(Self.identity(12).publicKey.bytes, addresses: [], owner: owner, using: &random)  // likewise
        try exchange(o, s)
        let revocation = spouse.revocation(of: newcomer.publicKey.bytes, seen: try s.cut(of: newcomer.publicKey.bytes),
                                           household: household, atMillis: 30)
        try s.commitMembership([.revoke(revocation)], rotatingRelayEpochAs: spouse, using: &random)
        try n.publishRelayKeys(identity: newcomer)  // unchanged: nothing new
        try exchange(o, s)
        try exchange(s, n)

        let log = try s.changeLog()
        var rng = SplitMix64(seed: seed)
        let fresh = try replica(nil, seed: 100 + seed)
        try fresh.pinHousehold(household, owner: owner.publicKey.bytes)
        _ = try fresh.receiveShuffledWithRetry(log, using: &rng)
        #expect(try fresh.digest() == s.digest())
        #expect(try fresh.relays() == s.relays())
        #expect(try fresh.relayEpochRecords() == s.relayEpochRecords())
        #expect(try fresh.relayEpochRecords().map(\.record.epoch) == [0, 1, 2, 3])
        #expect(try fresh.relayMemberKeys(relay: relayKey) == s.relayMemberKeys(relay: relayKey))
        #expect(try fresh.relayMemberKeys(relay: relayKey).map(\.member).contains(newcomer.publicKey.bytes) == false)
        #expect(try fresh.relayKeyring(identity: newcomer).newestEpoch == 2)
        #expect(try fresh.verify().isIntact)
    }
}

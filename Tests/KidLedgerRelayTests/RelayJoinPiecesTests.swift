import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerReplica
@testable import KidLedgerSecurity
import Testing

/// The pieces of a join through the relay (docs/RELAY-DESIGN.md, "Joining through the relay"):
/// access lists with guest keys, the guest's one mailbox slot, the guest key's derivation, the
/// sealed join request and the invitation's relay part.
@Suite struct RelayJoinPiecesTests {
    static func identity(_ byte: UInt8) -> Identity { try! Identity(seed: [UInt8](repeating: byte, count: 32)) }

    @Test func accessListsWithoutGuestsKeepTheirVersionOneBytes() throws {
        let plain = try list(5, [1: 100, 2: 200])
        #expect(plain.encoded.first == 1 && plain.encoded.count == 13 + 2 * 40)
        #expect(try RelayAccessList.decode(plain.encoded) == plain)
        let withGuest = try RelayAccessList(number: 5, quotas: [member(1): 100, member(2): 64 << 10], guests: [member(2)])
        #expect(withGuest.encoded.first == 2 && withGuest.encoded.count == 13 + 2 * 41)
        let decoded = try RelayAccessList.decode(withGuest.encoded)
        #expect(decoded == withGuest && decoded.isGuest(member(2)) && !decoded.isGuest(member(1)))
        // One encoding per list: version 2 without a guest, a kind past 1, a guest not listed.
        var noGuest = withGuest.encoded
        noGuest[noGuest.count - 1] = 0
        #expect(throws: DecodeError.self) { try RelayAccessList.decode(noGuest) }
        var badKind = withGuest.encoded
        badKind[badKind.count - 1] = 2
        #expect(throws: DecodeError.self) { try RelayAccessList.decode(badKind) }
        #expect(throws: RelayStoreError.self) { try RelayAccessList(number: 1, quotas: [member(1): 1], guests: [member(2)]) }
        // Cut or padded bytes never trap.
        for cut in 0..<withGuest.encoded.count { #expect(throws: DecodeError.self) { try RelayAccessList.decode(Array(withGuest.encoded.prefix(cut))) } }
        #expect(throws: DecodeError.self) { try RelayAccessList.decode(withGuest.encoded + [0]) }
    }

    @Test func aGuestPostsOnlyItsJoinRequest() throws {
        try withRelayStore { relay, _ throws in
            let guest = member(0x9a), owner = member(1)
            #expect(try relay.install(try RelayAccessList(number: 1, quotas: [owner: 1 << 20, member(2): 1 << 20, guest: 64 << 10], guests: [guest])))
            let box = [UInt8](repeating: 7, count: EpochRecord.boxBytes)
            let slot = RelayJoinRequest.slot(of: guest.bytes)
            #expect(slot == 0x9a9a_9a9a && slot >= RelayJoinRequest.slotMin)
            // A member's epoch slot, another guest's slot, any other: refused, nothing filed.
            for epoch in [UInt32(0), 3, RelayJoinRequest.slotMin, slot ^ 1] {
                #expect(throws: RelayStoreError.self) { try relay.post(box: box, epoch: epoch, to: owner, from: guest) }
            }
            #expect(try relay.mailbox(of: owner).isEmpty)
            #expect(try relay.post(box: box, epoch: slot, to: owner, from: guest))
            #expect(try relay.mailbox(of: owner).map(\.epoch) == [slot])
            // Members post any epoch, to a guest too (the owner's box for the joiner).
            #expect(try relay.post(box: box, epoch: 4, to: guest, from: owner))
            #expect(try relay.post(box: box, epoch: 4, to: member(2), from: owner))
            // A guest uploads within its quota like a member.
            #expect(try relay.upload(try envelope(1, 1, 1), from: guest) == .stored)
        }
    }

    @Test func guestKeysAreDerivedFromTheInvitationAndTheRelay() throws {
        let invitation = SecureChannel.invitationKey(secret: [UInt8](repeating: 5, count: 16))
        let other = SecureChannel.invitationKey(secret: [UInt8](repeating: 6, count: 16))
        let relayA = Self.identity(8).publicKey.bytes, relayB = Self.identity(9).publicKey.bytes
        let a = try RelayGuestIdentity.derive(invitationKey: invitation, relay: relayA)
        #expect(a.seed == (try RelayGuestIdentity.derive(invitationKey: invitation, relay: relayA)).seed)
        let keys = [a.publicKey, try RelayGuestIdentity.derive(invitationKey: invitation, relay: relayB).publicKey,
                    try RelayGuestIdentity.derive(invitationKey: other, relay: relayA).publicKey,
                    try RelayMemberIdentity.derive(from: Self.identity(1), relay: relayA).publicKey]
        #expect(Set(keys).count == keys.count)
        #expect(throws: RelaySealError.self) { try RelayGuestIdentity.derive(invitationKey: [1], relay: relayA) }
        #expect(throws: RelaySealError.self) { try RelayGuestIdentity.derive(invitationKey: invitation, relay: [1]) }
        // The documented hash: BLAKE2b-256 keyed by the invitation key.
        let seed = Sodium.genericHash(Array("kidledger relay guest v1".utf8) + [0] + relayA, key: invitation, outputCount: 32)
        #expect(a.seed == seed)
    }

    @Test func aJoinRequestOpensOnlyForItsOwnerHouseholdAndInvitation() throws {
        var random = SplitMix64(seed: 3)
        let owner = Self.identity(1), joiner = Self.identity(2), stranger = Self.identity(3)
        let household = RecordID(high: 1, low: 2), guest = Self.identity(4).publicKey
        let box = try RelayJoinRequest.seal(joiner: joiner, owner: owner.publicKey, household: household, guest: guest, using: &random)
        #expect(box.count == EpochRecord.boxBytes)
        #expect(try RelayJoinRequest.open(box, as: owner, household: household, guest: guest).joiner == joiner.publicKey)
        #expect(throws: RelaySealError.boxDidNotOpen) { try RelayJoinRequest.open(box, as: stranger, household: household, guest: guest) }
        #expect(throws: RelaySealError.notSignedByJoiner) {
            try RelayJoinRequest.open(box, as: owner, household: RecordID(high: 1, low: 3), guest: guest)
        }
        #expect(throws: RelaySealError.notSignedByJoiner) { try RelayJoinRequest.open(box, as: owner, household: household, guest: stranger.publicKey) }
        var flipped = box
        flipped[70] ^= 1
        #expect(throws: RelaySealError.boxDidNotOpen) { try RelayJoinRequest.open(flipped, as: owner, household: household, guest: guest) }
        #expect(throws: RelaySealError.self) { try RelayJoinRequest.open(Array(box.dropLast()), as: owner, household: household, guest: guest) }
    }

    @Test func invitationsCarryTheRelay() throws {
        var code = InviteCode(household: RecordID(high: 7, low: 8), owner: [UInt8](repeating: 1, count: 32), genesis: [UInt8](repeating: 2, count: 32),
                              secret: [UInt8](repeating: 3, count: 16), expiresAtMillis: 1_800_000_000_000, addresses: ["127.0.0.1:9"])
        let version2 = code.text
        #expect(Base64URL.decode(code: version2, prefix: "KL1-")?.first == 2, "without a relay: the version 2 bytes")
        #expect(InviteCode(text: version2) == code)
        code.relay = InviteCode.Relay(key: [UInt8](repeating: 4, count: 32), streamKey: [UInt8](repeating: 5, count: 32),
                                      ownerRelayKey: [UInt8](repeating: 6, count: 32), addresses: ["10.0.0.9:4719", "[::1]:4719"])
        let bytes = try #require(Base64URL.decode(code: code.text, prefix: "KL1-"))
        #expect(bytes.first == 3)
        #expect(InviteCode(text: code.text) == code)
        #expect(!InviteCode.isOlderVersion(code.text) && !InviteCode.isOlderVersion(version2))
        // Every cut, a relay count of 0 or 2, a flipped byte: nil or a code that prints back as itself, never a trap.
        for cut in 0..<bytes.count { #expect(InviteCode(text: "KL1-" + Base64URL.encode(Array(bytes.prefix(cut)))) == nil) }
        // The relay count follows the version 2 body.
        let relayCount = try #require(Base64URL.decode(code: version2, prefix: "KL1-")).count
        #expect(bytes[relayCount] == 1)
        for count: UInt8 in [0, 2] {
            var changed = bytes
            changed[relayCount] = count
            #expect(InviteCode(text: "KL1-" + Base64URL.encode(changed)) == nil)
        }
        for i in bytes.indices {
            var changed = bytes
            changed[i] ^= 0x80
            if let parsed = InviteCode(text: "KL1-" + Base64URL.encode(changed)) { #expect(InviteCode(text: parsed.text) == parsed) }
        }
    }

    /// The joiner's keys: the owner's box gives the newest epoch's; the records inside what that
    /// opens chain back to the older ones, the owner's records first.
    @Test func aJoinerLearnsTheOlderKeysFromTheRecordsItOpens() throws {
        var random = SplitMix64(seed: 9)
        let owner = Self.identity(1), member = Self.identity(2), stranger = Self.identity(3)
        let household = RecordID(high: 4, low: 5)
        let keys = (0...2).map { EpochKey.generate(epoch: UInt32($0), using: &random) }
        let streamKey = try RelayStreamKey(bytes: [UInt8](repeating: 6, count: 32))
        var sequence: UInt64 = 0
        func envelope(_ epoch: Int, carrying record: EpochRecord? = nil, signer: Identity? = nil) throws -> [UInt8] {
            sequence += 1
            var operations: [Operation] = [.setField(entity: household, field: .householdName, value: .text("x"))]
            if let record {
                var e = RelayEpoch(record: record.encoded, signature: [])
                e.signature = (signer ?? owner).sign(Membership.relayEpochMessage(household: household, e))
                operations = [.relayEpoch(e)]
            }
            let change = Change(origin: ReplicaID(7), sequence: sequence, hlc: HLC(millis: 1_000), operations: operations)
            let payload = Message.changes([change], isLast: true).encodePayload()
            let header = try RelayEnvelopeHeader(stream: streamKey.tag(of: ReplicaID(7)), firstSequence: sequence, lastSequence: sequence,
                                                 epoch: UInt32(epoch))
            return try RelayEnvelope.seal(payload, header: header, key: keys[epoch], using: &random)
        }
        func record(_ epoch: Int, previous: EpochKey?) throws -> EpochRecord {
            try EpochRecord.seal(key: keys[epoch], previous: previous, members: [owner.publicKey, member.publicKey], owner: owner,
                                 household: household, using: &random)
        }
        let bogus = EpochKey.generate(epoch: 1, using: &random)
        let forged = try EpochRecord.seal(key: keys[2], previous: bogus, members: [stranger.publicKey], owner: stranger,
                                          household: household, using: &random)
        // Stored oldest first; the forged record (a member's, not the owner's) comes before the owner's.
        let envelopes = [try envelope(0), try envelope(1, carrying: try record(1, previous: keys[0])),
                         try envelope(2, carrying: forged, signer: stranger), try envelope(2, carrying: try record(2, previous: keys[1]))]
        let learned = RelayJoinKeys.discover(envelopes, keyring: EpochKeyring([keys[2]]), owner: owner.publicKey, household: household)
        #expect((0...2).allSatisfy { learned[UInt32($0)] == keys[$0] }, "every epoch, the owner's record winning over the forged one")
        // Without the newest record nothing older opens; an altered envelope is skipped.
        var altered = envelopes[3]
        altered[altered.count - 20] ^= 1
        let partial = RelayJoinKeys.discover([envelopes[0], envelopes[1], altered], keyring: EpochKeyring([keys[2]]),
                                             owner: owner.publicKey, household: household)
        #expect(partial[1] == nil && partial[0] == nil && partial[2] == keys[2])
    }
}

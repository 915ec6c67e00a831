import KidLedgerDomain
import Testing
@testable import KidLedgerSecurity

/// Issue 44's first layer (docs/RELAY-DESIGN.md, "Formats"): epoch keys sealed to each member and
/// signed by the owner, envelopes sealed under them with their header authenticated, stream tags,
/// and decoders that refuse hostile bytes without trapping.
@Suite("Relay sealing")
struct RelaySealTests {
    static let household = RecordID(bytes: Seeds.bytes(16, seed: 44))
    static let mom = Seeds.identity(44), dad = Seeds.identity(45), gran = Seeds.identity(46)
    static let ann = Seeds.identity(47), stranger = Seeds.identity(48)
    static let owner = mom.publicKey
    static let streamKey = try! RelayStreamKey(bytes: Seeds.bytes(32, seed: 4401))
    static let stream = streamKey.tag(of: ReplicaID(0x0A11_CE00))

    /// A household's three epochs: Mom (owner), Dad and Gran in 0 and 1; Gran revoked at 2, when
    /// Ann joins.
    struct History {
        var keys: [EpochKey] = []
        var records: [EpochRecord] = []

        init(seed: UInt64 = 1) throws {
            var random = SplitMix64(seed: seed)
            let members: [[Identity]] = [[mom, dad, gran], [mom, dad, gran], [mom, dad, ann]]
            for (epoch, present) in members.enumerated() {
                let key = EpochKey.generate(epoch: UInt32(epoch), using: &random)
                records.append(try EpochRecord.seal(key: key, previous: keys.last, members: present.map(\.publicKey),
                                                    owner: mom, household: household, using: &random))
                keys.append(key)
            }
        }
    }

    static func header(first: UInt64 = 1, last: UInt64 = 3, epoch: UInt32 = 0,
                       stream: RelayStreamTag = stream) throws -> RelayEnvelopeHeader {
        try RelayEnvelopeHeader(stream: stream, firstSequence: first, lastSequence: last, epoch: epoch)
    }

    static func envelope(_ payload: [UInt8], header: RelayEnvelopeHeader, key: EpochKey, seed: UInt64 = 9) throws -> [UInt8] {
        var random = SplitMix64(seed: seed)
        return try RelayEnvelope.seal(payload, header: header, key: key, using: &random)
    }

    static let payload = Array("three changes of Alice's laptop, as the log stores them".utf8)

    @Test func theSealedBoxIsLibsodiumsAndOpensBothWays() {
        #expect(SealedBox.selfCheck())
    }

    @Test func anEpochRecordRoundTripsAndEachMemberOpensTheKey() throws {
        let history = try History()
        for record in history.records {
            let bytes = record.encoded
            #expect(try EpochRecord.decode(bytes) == record)
            let previous = record.epoch == 0 ? 0 : EpochRecord.previousBytes
            #expect(bytes.count == 3 + 3 * (32 + EpochRecord.boxBytes) + previous)
            #expect(record.members == record.members.sorted())
        }
        #expect(EpochRecord.boxBytes == 144 && EpochRecord.previousBytes == 72)
        for member in [Self.mom, Self.dad, Self.gran] {
            #expect(try history.records[0].openKey(as: member, owner: Self.owner, household: Self.household) == history.keys[0])
        }
        // The box alone, as the relay's mailbox holds it.
        let box = try #require(history.records[1].box(for: Self.dad.publicKey))
        #expect(try EpochRecord.openBox(box, epoch: 1, as: Self.dad, owner: Self.owner, household: Self.household) == history.keys[1])
    }

    @Test func aMemberHoldingTheNewestKeyOpensEveryEarlierEpoch() throws {
        let history = try History()
        // Ann joined at epoch 2: she never had a box for 0 or 1.
        #expect(throws: RelaySealError.noBoxForMember) {
            try history.records[0].openKey(as: Self.ann, owner: Self.owner, household: Self.household)
        }
        let newest = try history.records[2].openKey(as: Self.ann, owner: Self.owner, household: Self.household)
        let chain = try newest.chain(through: history.records.reversed())
        #expect(chain == history.keys.reversed())
        let keyring = EpochKeyring(chain)
        #expect(keyring.newestEpoch == 2)
        for key in history.keys {
            let header = try Self.header(first: UInt64(key.epoch) + 1, last: UInt64(key.epoch) + 1, epoch: key.epoch)
            let sealed = try Self.envelope(Self.payload, header: header, key: key)
            let opened = try RelayEnvelope.open(sealed, stream: Self.stream, keys: keyring)
            #expect(opened.header == header && opened.payload == Self.payload)
        }
        // A missing record breaks the chain: nothing is returned.
        #expect(throws: RelaySealError.unknownEpoch(0)) { try newest.chain(through: [history.records[0], history.records[2]]) }
    }

    @Test func aRevokedMemberOpensTheEpochBeforeItsRevocationButNotTheOneAfter() throws {
        let history = try History()
        #expect(throws: RelaySealError.noBoxForMember) {
            try history.records[2].openKey(as: Self.gran, owner: Self.owner, household: Self.household)
        }
        let granKey = try history.records[1].openKey(as: Self.gran, owner: Self.owner, household: Self.household)
        let granKeys = EpochKeyring(try granKey.chain(through: history.records))
        let before = try Self.envelope(Self.payload, header: Self.header(epoch: 1), key: history.keys[1])
        #expect(try RelayEnvelope.open(before, stream: Self.stream, keys: granKeys).payload == Self.payload)
        let after = try Self.envelope(Self.payload, header: Self.header(epoch: 2), key: history.keys[2])
        #expect(throws: RelaySealError.unknownEpoch(2)) { try RelayEnvelope.open(after, stream: Self.stream, keys: granKeys) }
        // Trying her newest key as epoch 2's opens neither the envelope nor epoch 2's record.
        let guess = try EpochKey(epoch: 2, bytes: granKey.bytes)
        var withGuess = granKeys
        withGuess.insert(guess)
        #expect(throws: RelaySealError.envelopeDidNotOpen) { try RelayEnvelope.open(after, stream: Self.stream, keys: withGuess) }
        #expect(throws: RelaySealError.previousKeyDidNotOpen) { try history.records[2].previousKey(with: guess) }
        #expect(throws: RelaySealError.wrongEpoch(expected: 2, got: 1)) { try history.records[2].previousKey(with: granKey) }
        // Dad, still a member, opens it.
        let dadKey = try history.records[2].openKey(as: Self.dad, owner: Self.owner, household: Self.household)
        #expect(try RelayEnvelope.open(after, stream: Self.stream, keys: EpochKeyring([dadKey])).payload == Self.payload)
    }

    @Test func aKeyNotSignedByTheOwnerForThisHouseholdEpochAndMemberIsRefused() throws {
        var random = SplitMix64(seed: 7)
        let key = EpochKey.generate(epoch: 0, using: &random)
        let members = [Self.mom.publicKey, Self.dad.publicKey]
        let forged = try EpochRecord.seal(key: key, previous: nil, members: members, owner: Self.stranger,
                                          household: Self.household, using: &random)
        #expect(throws: RelaySealError.notSignedByOwner) {
            try forged.openKey(as: Self.dad, owner: Self.owner, household: Self.household)
        }
        #expect(try forged.openKey(as: Self.dad, owner: Self.stranger.publicKey, household: Self.household) == key)
        let genuine = try EpochRecord.seal(key: key, previous: nil, members: members, owner: Self.mom,
                                           household: Self.household, using: &random)
        let box = try #require(genuine.box(for: Self.dad.publicKey))
        #expect(throws: RelaySealError.notSignedByOwner) {
            try genuine.openKey(as: Self.dad, owner: Self.owner, household: RecordID(bytes: Seeds.bytes(16, seed: 45)))
        }
        // A box moved to another epoch (in a mailbox) or opened by another member.
        #expect(throws: RelaySealError.notSignedByOwner) {
            try EpochRecord.openBox(box, epoch: 1, as: Self.dad, owner: Self.owner, household: Self.household)
        }
        #expect(throws: RelaySealError.boxDidNotOpen) {
            try EpochRecord.openBox(box, epoch: 0, as: Self.mom, owner: Self.owner, household: Self.household)
        }
        #expect(throws: RelaySealError.malformed("an epoch key box is 144 bytes, got 143")) {
            try EpochRecord.openBox(Array(box.dropLast()), epoch: 0, as: Self.dad, owner: Self.owner, household: Self.household)
        }
        for i in box.indices {
            var altered = box
            altered[i] ^= 0x20
            #expect(throws: RelaySealError.boxDidNotOpen) {
                try EpochRecord.openBox(altered, epoch: 0, as: Self.dad, owner: Self.owner, household: Self.household)
            }
        }
    }

    @Test func sealingRefusesBadArguments() throws {
        var random = SplitMix64(seed: 8)
        let k0 = EpochKey.generate(epoch: 0, using: &random), k1 = EpochKey.generate(epoch: 1, using: &random)
        let k3 = EpochKey.generate(epoch: 3, using: &random)
        func seal(_ key: EpochKey, _ previous: EpochKey?, _ members: [PublicKey]) throws(RelaySealError) -> EpochRecord {
            try EpochRecord.seal(key: key, previous: previous, members: members, owner: Self.mom, household: Self.household, using: &random)
        }
        let two = [Self.mom.publicKey, Self.dad.publicKey]
        #expect(throws: RelaySealError.self) { try seal(k0, nil, []) }
        #expect(throws: RelaySealError.self) { try seal(k0, nil, [Self.dad.publicKey, Self.mom.publicKey, Self.dad.publicKey]) }
        #expect(throws: RelaySealError.self) { try seal(k0, k1, two) }
        #expect(throws: RelaySealError.self) { try seal(k1, nil, two) }
        #expect(throws: RelaySealError.self) { try seal(k3, k1, two) }
        // A small-order point has no usable X25519 form.
        let degenerate = try #require(PublicKey(bytes: [1] + Array(repeating: 0, count: 31)))
        #expect(throws: RelaySealError.self) { try seal(k0, nil, [Self.mom.publicKey, degenerate]) }
        #expect(throws: RelaySealError.self) { try EpochKey(epoch: 0, bytes: Array(repeating: 1, count: 31)) }
        #expect(throws: RelaySealError.self) { try RelayStreamKey(bytes: []) }

        #expect(throws: RelaySealError.self) { try Self.header(first: 0, last: 1) }
        #expect(throws: RelaySealError.self) { try Self.header(first: 5, last: 4) }
        #expect(throws: RelaySealError.self) { try Self.header(first: 1, last: Limits.sequenceMax + 1) }
        _ = try Self.header(first: Limits.sequenceMax, last: Limits.sequenceMax, epoch: .max)
        #expect(throws: RelaySealError.self) { try Self.envelope([], header: Self.header(), key: k0) }
        #expect(throws: RelaySealError.self) {
            try Self.envelope(Array(repeating: 7, count: RelayEnvelope.payloadBytesMax + 1), header: Self.header(), key: k0)
        }
        #expect(throws: RelaySealError.wrongEpoch(expected: 0, got: 1)) { try Self.envelope([1], header: Self.header(), key: k1) }
        let largest = try Self.envelope(Array(repeating: 7, count: RelayEnvelope.payloadBytesMax), header: Self.header(), key: k0)
        #expect(largest.count == RelayEnvelope.bytesMax)
        #expect(try RelayEnvelope.open(largest, stream: Self.stream, keys: EpochKeyring([k0])).payload.count == RelayEnvelope.payloadBytesMax)
        #expect(throws: RelaySealError.self) { try RelayEnvelope.open(largest + [0], stream: Self.stream, keys: EpochKeyring([k0])) }
    }

    @Test func anEnvelopeRoundTripsWithItsHeaderInClear() throws {
        let history = try History()
        let header = try Self.header(first: 17, last: 20, epoch: 1)
        let sealed = try Self.envelope(Self.payload, header: header, key: history.keys[1])
        #expect(sealed.count == Self.payload.count + RelayEnvelope.overheadBytes)
        #expect(RelayEnvelope.overheadBytes == 77 && RelayEnvelopeHeader.byteCount == 37)
        #expect(Array(sealed.prefix(37)) == header.encoded)
        #expect(try RelayEnvelope.header(of: sealed) == header)
        #expect(try RelayEnvelopeHeader.decode(prefixOf: header.encoded) == header)
        let opened = try RelayEnvelope.open(sealed, stream: Self.stream, keys: EpochKeyring(history.keys))
        #expect(opened.header == header && opened.payload == Self.payload)
        // The payload is not in clear.
        #expect(!sealed.indices.contains { Array(sealed[$0...].prefix(12)) == Array(Self.payload.prefix(12)) })
    }

    @Test func everyByteOfAnEnvelopeFlippedIsRefused() throws {
        let history = try History()
        let keys = EpochKeyring(history.keys)
        let sealed = try Self.envelope(Self.payload, header: Self.header(epoch: 1), key: history.keys[1])
        for i in sealed.indices {
            for mask: UInt8 in [0x01, 0x80, 0xFF] {
                var altered = sealed
                altered[i] ^= mask
                #expect(throws: RelaySealError.self) { try RelayEnvelope.open(altered, stream: Self.stream, keys: keys) }
            }
        }
        for count in 0..<sealed.count {
            #expect(throws: RelaySealError.self) { try RelayEnvelope.open(Array(sealed.prefix(count)), stream: Self.stream, keys: keys) }
        }
        #expect(throws: RelaySealError.self) { try RelayEnvelope.open(sealed + [0], stream: Self.stream, keys: keys) }
    }

    @Test func aHeaderMovedToAnotherStreamSequenceOrEpochIsRefused() throws {
        let history = try History()
        let keys = EpochKeyring(history.keys)
        let header = try Self.header(first: 4, last: 6, epoch: 1)
        let sealed = try Self.envelope(Self.payload, header: header, key: history.keys[1])
        let body = Array(sealed[RelayEnvelopeHeader.byteCount...])
        let other = Self.streamKey.tag(of: ReplicaID(0xB0B))
        let moved = [
            try Self.header(first: 4, last: 6, epoch: 1, stream: other),
            try Self.header(first: 5, last: 6, epoch: 1), try Self.header(first: 4, last: 7, epoch: 1),
            try Self.header(first: 7, last: 9, epoch: 1), try Self.header(first: 4, last: 6, epoch: 0),
            try Self.header(first: 4, last: 6, epoch: 2),
        ]
        for header in moved {
            #expect(throws: RelaySealError.envelopeDidNotOpen) {
                try RelayEnvelope.open(header.encoded + body, stream: header.stream, keys: keys)
            }
        }
        // Spliced: this header on the body of the next envelope of the same stream.
        let next = try Self.envelope(Self.payload, header: Self.header(first: 7, last: 9, epoch: 1), key: history.keys[1], seed: 10)
        #expect(throws: RelaySealError.envelopeDidNotOpen) {
            try RelayEnvelope.open(header.encoded + Array(next[RelayEnvelopeHeader.byteCount...]), stream: Self.stream, keys: keys)
        }
        // A genuine envelope served for another stream.
        #expect(throws: RelaySealError.wrongStream) { try RelayEnvelope.open(sealed, stream: other, keys: keys) }
    }

    @Test func streamTagsHideTheOriginAndDependOnTheKey() throws {
        let origin = ReplicaID(0x0A11_CE00)
        #expect(Self.streamKey.tag(of: origin) == Self.stream && Self.stream.bytes.count == 16)
        #expect(Self.streamKey.tag(of: ReplicaID(0x0A11_CE01)) != Self.stream)
        let otherHousehold = try RelayStreamKey(bytes: Seeds.bytes(32, seed: 4402))
        #expect(otherHousehold.tag(of: origin) != Self.stream)
        var expected = Array("kidledger relay stream v1".utf8) + [0]
        expected += (0..<8).reversed().map { UInt8(truncatingIfNeeded: origin.rawValue >> UInt64($0 * 8)) }
        #expect(Self.stream.bytes == Sodium.genericHash(expected, key: Self.streamKey.bytes, outputCount: 16))
    }

    @Test func theSameGeneratorGivesTheSameBytes() throws {
        let a = try History(seed: 5), b = try History(seed: 5), c = try History(seed: 6)
        #expect(a.records.map(\.encoded) == b.records.map(\.encoded) && a.keys == b.keys)
        #expect(a.keys[0] != c.keys[0] && a.records[0].encoded != c.records[0].encoded)
        let header = try Self.header()
        #expect(try Self.envelope(Self.payload, header: header, key: a.keys[0], seed: 3)
            == Self.envelope(Self.payload, header: header, key: a.keys[0], seed: 3))
        #expect(try Self.envelope(Self.payload, header: header, key: a.keys[0], seed: 3)
            != Self.envelope(Self.payload, header: header, key: a.keys[0], seed: 4))
        var g1 = SplitMix64(seed: 1), g2 = SplitMix64(seed: 1)
        #expect(RelayStreamKey.generate(using: &g1) == RelayStreamKey.generate(using: &g2))
    }

    @Test func theRecordDecoderRefusesWhatIsNotCanonical() throws {
        let history = try History()
        let bytes = history.records[1].encoded
        for count in 0..<bytes.count {
            #expect(throws: RelaySealError.self) { try EpochRecord.decode(Array(bytes.prefix(count))) }
        }
        #expect(throws: RelaySealError.malformed("1 unexpected trailing bytes")) { try EpochRecord.decode(bytes + [0]) }
        var version = bytes
        version[0] = 2
        #expect(throws: RelaySealError.self) { try EpochRecord.decode(version) }
        // Epoch 0 with a previous key, epoch 1 without.
        let zero = history.records[0].encoded
        #expect(throws: RelaySealError.self) { try EpochRecord.decode(zero + Array(bytes.suffix(EpochRecord.previousBytes))) }
        var noPrevious = Array(bytes.dropLast(EpochRecord.previousBytes))
        #expect(throws: RelaySealError.self) { try EpochRecord.decode(noPrevious) }
        noPrevious[1] = 0
        #expect(try EpochRecord.decode(noPrevious).epoch == 0)
        // Members out of order or repeated; a count of 0 or above the limit; an epoch above 2^32 − 1.
        let entry = 32 + EpochRecord.boxBytes
        let first = Array(zero[3..<(3 + entry)]), second = Array(zero[(3 + entry)..<(3 + 2 * entry)])
        let third = Array(zero[(3 + 2 * entry)...])
        #expect(throws: RelaySealError.self) { try EpochRecord.decode(Array(zero[0..<3]) + second + first + third) }
        #expect(throws: RelaySealError.self) { try EpochRecord.decode(Array(zero[0..<3]) + first + first + third) }
        #expect(throws: RelaySealError.self) { try EpochRecord.decode([1, 0, 0]) }
        #expect(throws: RelaySealError.self) { try EpochRecord.decode([1, 0, 0xE9, 0x07] + first) }
        #expect(throws: RelaySealError.self) { try EpochRecord.decode([1, 0x80, 0x80, 0x80, 0x80, 0x10, 1] + first + Array(bytes.suffix(72))) }
        #expect(try EpochRecord.decode([1, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 1] + first + Array(bytes.suffix(72))).epoch == .max)
        // A non-canonical varint.
        #expect(throws: RelaySealError.self) { try EpochRecord.decode([1, 0x80, 0x00, 1] + first) }
    }

    /// Bounded seeded garbage and mutations of genuine bytes: every decoder and opener either
    /// refuses or returns something that re-encodes to exactly its input; nothing traps.
    @Test func garbageAndMutationsAreRefusedWithoutATrap() throws {
        let history = try History()
        let keys = EpochKeyring(history.keys)
        let record = history.records[1].encoded
        let envelope = try Self.envelope(Self.payload, header: Self.header(epoch: 2), key: history.keys[2])
        let dadBox = try #require(history.records[1].box(for: Self.dad.publicKey))
        var random = SplitMix64(seed: 0x44)
        for round in 0..<800 {
            let input: [UInt8]
            switch round % 4 {
            case 0:
                input = RelayRandom.bytes(Int(random.next() % 700), using: &random)
            default:
                var mutated = [record, envelope, dadBox][round % 4 - 1]
                for _ in 0..<(1 + Int(random.next() % 4)) {
                    switch random.next() % 3 {
                    case 0: mutated[Int(random.next() % UInt64(mutated.count))] ^= UInt8(truncatingIfNeeded: random.next() | 1)
                    case 1: mutated.removeLast(1 + Int(random.next() % UInt64(min(mutated.count, 40))))
                    default: mutated += RelayRandom.bytes(Int(random.next() % 40) + 1, using: &random)
                    }
                    if mutated.isEmpty { mutated = [1] }
                }
                input = mutated
            }
            // What opens is the genuine thing (a mutation elsewhere in a record leaves Dad's box whole).
            if let decoded = try? EpochRecord.decode(input) {
                #expect(decoded.encoded == input)
                if let key = try? decoded.openKey(as: Self.dad, owner: Self.owner, household: Self.household) {
                    #expect(key == history.keys[1])
                }
            }
            if let opened = try? RelayEnvelope.open(input, stream: Self.stream, keys: keys) {
                #expect(input == envelope && opened.payload == Self.payload)
            }
            if let key = try? EpochRecord.openBox(input, epoch: 1, as: Self.dad, owner: Self.owner, household: Self.household) {
                #expect(input == dadBox && key == history.keys[1])
            }
            if let header = try? RelayEnvelopeHeader.decode(prefixOf: input) {
                #expect(header.encoded == Array(input.prefix(RelayEnvelopeHeader.byteCount)))
            }
        }
    }
}

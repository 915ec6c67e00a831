import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerSecurity
import Testing

/// The relay's messages: every one round-trips; short, trailing, padded and out-of-range input
/// is refused; no input traps.
@Suite("Relay messages")
struct RelayMessageTests {
    static func samples() throws -> [RelayMessage] {
        let header = try RelayEnvelopeHeader(stream: stream(2), firstSequence: 3, lastSequence: 9, epoch: 1)
        let status = RelayMemberStatus(key: member(1), quotaBytes: 1 << 20, usedBytes: 77, lastSyncMilliseconds: -5)
        let owner = try Identity(seed: [UInt8](repeating: 1, count: 32))
        let signed = SignedRelayAccessList.sign(try list(7, [1: 100, 2: 200]), relay: owner.publicKey, owner: owner)
        return [
            .hello(versionMin: 1, versionMax: 1),
            .welcome(version: 1, accessList: nil, acknowledged: [:], held: [:]),
            .welcome(version: 1, accessList: 3, acknowledged: [stream(1): 4, stream(2): 1 << 62], held: [stream(9): 1]),
            .install(signed), .installed(number: 7),
            .upload(try envelope(1, 1, 2)), .uploaded(stored: true), .uploaded(stored: false),
            .acknowledge([stream(1): 0, stream(3): 300]), .acknowledged,
            .pendingRequest(after: nil, countMax: 256, bytesMax: 3 << 20), .pendingRequest(after: header, countMax: 1, bytesMax: 1),
            .pendingPage(envelopes: [], next: nil), .pendingPage(envelopes: [try envelope(1, 1, 2), try envelope(2, 3, 3)], next: header),
            .mailboxPost(RelayMailboxPost(recipient: member(4), epoch: 2, box: [UInt8](repeating: 9, count: EpochRecord.boxBytes))),
            .mailboxPosted(filed: true), .mailboxFetch,
            .mailbox([RelayMailboxBox(epoch: 0, box: [UInt8](repeating: 1, count: EpochRecord.boxBytes)),
                      RelayMailboxBox(epoch: 5, box: [UInt8](repeating: 2, count: EpochRecord.boxBytes))]),
            .ownerMailbox(statement: RelayOwnerStatement.sign(relay: owner.publicKey, newOwner: owner.publicKey, term: 3, recovery: owner),
                          boxes: [RelayMailboxBox(epoch: 4, box: [UInt8](repeating: 3, count: EpochRecord.boxBytes))]),
            .statusRequest(after: nil), .statusRequest(after: member(3)),
            .statusPage(members: [RelayMemberReport(status: status, acknowledged: [stream(1): 2]),
                                  RelayMemberReport(status: RelayMemberStatus(key: member(2), quotaBytes: 0, usedBytes: 0, lastSyncMilliseconds: nil),
                                                    acknowledged: [:])], next: member(2)),
            .refused(code: 11, message: "over quota"), .error(code: 2, message: "é"), .bye,
        ]
    }

    @Test func everyMessageRoundTrips() throws {
        for message in try Self.samples() {
            let payload = message.encodePayload()
            #expect(try RelayMessage.decode(type: message.type, payload: payload) == message, "\(message.name)")
            // Trailing bytes and every truncation are refused (an upload's envelope is its whole payload).
            if message.type != 5 {
                #expect(throws: RelaySessionError.self) { try RelayMessage.decode(type: message.type, payload: payload + [0]) }
            }
            for cut in 0..<payload.count where message.type != 5 || cut < RelayEnvelope.overheadBytes + 1 {
                #expect(throws: RelaySessionError.self, "\(message.name) cut at \(cut)") {
                    try RelayMessage.decode(type: message.type, payload: Array(payload.prefix(cut)))
                }
            }
        }
    }

    @Test func outOfRangeAndPaddedInputIsRefused() throws {
        let bad: [(UInt8, [UInt8])] = [
            (0, []), (20, []),
            (1, [0, 0, 0, 1]),  // version 0
            (1, [0, 2, 0, 1]),  // min above max
            (2, [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]),  // a list number without its flag
            (6, [2]),  // a flag of 2
            (7, [0x80, 0x00]),  // a padded count
            (7, [0x81, 0x08]),  // 1,025 entries
            (7, [1] + [UInt8](repeating: 1, count: 16) + [0x80, 0x00]),  // a padded sequence
            (7, [1] + [UInt8](repeating: 1, count: 16) + [0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]),  // above 2^62
            (7, [2] + [UInt8](repeating: 2, count: 16) + [1] + [UInt8](repeating: 1, count: 16) + [1]),  // tags descending
            (9, [0, 0, 0, 0, 0, 0, 1]),  // a count of 0
            (9, [0, 1, 1, 0, 0, 0, 1]),  // 257 envelopes
            (9, [0, 0, 1, 0, 0x30, 0, 1]),  // above 3 MiB
            (14, [17]),  // 17 boxes
            (16, [65]),  // 65 members
        ]
        for (type, payload) in bad {
            #expect(throws: RelaySessionError.self, "type \(type) \(payload)") { try RelayMessage.decode(type: type, payload: payload) }
        }
        // A welcome vector with a zero sequence (only acknowledgements forget with 0).
        var w = ByteWriter()
        w.write(raw: [0, 1, 0] + [UInt8](repeating: 0, count: 8) + [1] + [UInt8](repeating: 4, count: 16) + [0, 0])
        #expect(throws: RelaySessionError.self) { try RelayMessage.decode(type: 2, payload: w.bytes) }
    }

    @Test func noInputTraps() throws {
        var random = SplitMix64(seed: 9)
        let samples = try Self.samples()
        var decoded = 0
        for round in 0..<20_000 {
            let base = samples[round % samples.count]
            var payload = base.encodePayload()
            // A few bytes changed, cut or appended, or all random.
            switch random.next() % 4 {
            case 0: payload = (0..<Int(random.next() % 64)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            case 1 where !payload.isEmpty: payload[Int(random.next() % UInt64(payload.count))] ^= UInt8(truncatingIfNeeded: random.next() | 1)
            case 2: payload = Array(payload.prefix(Int(random.next() % UInt64(payload.count + 1))))
            default: payload.append(UInt8(truncatingIfNeeded: random.next()))
            }
            if let message = try? RelayMessage.decode(type: UInt8(truncatingIfNeeded: random.next() % 21), payload: payload) {
                decoded += 1
                #expect(message.encodePayload() == payload, "\(message.name) does not re-encode to its bytes")
            }
        }
        #expect(decoded > 0)
    }
}

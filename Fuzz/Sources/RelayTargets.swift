// The relay's sealed formats (docs/RELAY-DESIGN.md, "Formats"): what a hostile relay or a member's
// modified client can hand a member.
import KidLedgerDomain
import KidLedgerSecurity

/// A fixed household of two epochs: Mom (owner) and Dad in both, the keys drawn from a fixed seed.
private let relayOwner = try! Identity(seed: Array(repeating: 0x4E, count: 32))
private let relayMember = try! Identity(seed: Array(repeating: 0x4F, count: 32))
private let relayHousehold = RecordID(bytes: Array(repeating: 0x44, count: 16))
private let relayStream = try! RelayStreamKey(bytes: Array(repeating: 0x45, count: 32)).tag(of: ReplicaID(7))
private let relayHistory: (keys: [EpochKey], records: [EpochRecord]) = {
    var random = SplitMix64(seed: 44)
    let k0 = EpochKey.generate(epoch: 0, using: &random), k1 = EpochKey.generate(epoch: 1, using: &random)
    let members = [relayOwner.publicKey, relayMember.publicKey]
    do {
        let r0 = try EpochRecord.seal(key: k0, previous: nil, members: members, owner: relayOwner, household: relayHousehold, using: &random)
        let r1 = try EpochRecord.seal(key: k1, previous: k0, members: members, owner: relayOwner, household: relayHousehold, using: &random)
        return ([k0, k1], [r0, r1])
    } catch {
        violated("cannot seal the relay fixtures: \(error)")
    }
}()

/// `relay`: byte 0 picks what the rest is, as a member receives it. 0: an epoch record (from the
/// ledger); 1: an envelope (from the relay); 2: a box for Dad of epoch 1 (from his mailbox).
/// Properties: nothing traps; a record that decodes re-encodes to exactly its bytes, and any key
/// Dad opens from it (or from a box, or as the earlier key) is the genuine one; an envelope's
/// header, when it decodes, re-encodes to the envelope's first 37 bytes, and an envelope that
/// opens is one sealed by a key holder: sealing its payload again with its header and nonce gives
/// it back byte for byte.
@Sendable func fuzzRelay(_ data: [UInt8]) {
    guard let selector = data.first else { return }
    let input = Array(data.dropFirst())
    let keys = relayHistory.keys
    switch selector % 3 {
    case 0:
        guard let record = try? EpochRecord.decode(input) else { return }
        check(record.encoded == input, "an epoch record does not re-encode to its bytes")
        if let key = try? record.openKey(as: relayMember, owner: relayOwner.publicKey, household: relayHousehold) {
            check(record.epoch <= 1 && key == keys[Int(record.epoch)], "a key not the owner's opened and verified")
        }
        if record.epoch == 1, let earlier = try? record.previousKey(with: keys[1]) {
            check(earlier == keys[0], "another earlier key opened under epoch 1's key")
        }
    case 1:
        if let header = try? RelayEnvelope.header(of: input) {
            check(header.encoded == Array(input.prefix(RelayEnvelopeHeader.byteCount)), "an envelope header does not re-encode")
        }
        guard let opened = try? RelayEnvelope.open(input, stream: relayStream, keys: EpochKeyring(keys)) else { return }
        let nonce = Array(input[RelayEnvelopeHeader.byteCount..<(RelayEnvelopeHeader.byteCount + 24)])
        let again = try? RelayEnvelope.seal(opened.payload, header: opened.header, key: keys[Int(opened.header.epoch)], nonce: nonce)
        check(again == input, "an envelope opened that sealing its payload again does not give back")
    default:
        guard let key = try? EpochRecord.openBox(input, epoch: 1, as: relayMember, owner: relayOwner.publicKey,
                                                 household: relayHousehold) else { return }
        check(key == keys[1], "a box opened to a key the owner did not sign")
    }
}

@Sendable func relaySeeds() -> [[UInt8]] {
    let (keys, records) = relayHistory
    let header = try! RelayEnvelopeHeader(stream: relayStream, firstSequence: 1, lastSequence: 3, epoch: 1)
    let envelope = try! RelayEnvelope.seal(Array("three changes".utf8), header: header, key: keys[1],
                                           nonce: Array(repeating: 0x24, count: 24))
    let box = records[1].box(for: relayMember.publicKey)!
    return [[0] + records[0].encoded, [0] + records[1].encoded, [1] + envelope, [1] + Array(envelope.prefix(50)),
            [2] + box, [0, 1, 0, 0]]
}

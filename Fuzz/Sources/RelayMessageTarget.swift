// The `relaymessage` target: the relay's wire messages (docs/RELAY-DESIGN.md, "Sessions"), as a
// member or a hostile peer sends them to the relay, and the relay's session that takes them.
import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerRelay
import KidLedgerSecurity

private let relayMessageOwner = try! Identity(seed: Array(repeating: 0x5A, count: 32))
private let relayMessagePeer = try! Identity(seed: Array(repeating: 0x5B, count: 32))
private let relayMessageRelay = try! Identity(seed: Array(repeating: 0x5C, count: 32))
private let relayMessageRecovery = try! Identity(seed: Array(repeating: 0x5D, count: 32))
private let relayMessageStatement = RelayOwnerStatement.sign(relay: relayMessageRelay.publicKey, newOwner: relayMessagePeer.publicKey, term: 2,
                                                             recovery: relayMessageRecovery)

/// `relaymessage`: byte 0 is a message type, the rest its payload. Properties: nothing traps; a
/// payload that decodes re-encodes to exactly its bytes; and the whole input, taken as the byte
/// stream a listed member sends after its hello, makes the relay's session answer, refuse or end
/// with an error, never trap, and leaves the store within the member's quota. Types 40 and 42 are
/// also read as `adopt` and `ownerChange` (outside ``RelayMessage``): one that decodes re-encodes to
/// its bytes, and an owner change the relay applies carries a statement the fixture's recovery key
/// signed for the fixture relay, naming the peer, above the pinned term. An odd first byte runs the
/// session as a relay that followed a recovery (its mailbox answer is `ownerMailbox`).
@Sendable func fuzzRelayMessage(_ data: [UInt8]) {
    guard let type = data.first else { return }
    let payload = Array(data.dropFirst())
    if type == RelayAdoption.adoptType, let adopt = try? RelayAdoption.decodeAdopt(payload) {
        check(RelayAdoption.adoptFrame(secret: adopt.secret, list: adopt.list, recovery: adopt.recovery).dropFirst(5).elementsEqual(payload),
              "an adopt frame does not re-encode to its bytes")
    }
    if type == RelayOwnerChange.changeType, let change = try? RelayOwnerChange.decode(payload) {
        check(change.statement.encoded + change.list.encoded == payload, "an owner change does not re-encode to its bytes")
        let pin = RelayPin(owner: relayMessageOwner.publicKey, recovery: relayMessageRecovery.publicKey, term: 1)
        if let next = try? RelayOwnerChange.apply(payload, relay: relayMessageRelay.publicKey, pin: pin, peer: relayMessagePeer.publicKey,
                                                  store: RelayStore(store: MemoryStore()), persist: { _ in }), next != pin {
            check(change.statement.verifies(relay: relayMessageRelay.publicKey, recovery: relayMessageRecovery.publicKey)
                  && next.owner == relayMessagePeer.publicKey && next.term > pin.term, "an owner change applied without the recovery key's statement")
        }
    }
    if let message = try? RelayMessage.decode(type: type, payload: payload) {
        check(message.encodePayload() == payload, "a relay message does not re-encode to its bytes")
    }
    let store = RelayStore(store: MemoryStore())
    let member = RelayMemberKey(bytes: relayMessagePeer.publicKey.bytes)!
    guard (try? store.install(try RelayAccessList(number: 1, quotas: [member: 1 << 16]))) == true else {
        violated("cannot install the relay fixture's list")
    }
    let session = RelayServerSession(store: store, relay: relayMessageRelay.publicKey, owner: relayMessageOwner.publicKey,
                                     peer: relayMessagePeer.publicKey, ownerStatement: type & 1 == 1 ? relayMessageStatement : nil)
    _ = session.receive(RelayMessage.hello(versionMin: 1, versionMax: 1).frame(), atMilliseconds: 1)
    check(session.state == .serving, "a listed member's hello was not welcomed")
    _ = session.receive(data, atMilliseconds: 2)
    check(((try? store.storedBytes()) ?? 0) <= 1 << 16, "the relay stored more than the member's quota")
}

@Sendable func relayMessageSeeds() -> [[UInt8]] {
    let header = try! RelayEnvelopeHeader(stream: RelayStreamTag(bytes: Array(repeating: 7, count: 16))!, firstSequence: 1,
                                          lastSequence: 2, epoch: 0)
    let envelope = header.encoded + Array(repeating: 0xAB, count: 60)
    let list = SignedRelayAccessList.sign(try! RelayAccessList(number: 2, quotas: [RelayMemberKey(bytes: relayMessagePeer.publicKey.bytes)!: 100]),
                                          relay: relayMessageRelay.publicKey, owner: relayMessageOwner)
    let messages: [RelayMessage] = [
        .upload(envelope), .acknowledge([header.stream: 2]), .pendingRequest(after: nil, countMax: 4, bytesMax: 1 << 20),
        .pendingPage(envelopes: [envelope], next: header), .install(list), .mailboxFetch, .statusRequest(after: nil),
        .refused(code: 11, message: "over quota"), .bye,
        .ownerMailbox(statement: relayMessageStatement, boxes: [RelayMailboxBox(epoch: 3, box: Array(repeating: 0x33, count: EpochRecord.boxBytes))]),
        // A list with a guest key (version 2), and a guest's join request.
        .install(SignedRelayAccessList.sign(try! RelayAccessList(number: 3, quotas: [RelayMemberKey(bytes: relayMessagePeer.publicKey.bytes)!: 100,
                                                                                      RelayMemberKey(bytes: Array(repeating: 0x9A, count: 32))!: 64 << 10],
                                                                 guests: [RelayMemberKey(bytes: Array(repeating: 0x9A, count: 32))!]),
                                            relay: relayMessageRelay.publicKey, owner: relayMessageOwner)),
        .mailboxPost(RelayMailboxPost(recipient: RelayMemberKey(bytes: relayMessagePeer.publicKey.bytes)!, epoch: RelayJoinRequest.slotMin | 0x1A9A_9A9A,
                                      box: Array(repeating: 0x44, count: EpochRecord.boxBytes))),
    ]
    let statement = relayMessageStatement
    let peerList = SignedRelayAccessList.sign(try! RelayAccessList(number: 1, quotas: [RelayMemberKey(bytes: relayMessagePeer.publicKey.bytes)!: 100]),
                                              relay: relayMessageRelay.publicKey, owner: relayMessagePeer)
    return messages.map { [$0.type] + $0.encodePayload() } + [messages.flatMap { $0.frame() }]
        + [[RelayOwnerChange.changeType] + statement.encoded + peerList.encoded,
           Array(RelayAdoption.adoptFrame(secret: Array(repeating: 1, count: 16), list: list, recovery: relayMessageRecovery.publicKey).dropFirst(4))]
}

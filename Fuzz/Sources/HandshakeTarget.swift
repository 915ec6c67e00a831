// The secure channel (handshake and encrypted frames) fed hostile bytes as the peer's stream.
import KidLedgerDomain
import KidLedgerSecurity

/// Fixed identities and channel randomness: the channel is a pure function of these and its input,
/// so a genuine peer's bytes are the same every time and can be kept in the seed corpus.
private let household = RecordID(high: 0x1111_2222_3333_4444, low: 0x8555_6666_7777_8888)
private let initiatorIdentity = try! Identity(seed: Array(repeating: 1, count: 32))
private let responderIdentity = try! Identity(seed: Array(repeating: 2, count: 32))

/// The short code of short-code mode (issue 22, point 4): the responder holds it in its slot.
private let shortCode = ShortCode(slot: 3, secret: 0x1234_5678_9ABC)

private func makeChannel(_ role: SecureChannel.Role, refuseEveryone: Bool, short: Bool = false) -> SecureChannel {
    let me = role == .initiator ? initiatorIdentity : responderIdentity
    let expected = role == .initiator ? responderIdentity.publicKey : initiatorIdentity.publicKey
    let mode: SecureChannel.Mode = short && role == .initiator ? .shortCode(slot: shortCode.slot, password: shortCode.password) : .member
    return try! SecureChannel(role: role, identity: me, household: short && role == .initiator ? .zero : household,
                              seed: Array(repeating: role == .initiator ? 3 : 4, count: SecureChannel.seedByteCount), mode: mode,
                              shortInvitations: { short && $0 == shortCode.slot ? shortCode.password : nil },
                              authorize: { key, _, _, _ in refuseEveryone ? "not a member" : key == expected ? nil : "not a member" })
}

/// What a genuine peer sends, frame by frame, and the plaintexts it seals after the handshake.
private struct Genuine: Sendable {
    /// Bytes the initiator sends: hello, confirm, finish, two data frames, close.
    var fromInitiator: [UInt8] = []
    /// Bytes the responder sends: reply, accept, one data frame, close.
    var fromResponder: [UInt8] = []
    /// The authenticated part of the initiator's stream: hello, confirm and finish.
    var initiatorSigned = 0
    /// The authenticated part of the responder's stream: reply and accept.
    var responderSigned = 0
    var initiatorPlaintexts: [[UInt8]] = [Array("ping 1".utf8), Array("ping 2".utf8)]
    var responderPlaintexts: [[UInt8]] = [Array("pong".utf8)]
}

private func sent(_ actions: [ChannelAction]) -> [UInt8] {
    var out: [UInt8] = []
    for case .send(let bytes) in actions { out += bytes }
    return out
}

/// Runs a genuine handshake and exchange between the two fixed channels (a member's session, and
/// a short-code join's).
private let genuine = makeGenuine(short: false)
private let genuineShort = makeGenuine(short: true)

private func makeGenuine(short: Bool) -> Genuine {
    var g = Genuine()
    let i = makeChannel(.initiator, refuseEveryone: false, short: short), r = makeChannel(.responder, refuseEveryone: false, short: short)
    _ = r.start()
    let hello = sent(i.start())
    let reply = sent(r.receive(hello))
    let confirm = sent(i.receive(reply))
    let accept = sent(r.receive(confirm))
    let finish = sent(i.receive(accept))
    _ = r.receive(finish)
    guard i.isEstablished, r.isEstablished else { violated("the genuine handshake failed") }
    g.fromInitiator = hello + confirm + finish
    g.initiatorSigned = g.fromInitiator.count
    g.fromResponder = reply + accept
    g.responderSigned = reply.count + accept.count
    for p in g.initiatorPlaintexts { g.fromInitiator += try! i.seal(p) }
    g.fromInitiator += try! i.close()
    for p in g.responderPlaintexts { g.fromResponder += try! r.seal(p) }
    g.fromResponder += try! r.close()
    return g
}

/// Feeds `bytes` to a fresh channel in chunks of `chunk` bytes; returns every action in order.
private func feed(_ role: SecureChannel.Role, refuse: Bool, short: Bool, _ bytes: [UInt8], chunk: Int) -> (actions: [ChannelAction], channel: SecureChannel) {
    let channel = makeChannel(role, refuseEveryone: refuse, short: short)
    var actions = channel.start()
    var start = 0
    var failed = false
    repeat {
        let out = channel.receive(Array(bytes[start..<min(bytes.count, start + chunk)]))
        check(!failed || out.isEmpty, "a failed channel still acted: \(out)")
        if let at = out.firstIndex(where: { if case .failed = $0 { true } else { false } }) {
            check(at == out.count - 1, "actions after .failed")
            failed = true
        }
        actions += out
        start += chunk
    } while start < bytes.count
    return (actions, channel)
}

/// `handshake`: input byte 0 chooses the side under test (bit 0: responder or initiator), a chunk
/// size (bits 1-5), whether the authorisation hook refuses everyone (bit 6) and short-code mode
/// (bit 7: the initiator joins with a short code the responder holds); the rest is what the
/// "peer" sends. (A short-code responder does not authorise its initiator: it is admitted to the
/// invitation's hand-over only, so "refused" binds only the initiator there.) Properties: chunking changes nothing; no forged handshake is established (only the
/// genuine peer's signed handshake bytes establish a channel, and never when refused); the only
/// plaintext that comes out is a prefix of what the genuine peer sealed, in order; a failed channel
/// does nothing more; an established channel can seal.
@Sendable func fuzzHandshake(_ data: [UInt8]) {
    guard let first = data.first else { return }
    let role: SecureChannel.Role = first & 1 == 0 ? .responder : .initiator
    let refuse = first & 0x40 != 0
    let short = first & 0x80 != 0
    let bytes = Array(data.dropFirst())
    let whole = feed(role, refuse: refuse, short: short, bytes, chunk: max(bytes.count, 1))
    let chunked = feed(role, refuse: refuse, short: short, bytes, chunk: Int(first >> 1 & 0x1F) + 1)
    check(whole.actions == chunked.actions, "chunking changed the channel's actions")

    let g = short ? genuineShort : genuine
    let (peerStream, signed, peerKey, peerPlaintexts) = role == .responder
        ? (g.fromInitiator, g.initiatorSigned, initiatorIdentity.publicKey, g.initiatorPlaintexts)
        : (g.fromResponder, g.responderSigned, responderIdentity.publicKey, g.responderPlaintexts)
    var plaintexts: [[UInt8]] = []
    var established = false, closed = false
    for action in whole.actions {
        switch action {
        case .established(let peer):
            check(!established, "established twice")
            check(!refuse || (short && role == .responder), "established although the authorisation hook refused")
            check(peer == peerKey, "established with a key that is not the genuine peer's")
            check(bytes.starts(with: peerStream.prefix(signed)), "established by a forged handshake")
            established = true
        case .plaintext(let p):
            check(established && !closed, "plaintext before establishment or after close")
            plaintexts.append(p)
        case .closed:
            check(established && !closed, "closed before establishment or twice")
            closed = true
        case .send, .failed:
            break
        }
    }
    check(peerPlaintexts.starts(with: plaintexts), "the channel delivered plaintext the genuine peer never sealed")
    if whole.channel.isEstablished {
        check((try? whole.channel.seal([1, 2, 3]))?.isEmpty == false, "an established channel cannot seal")
    }
}

// MARK: - Seeds

@Sendable func handshakeSeeds() -> [[UInt8]] {
    let g = genuine
    return [
        [0] + g.fromInitiator,                          // responder, whole genuine stream
        [1] + g.fromResponder,                          // initiator, whole genuine stream
        [0 | 7 << 1] + g.fromInitiator,                 // chunks of 8
        [1 | 4 << 1] + g.fromResponder,                 // chunks of 5
        [0x40] + g.fromInitiator,                       // the responder refuses the initiator
        [0x41] + g.fromResponder,                       // the initiator refuses the responder
        [0] + Array(g.fromInitiator.prefix(71)),        // hello only
        [1] + Array(g.fromResponder.prefix(g.responderSigned)),  // handshake, no data
        [0, 0, 0, 0, 5, 0xFE] + Array("nope".utf8),     // a refusal
        [0x80] + genuineShort.fromInitiator,            // short-code responder, whole genuine stream
        [0x81] + genuineShort.fromResponder,            // short-code initiator, whole genuine stream
        [0x80] + Array(genuineShort.fromInitiator.prefix(72)),  // a short-code hello only
    ]
}

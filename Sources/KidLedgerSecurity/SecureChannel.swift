import CSodium
import KidLedgerDomain

/// What a ``SecureChannel`` asks its driver to do, or reports.
public enum ChannelAction: Equatable, Sendable {
    /// Write these bytes to the connection.
    case send([UInt8])
    /// Both ends are authenticated and authorised; application data may flow from now on.
    case established(peer: PublicKey)
    /// Decrypted application bytes, in order (one chunk per encrypted frame).
    case plaintext([UInt8])
    /// The peer closed its sending direction cleanly; nothing more will arrive.
    case closed
    /// The channel failed; it sends and accepts nothing more.
    case failed(SecurityError)
}

/// An authenticated, encrypted channel over one byte stream, as a pure state machine: bytes in,
/// bytes and events out; no sockets, clocks, threads or system randomness (all randomness comes
/// from the `seed` passed in). Not thread-safe: drive one instance from one place at a time.
///
/// Handshake: `hello` (initiator: version, ephemeral X25519 key, nonce, identity key, household),
/// `reply` (responder: ephemeral key, nonce, identity key, signature over the transcript),
/// `confirm` (initiator: signature over the transcript, its secretstream header), `accept`
/// (responder: its secretstream header and an encrypted empty message proving it holds the keys).
/// Either side refuses a peer that presents its own identity key (a reflected connection or a
/// replayed handshake) before anything else. Both sides run the authorisation hook right after verifying the peer's signature and before any
/// application data flows. Then every frame is a `crypto_secretstream_xchacha20poly1305` message,
/// so tampering, truncating, reordering or replaying any frame fails the channel.
///
/// Frames are `[u32 big-endian length][u8 type][payload]` like the sync protocol's, with types
/// 0xF0...0xFE reserved for the channel. Payloads (sizes exact; anything else fails):
///
/// ```
/// 0xF0 hello    113 B  version u8 (=1) | initiator ephemeral X25519 pk 32 | initiator nonce 32
///                      | initiator Ed25519 pk 32 | household id 16
/// 0xF1 reply    160 B  responder ephemeral pk 32 | responder nonce 32 | responder Ed25519 pk 32
///                      | Ed25519 signature 64 over transcript("responder")
/// 0xF2 confirm   88 B  Ed25519 signature 64 over transcript("initiator") | initiator→responder
///                      secretstream header 24
/// 0xF3 accept    41 B  responder→initiator secretstream header 24 | secretstream message 17
///                      (empty plaintext, TAG_MESSAGE, associated data = [0xF3])
/// 0xF4 data   17+n B   secretstream message (n ≤ 4 MiB plaintext, TAG_MESSAGE or, empty, TAG_FINAL;
///                      associated data = [0xF4])
/// 0xFD revoked  ≤16 KiB reason length u8 (≤200) | UTF-8 reason | the owner-signed revocation of
///                      the refused peer's member (an encoded operation), plaintext, only before
///                      establishment; sent instead of `refused` when the refusing side holds it
/// 0xFC transfers ≤16 KiB the refused side's answer to a `revoked` frame whose revocation it holds
///                      void: the owner transfers (encoded operations) that void it, plaintext;
///                      the refusing side waits for it (or the connection's end) before failing
/// 0xFE refused ≤200 B  UTF-8 reason, plaintext, only before establishment
///
/// transcript(label) = "kidledger channel v1 " + label | 0x00 | version u8 | household 16
///                     | eph_i 32 | eph_r 32 | nonce_i 32 | nonce_r 32 | id_i 32 | id_r 32
/// ```
///
/// Session keys: `crypto_kx_client_session_keys` (initiator) / `crypto_kx_server_session_keys`
/// (responder) over the ephemeral keys. Each side's secretstream header is
/// `BLAKE2b-192(key: own nonce, "kidledger stream header " + own role)`, so no system randomness is
/// drawn (see `SecretStream`). Handshake frames over 512 bytes are rejected from their length prefix;
/// after establishment the limit is ``frameBytesMax``. A `revoked` frame may hold up to
/// ``revokedFrameBytesMax`` bytes: the revocation it carries proves itself (the refused side checks
/// the owner's signature; see docs/SECURITY.md), so the frame needs no channel authentication.
/// A server lowers the data frame limit (``dataFrameBytesMax``) until it admits the peer.
public final class SecureChannel {
    /// Which end of the connection this is.
    public enum Role: Equatable, Sendable {
        /// The side that connected; it sends `hello`.
        case initiator
        /// The side that accepted the connection.
        case responder
    }

    /// The authorisation hook: given the peer's verified identity key, the household and the
    /// peer's role, returns nil to accept or a short reason (sent to the peer) to refuse.
    public typealias Authorize = @Sendable (PublicKey, RecordID, Role) -> String?
    /// The evidence hook: given a peer key the authorisation hook refused, the encoded owner-signed
    /// revocation of that member to send with the refusal (nil: a plain refusal). Called on the
    /// thread that runs the handshake, only when it refuses.
    public typealias Evidence = (PublicKey) -> [UInt8]?
    /// The answer hook of a refused side: given the encoded revocation a `revoked` frame carries
    /// (unverified), the encoded owner transfers that void it here, to send back in a `transfers`
    /// frame (nil: no answer). A stale owner key's revocation of the new owner is answered so
    /// (docs/SECURITY.md, "A stolen laptop").
    public typealias Answer = ([UInt8]) -> [UInt8]?

    /// The secure channel version this code speaks.
    public static let version: UInt8 = 1
    /// Bytes of injected randomness a channel needs: 32 for the ephemeral key, 32 for the nonce.
    public static let seedByteCount = 64
    /// The most plaintext bytes carried by one encrypted frame; larger ``seal(_:)`` inputs are split.
    public static let plaintextChunkMax = 4 << 20
    /// The largest channel frame (type byte plus payload, not the length prefix).
    public static let frameBytesMax = 1 + plaintextChunkMax + SecretStream.overheadBytes
    /// The largest frame accepted before the channel is established (handshake frames are small).
    public static let handshakeFrameBytesMax = 512
    /// The largest data frame (type byte, 4 KiB of plaintext and the secretstream overhead) a
    /// server accepts from a peer it has not admitted yet: see ``dataFrameBytesMax``.
    public static let unadmittedFrameBytesMax = 1 + (4 << 10) + SecretStream.overheadBytes
    /// The longest refusal reason in bytes (longer ones are cut at a character boundary).
    public static let refusalBytesMax = 200
    /// The largest `revoked` frame (type byte plus payload); a revocation that does not fit is
    /// not sent (the refusal is a plain one then).
    public static let revokedFrameBytesMax = 16 << 10

    /// Channel frame types.
    enum FrameType: UInt8 {
        case hello = 0xF0, reply = 0xF1, confirm = 0xF2, accept = 0xF3, data = 0xF4, transfers = 0xFC, revoked = 0xFD, refused = 0xFE
    }

    /// Why a peer presenting this side's own identity key is refused (issue 20, point 9).
    static let reflected = "the other side presents this device's own key: a connection reflected back to this device or a replayed handshake"

    static let helloBytes = 1 + 32 + 32 + 32 + 16
    static let replyBytes = 32 + 32 + 32 + 64
    static let confirmBytes = 64 + SecretStream.headerBytes
    static let acceptBytes = SecretStream.headerBytes + SecretStream.overheadBytes

    private enum Phase: Equatable {
        case idle, awaitingHello, awaitingReply, awaitingConfirm, awaitingAccept, established, failed
        /// This side sent a `revoked` frame and waits for the refused side's `transfers` answer
        /// (or the connection's end) before it fails with ``SecureChannel/refusal``.
        case awaitingAnswer
    }

    /// The largest data frame accepted after establishment (type byte plus payload), from
    /// 1 + the secretstream overhead up to ``frameBytesMax`` (the default); other values are
    /// clamped. A server sets ``unadmittedFrameBytesMax`` until its session admits the peer, so a
    /// stranger makes it buffer kilobytes, not megabytes; a longer length prefix fails the channel
    /// as soon as its 4 bytes arrive.
    public var dataFrameBytesMax: Int = SecureChannel.frameBytesMax {
        didSet { dataFrameBytesMax = min(max(dataFrameBytesMax, 1 + SecretStream.overheadBytes), Self.frameBytesMax) }
    }

    /// This side's role.
    public let role: Role
    /// The household this side belongs to; the peer must claim the same one.
    public let household: RecordID
    /// The peer's identity key once its signature has been verified (before authorisation), else nil.
    public private(set) var peerKey: PublicKey?

    private let identity: Identity
    private let authorize: Authorize
    private let evidence: Evidence
    private let answer: Answer
    private var phase: Phase
    /// The failure a refusal that awaits its answer ends with.
    private var refusal: SecurityError?
    private var decoder = ChannelFrameDecoder()
    private var ephemeralPublic = [UInt8](repeating: 0, count: 32)
    private var ephemeralSecret = [UInt8](repeating: 0, count: 32)
    private let nonce: [UInt8]
    private var peerEphemeral: [UInt8] = []
    private var peerNonce: [UInt8] = []
    private var receiveKey: [UInt8] = []
    private var sendKey: [UInt8] = []
    private var sender: SecretStream?
    private var receiver: SecretStream?
    private var localClosed = false
    private var peerClosed = false

    /// A channel for `role` as `identity` in `household`, with 64 bytes of injected randomness
    /// (`seed`: the first 32 seed the ephemeral X25519 key, the last 32 are the handshake nonce).
    /// Throws ``SecurityError/badKey(_:)`` if `seed` is not 64 bytes. `evidence` gives the
    /// revocation to send when `authorize` refuses a revoked member (none by default); `answer`
    /// the owner transfers to send back when the peer refuses this side with a revocation
    /// (none by default).
    public init(role: Role, identity: Identity, household: RecordID, seed: [UInt8],
                authorize: @escaping Authorize, evidence: @escaping Evidence = { _ in nil },
                answer: @escaping Answer = { _ in nil }) throws(SecurityError) {
        _ = Sodium.ready
        guard seed.count == Self.seedByteCount else {
            throw .badKey("a secure channel needs \(Self.seedByteCount) bytes of randomness, got \(seed.count)")
        }
        self.role = role
        self.identity = identity
        self.household = household
        self.authorize = authorize
        self.evidence = evidence
        self.answer = answer
        self.nonce = Array(seed[32..<64])
        self.phase = .idle
        let rc = crypto_kx_seed_keypair(&ephemeralPublic, &ephemeralSecret, Array(seed[0..<32]))
        try Sodium.check(rc, .badKey("crypto_kx_seed_keypair failed"))
    }

    deinit {
        sodium_memzero(&ephemeralSecret, ephemeralSecret.count)
        sodium_memzero(&receiveKey, receiveKey.count)
        sodium_memzero(&sendKey, sendKey.count)
    }

    /// Whether application data may be sealed and opened (from establishment until failure).
    public var isEstablished: Bool { phase == .established }

    /// Whether the channel has failed.
    public var isFailed: Bool { phase == .failed }

    /// Starts the handshake: the initiator sends `hello`; the responder waits. Later calls do nothing.
    public func start() -> [ChannelAction] {
        guard phase == .idle else { return [] }
        switch role {
        case .responder:
            phase = .awaitingHello
            return []
        case .initiator:
            phase = .awaitingReply
            var w = ByteWriter(capacity: Self.helloBytes)
            w.write(Self.version)
            w.write(raw: ephemeralPublic)
            w.write(raw: nonce)
            w.write(raw: identity.publicKey.bytes)
            w.write(id: household)
            return [.send(Self.frame(.hello, w.bytes))]
        }
    }

    /// Consumes bytes received from the peer (any chunking) and returns what to do.
    public func receive(_ bytes: [UInt8]) -> [ChannelAction] {
        var actions = phase == .idle ? start() : []
        guard phase != .failed else { return [] }
        decoder.push(bytes)
        let dataFrameBytesMax = dataFrameBytesMax
        while phase != .failed {
            let established = phase == .established
            // A `revoked` frame answers this side's signed message (confirm, or reply): only then
            // may a handshake-phase frame be larger than ``handshakeFrameBytesMax``.
            let mayBeRevoked = phase == .awaitingAccept || phase == .awaitingConfirm
            let mayBeAnswer = phase == .awaitingAnswer
            let frame: (type: UInt8, payload: [UInt8])?
            do {
                frame = try decoder.next { type in
                    if established { return dataFrameBytesMax }
                    if mayBeRevoked && (type == nil || type == FrameType.revoked.rawValue) { return Self.revokedFrameBytesMax }
                    if mayBeAnswer && (type == nil || type == FrameType.transfers.rawValue) { return Self.revokedFrameBytesMax }
                    return Self.handshakeFrameBytesMax
                }
            } catch {
                actions += mayBeAnswer ? endRefusal(answer: nil) : fail(error, refuse: phase != .established)
                break
            }
            guard let frame else { break }
            actions += handle(type: frame.type, payload: frame.payload)
        }
        return actions
    }

    /// Reports that the connection ended. Unless the peer had closed the channel cleanly (or it had
    /// already failed) the channel fails with ``SecurityError/closed(_:)``.
    public func connectionClosed() -> [ChannelAction] {
        guard phase != .failed, !peerClosed else { return [] }
        if phase == .awaitingAnswer { return endRefusal(answer: nil) }
        let why = phase == .established ? "connection ended without a clean close" : "connection ended during the handshake"
        return fail(.closed(why), refuse: false)
    }

    /// Encrypts application bytes into channel frames (split into chunks of at most
    /// ``plaintextChunkMax`` bytes; empty input gives no bytes). Throws ``SecurityError/notEstablished``
    /// before establishment, after failure or after ``close()``.
    public func seal(_ plaintext: [UInt8]) throws(SecurityError) -> [UInt8] {
        guard phase == .established, !localClosed, sender != nil else { throw .notEstablished }
        var out: [UInt8] = []
        var start = 0
        while start < plaintext.count {
            let end = min(start + Self.plaintextChunkMax, plaintext.count)
            let ciphertext = sender!.push(Array(plaintext[start..<end]), tag: SecretStream.tagMessage,
                                          associated: [FrameType.data.rawValue])
            out += Self.frame(.data, ciphertext)
            start = end
        }
        return out
    }

    /// The frame that closes this side's sending direction cleanly (a final secretstream message);
    /// ``seal(_:)`` throws afterwards. The peer reports ``ChannelAction/closed``.
    public func close() throws(SecurityError) -> [UInt8] {
        guard phase == .established, !localClosed, sender != nil else { throw .notEstablished }
        localClosed = true
        return Self.frame(.data, sender!.push([], tag: SecretStream.tagFinal, associated: [FrameType.data.rawValue]))
    }

    // MARK: - Handshake

    private func handle(type: UInt8, payload: [UInt8]) -> [ChannelAction] {
        if phase == .awaitingAnswer {
            // Anything but one non-empty `transfers` frame ends the refusal without an answer.
            return endRefusal(answer: type == FrameType.transfers.rawValue && !payload.isEmpty ? payload : nil)
        }
        guard let kind = FrameType(rawValue: type) else {
            return fail(.badFrame("unknown channel frame type \(type)"), refuse: phase != .established)
        }
        if kind == .refused {
            let reason = String(validating: payload, as: UTF8.self)
            guard phase != .established, payload.count <= Self.refusalBytesMax, let reason else {
                return fail(.badFrame("malformed or unexpected refusal"), refuse: false)
            }
            return fail(.refused(reason), refuse: false)
        }
        if kind == .revoked {
            guard phase != .established, let (reason, revocation) = Self.decodeRevoked(payload) else {
                return fail(.badFrame("malformed or unexpected revocation refusal"), refuse: false)
            }
            let failure = fail(.revokedByPeer(reason, revocation: revocation), refuse: false)
            guard let transfers = answer(revocation), !transfers.isEmpty, 1 + transfers.count <= Self.revokedFrameBytesMax else {
                return failure
            }
            return [.send(Self.frame(.transfers, transfers))] + failure
        }
        switch (phase, kind) {
        case (.awaitingHello, .hello): return onHello(payload)
        case (.awaitingReply, .reply): return onReply(payload)
        case (.awaitingConfirm, .confirm): return onConfirm(payload)
        case (.awaitingAccept, .accept): return onAccept(payload)
        case (.established, .data): return onData(payload)
        case (.established, _):
            return fail(.badFrame("unexpected \(kind) frame after establishment"), refuse: false)
        default:
            return fail(.handshakeFailed("unexpected \(kind) frame"), refuse: true)
        }
    }

    private func onHello(_ payload: [UInt8]) -> [ChannelAction] {
        guard payload.count == Self.helloBytes else { return fail(.handshakeFailed("malformed hello"), refuse: true) }
        let version = payload[0]
        guard version == Self.version else {
            return fail(.handshakeFailed("peer speaks secure channel version \(version), this side speaks \(Self.version)"), refuse: true)
        }
        peerEphemeral = Array(payload[1..<33])
        peerNonce = Array(payload[33..<65])
        let claimed = PublicKey(bytes: payload[65..<97])!
        let theirHousehold = RecordID(bytes: payload[97..<113])
        guard theirHousehold == household else {
            return fail(.handshakeFailed("device of another household"), refuse: true)
        }
        peerKey = nil
        claimedPeer = claimed
        guard claimed.bytes != identity.publicKey.bytes else { return fail(.handshakeFailed(Self.reflected), refuse: true) }
        guard deriveSessionKeys() else { return fail(.handshakeFailed("bad ephemeral key"), refuse: true) }
        let signature = identity.sign(transcript(signer: .responder))
        var w = ByteWriter(capacity: Self.replyBytes)
        w.write(raw: ephemeralPublic)
        w.write(raw: nonce)
        w.write(raw: identity.publicKey.bytes)
        w.write(raw: signature)
        phase = .awaitingConfirm
        return [.send(Self.frame(.reply, w.bytes))]
    }

    private func onReply(_ payload: [UInt8]) -> [ChannelAction] {
        guard payload.count == Self.replyBytes else { return fail(.handshakeFailed("malformed reply"), refuse: true) }
        peerEphemeral = Array(payload[0..<32])
        peerNonce = Array(payload[32..<64])
        let responder = PublicKey(bytes: payload[64..<96])!
        let signature = Array(payload[96..<160])
        claimedPeer = responder
        guard responder.bytes != identity.publicKey.bytes else { return fail(.handshakeFailed(Self.reflected), refuse: true) }
        guard deriveSessionKeys() else { return fail(.handshakeFailed("bad ephemeral key"), refuse: true) }
        guard Identity.verify(signature: signature, message: transcript(signer: .responder), key: responder) else {
            return fail(.badSignature, refuse: true)
        }
        peerKey = responder
        if let reason = authorize(responder, household, .responder) {
            return fail(.unauthorized(reason), refuse: true)
        }
        let header = streamHeader()
        sender = SecretStream(header: header, key: sendKey)
        var w = ByteWriter(capacity: Self.confirmBytes)
        w.write(raw: identity.sign(transcript(signer: .initiator)))
        w.write(raw: header)
        phase = .awaitingAccept
        return [.send(Self.frame(.confirm, w.bytes))]
    }

    private func onConfirm(_ payload: [UInt8]) -> [ChannelAction] {
        guard payload.count == Self.confirmBytes, let initiator = claimedPeer else {
            return fail(.handshakeFailed("malformed confirm"), refuse: true)
        }
        let signature = Array(payload[0..<64])
        guard Identity.verify(signature: signature, message: transcript(signer: .initiator), key: initiator) else {
            return fail(.badSignature, refuse: true)
        }
        peerKey = initiator
        if let reason = authorize(initiator, household, .initiator) {
            return fail(.unauthorized(reason), refuse: true)
        }
        receiver = SecretStream(header: Array(payload[64..<88]), key: receiveKey)
        let header = streamHeader()
        var stream = SecretStream(header: header, key: sendKey)
        let proof = stream.push([], tag: SecretStream.tagMessage, associated: [FrameType.accept.rawValue])
        sender = stream
        phase = .established
        return [.send(Self.frame(.accept, header + proof)), .established(peer: initiator)]
    }

    private func onAccept(_ payload: [UInt8]) -> [ChannelAction] {
        guard payload.count == Self.acceptBytes, let responder = peerKey else {
            return fail(.handshakeFailed("malformed accept"), refuse: true)
        }
        var stream = SecretStream(header: Array(payload[0..<24]), key: receiveKey)
        guard let opened = stream.pull(Array(payload[24...]), associated: [FrameType.accept.rawValue]),
              opened.message.isEmpty, opened.tag == SecretStream.tagMessage else {
            return fail(.handshakeFailed("accept does not authenticate"), refuse: true)
        }
        receiver = stream
        phase = .established
        return [.established(peer: responder)]
    }

    private func onData(_ payload: [UInt8]) -> [ChannelAction] {
        guard !peerClosed else { return fail(.closed("frame after the peer closed the channel"), refuse: false) }
        guard let opened = receiver?.pull(payload, associated: [FrameType.data.rawValue]) else {
            return fail(.decryptFailed, refuse: false)
        }
        switch opened.tag {
        case SecretStream.tagMessage:
            return opened.message.isEmpty ? [] : [.plaintext(opened.message)]
        case SecretStream.tagFinal where opened.message.isEmpty:
            peerClosed = true
            return [.closed]
        default:
            return fail(.badFrame("unexpected secretstream tag \(opened.tag)"), refuse: false)
        }
    }

    // MARK: - Helpers

    /// The identity key the peer claimed (in `hello` or `reply`), not yet verified.
    private var claimedPeer: PublicKey?

    /// Derives the two directional session keys with crypto_kx (initiator = client); false if the peer's
    /// ephemeral key is unacceptable (e.g. a low-order point).
    private func deriveSessionKeys() -> Bool {
        var rx = [UInt8](repeating: 0, count: 32), tx = [UInt8](repeating: 0, count: 32)
        let rc = switch role {
        case .initiator: crypto_kx_client_session_keys(&rx, &tx, ephemeralPublic, ephemeralSecret, peerEphemeral)
        case .responder: crypto_kx_server_session_keys(&rx, &tx, ephemeralPublic, ephemeralSecret, peerEphemeral)
        }
        guard rc == 0 else { return false }
        receiveKey = rx
        sendKey = tx
        return true
    }

    /// The bytes `signer` signs: a role label, then version, household, both ephemeral keys, both
    /// nonces and both identity keys, always in initiator-then-responder order.
    private func transcript(signer: Role) -> [UInt8] {
        let peer = claimedPeer?.bytes ?? []
        let mine = identity.publicKey.bytes
        let (iEph, rEph, iNonce, rNonce, iKey, rKey) = role == .initiator
            ? (ephemeralPublic, peerEphemeral, nonce, peerNonce, mine, peer)
            : (peerEphemeral, ephemeralPublic, peerNonce, nonce, peer, mine)
        var w = ByteWriter(capacity: 256)
        w.write(raw: Array((signer == .initiator ? "kidledger channel v1 initiator" : "kidledger channel v1 responder").utf8))
        w.write(0)
        w.write(Self.version)
        w.write(id: household)
        for part in [iEph, rEph, iNonce, rNonce, iKey, rKey] { w.write(raw: part) }
        return w.bytes
    }

    /// This side's secretstream header: BLAKE2b keyed with this side's nonce, so it comes from injected
    /// randomness (fresh per session) rather than from `randombytes_buf`.
    private func streamHeader() -> [UInt8] {
        let label = Array((role == .initiator ? "kidledger stream header initiator" : "kidledger stream header responder").utf8)
        return Sodium.genericHash(label, key: nonce, outputCount: SecretStream.headerBytes)
    }

    private func fail(_ error: SecurityError, refuse: Bool) -> [ChannelAction] {
        phase = .failed
        sender = nil
        receiver = nil
        decoder = ChannelFrameDecoder()
        guard refuse else { return [.failed(error)] }
        let reason: String = switch error {
        case .unauthorized(let why): why
        default: error.description
        }
        if case .unauthorized = error, let key = peerKey, let revocation = evidence(key),
           let frame = Self.revokedFrame(reason, revocation: revocation) {
            phase = .awaitingAnswer
            refusal = error
            return [.send(frame)]
        }
        return [.send(Self.frame(.refused, Self.truncated(reason))), .failed(error)]
    }

    /// Ends a refusal that sent a `revoked` frame: with the refused side's `transfers` answer
    /// (``SecurityError/answeredRefusal(_:transfers:)``), or without one (the refusal's own error).
    private func endRefusal(answer transfers: [UInt8]?) -> [ChannelAction] {
        phase = .failed
        decoder = ChannelFrameDecoder()
        let error = refusal ?? .unauthorized("refused")
        guard let transfers, case .unauthorized(let why) = error else { return [.failed(error)] }
        return [.failed(.answeredRefusal(why, transfers: transfers))]
    }

    /// A `revoked` frame: `reason` (cut to ``refusalBytesMax``) and the encoded revocation; nil
    /// when the revocation is empty or the frame would exceed ``revokedFrameBytesMax``.
    static func revokedFrame(_ reason: String, revocation: [UInt8]) -> [UInt8]? {
        let text = truncated(reason)
        guard !revocation.isEmpty, 1 + 1 + text.count + revocation.count <= revokedFrameBytesMax else { return nil }
        return frame(.revoked, [UInt8(text.count)] + text + revocation)
    }

    /// The reason and revocation of a `revoked` payload, or nil when it is malformed.
    static func decodeRevoked(_ payload: [UInt8]) -> (String, [UInt8])? {
        guard let count = payload.first.map(Int.init), count <= refusalBytesMax, payload.count > 1 + count,
              let reason = String(validating: payload[1..<(1 + count)], as: UTF8.self) else { return nil }
        return (reason, Array(payload[(1 + count)...]))
    }

    /// A `refused` frame with `reason` (cut to ``refusalBytesMax``), for a server that turns a
    /// connection away before running a channel on it (e.g. too many connections).
    public static func refusalFrame(_ reason: String) -> [UInt8] {
        frame(.refused, truncated(reason))
    }

    static func frame(_ type: FrameType, _ payload: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: 5 + payload.count)
        w.write(bigEndian: UInt32(payload.count + 1))
        w.write(type.rawValue)
        w.write(raw: payload)
        return w.bytes
    }

    /// The UTF-8 bytes of `reason`, cut to at most ``refusalBytesMax`` at a character boundary.
    static func truncated(_ reason: String) -> [UInt8] {
        var out: [UInt8] = []
        for character in reason {
            let bytes = Array(String(character).utf8)
            if out.count + bytes.count > refusalBytesMax { break }
            out += bytes
        }
        return out
    }
}

/// Splits the received byte stream into channel frames, rejecting a bad length as soon as its 4
/// bytes are in (before buffering the body).
struct ChannelFrameDecoder {
    private var buffer: [UInt8] = []
    private var start = 0

    mutating func push(_ bytes: [UInt8]) {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// `limit`: the longest frame of a type (nil: of any type), checked from the length prefix and
    /// again once the type byte is in, before the body.
    mutating func next(limit: (UInt8?) -> Int) throws(SecurityError) -> (type: UInt8, payload: [UInt8])? {
        guard buffer.count - start >= 4 else { return nil }
        var length = 0
        for i in 0..<4 { length = (length << 8) | Int(buffer[start + i]) }
        if length == 0 { throw .badFrame("length 0") }
        if length > limit(nil) { throw .badFrame("length \(length) exceeds \(limit(nil)) bytes") }
        guard buffer.count - start >= 5 else { return nil }
        let most = limit(buffer[start + 4])
        if length > most { throw .badFrame("length \(length) exceeds \(most) bytes") }
        guard buffer.count - start >= 4 + length else { return nil }
        let type = buffer[start + 4]
        let payload = Array(buffer[(start + 5)..<(start + 4 + length)])
        start += 4 + length
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        return (type, payload)
    }
}

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
/// Handshake (version 2, SIGMA-R / Noise-XX-like order: nothing identifying in clear, issue 22
/// point 5): `hello` (initiator: version, mode, ephemeral X25519 key, nonce) and `reply`
/// (responder: ephemeral key, nonce) carry only fresh randomness. Both sides then derive one key per
/// direction from the ephemeral Diffie-Hellman, bound to a hash of both messages, to the household
/// id and, when joining, to the invitation key; every later frame is a
/// `crypto_secretstream_xchacha20poly1305` message under those keys. `confirm` (initiator: identity
/// key and signature over the transcript) comes first, so the responder authorises the initiator
/// before it reveals anything: a stranger (no member's signature, no invitation key, another
/// household) gets a refusal and never the responder's key. `accept` (responder: identity key,
/// signature over the transcript including the initiator's key) follows, then `finish`
/// (initiator: an empty message, its verdict on the responder). Refusals, revocation evidence and
/// its `transfers` answer after `reply` are encrypted the same way. Either side refuses a peer that
/// presents its own identity key (a reflected connection or a replayed handshake). Both sides run
/// the authorisation hook right after verifying the peer's signature and before any application
/// data flows. Tampering, truncating, reordering or replaying any frame after `reply` fails the
/// channel. What the wire still shows is listed in docs/SECURITY.md, "What the wire shows".
///
/// Frames are `[u32 big-endian length][u8 type][payload]` like the sync protocol's, with types
/// 0xF0...0xFE reserved for the channel. Payloads (sizes exact; anything else fails):
///
/// ```
/// 0xF5 hello     66 B  version u8 (=2) | mode u8 (0 member, 1 join) | initiator ephemeral
///                      X25519 pk 32 | initiator nonce 32
///                67 B  version u8 (=2) | mode u8 (2 short code) | initiator CPace element 32 |
///                      initiator nonce 32 | slot u8 (0...15)
/// 0xF6 reply     64 B  responder ephemeral pk 32 (short code: its CPace element) | responder nonce 32
/// 0xF7 confirm  113 B  sealed(initiator Ed25519 pk 32 | signature 64 over transcript("initiator"))
/// 0xF8 accept   113 B  sealed(responder Ed25519 pk 32 | signature 64 over transcript("responder"))
/// 0xF9 finish    17 B  sealed(empty): the initiator accepts the responder
/// 0xF4 data   17+n B   sealed(n ≤ 4 MiB plaintext, TAG_MESSAGE, or empty, TAG_FINAL)
/// 0xFA sealed ≤16 KiB  sealed(inner type u8 | inner payload), only before establishment, inner:
///                      0xFE refused: UTF-8 reason ≤200 B
///                      0xFD revoked: reason length u8 (≤200) | UTF-8 reason | the owner-signed
///                           revocation of the refused peer's member (an encoded operation); sent
///                           instead of `refused` when the refusing side holds it
///                      0xFC transfers: the refused side's answer to a `revoked` whose revocation
///                           it holds void: the owner transfers (encoded operations) that void it;
///                           the refusing side waits for it (or the connection's end) before failing
/// 0xFE refused ≤200 B  UTF-8 reason, plaintext: only before the keys are shared (busy, another
///                      version, a malformed hello or reply, a confirm no key opens)
///
/// sealed(m)         = secretstream message of m (TAG_MESSAGE) with associated data = [frame type],
///                     one stream per direction from `hello` on
/// h                 = BLAKE2b-256("kidledger channel v2" | 0x00 | hello payload | reply payload)
/// psk               = empty (member) or the invitation key (join: ``invitationKey(secret:)``)
/// key(role)         = BLAKE2b-256(key: crypto_kx key of role's sending direction (short code:
///                                 the CPace isk, sid = initiator nonce | slot, for both),
///                                 "kidledger channel v2 key " + role | 0x00 | h | household 16 | psk)
/// header(role)      = BLAKE2b-192(key: role's nonce, "kidledger stream header " + role)
/// transcript(label) = "kidledger channel v2 " + label | 0x00 | h | household 16 | id_i 32
///                     [| id_r 32, for "responder"]
/// household 16      = the household id; 16 zero bytes for a short code (the joiner knows none yet)
/// ```
///
/// Short-code mode (issue 22, point 4): the responder asks the `shortInvitations` hook for the
/// password of the slot `hello` names (the hook counts a try first); none: a plaintext refusal
/// (``codeMismatch``). A `confirm` that does not open (the codes differ, so the CPace keys do)
/// gets the same refusal, so the joiner learns "no match" and the responder's key stays hidden.
/// The initiator's key is not authorised (`authorize` is not called for it: the channel that
/// follows only hands over the invitation's long code); the responder's is, as always.
///
/// A v1 hello (0xF0) is answered with a plaintext refusal naming the version; a v1 peer's refusal
/// of a v2 hello ("unknown channel frame type 245") is reported as another kidledger version.
/// In join mode the responder tries the key of each open invitation (at most ``invitationsMax``,
/// from the `invitations` hook) on `confirm`; the one that opens it is passed to `authorize`.
/// Headers come from the nonces, so no system randomness is drawn (see `SecretStream`).
/// Handshake frames over 512 bytes are rejected from their length prefix; after establishment the
/// limit is ``frameBytesMax``; a `sealed` frame may hold up to ``revokedFrameBytesMax`` bytes.
/// A server lowers the data frame limit (``dataFrameBytesMax``) until it admits the peer.
public final class SecureChannel {
    /// Which end of the connection this is.
    public enum Role: Equatable, Sendable {
        /// The side that connected; it sends `hello`.
        case initiator
        /// The side that accepted the connection.
        case responder
    }

    /// What the initiator comes for (the `hello` mode byte; responders learn it from `hello`).
    public enum Mode: Equatable, Sendable {
        /// A member's session: keys bound to the household only.
        case member
        /// Joining with an invitation: keys bound to its key too (``invitationKey(secret:)``), so
        /// only a holder of the code and the inviter read what follows.
        case join(invitationKey: [UInt8])
        /// Joining with a short code (``ShortCode``): the keys come from a CPace exchange
        /// (``CPace``) on the code's password instead of X25519, bound to no household (the joiner
        /// does not know it yet); `slot` (sent in `hello`) says which open short invitation the
        /// responder runs it with. What follows is only the invitation's hand-over
        /// (docs/PROTOCOL.md, "Joining with a short code").
        case shortCode(slot: UInt8, password: [UInt8])

        var byte: UInt8 {
            switch self {
            case .member: 0
            case .join: 1
            case .shortCode: 2
            }
        }
    }

    /// The authorisation hook: given the peer's verified identity key, the household, the peer's
    /// role and, for a responder whose initiator joins, the invitation key that opened its
    /// `confirm` (else nil), returns nil to accept or a short reason (sent to the peer) to refuse.
    public typealias Authorize = @Sendable (PublicKey, RecordID, Role, _ invitation: [UInt8]?) -> String?
    /// The evidence hook: given a peer key the authorisation hook refused, the encoded owner-signed
    /// revocation of that member to send with the refusal (nil: a plain refusal). Called on the
    /// thread that runs the handshake, only when it refuses.
    public typealias Evidence = (PublicKey) -> [UInt8]?
    /// The answer hook of a refused side: given the encoded revocation a `revoked` frame carries
    /// (unverified), the encoded owner transfers that void it here, to send back in a `transfers`
    /// frame (nil: no answer). A stale owner key's revocation of the new owner is answered so
    /// (docs/SECURITY.md, "A stolen laptop").
    public typealias Answer = ([UInt8]) -> [UInt8]?

    /// The open invitations hook of a responder: the keys (``invitationKey(secret:)``) of the
    /// invitations still open here; at most ``invitationsMax`` of them are tried.
    public typealias Invitations = () -> [[UInt8]]

    /// The short invitations hook of a responder: given the slot a short-code `hello` names, the
    /// password (``ShortCode/password``) of the short invitation open in it, after counting one try
    /// against it; nil when none is open there (or its tries are used up). Called once per such
    /// `hello`, before the code is checked, so guesses made in parallel count too.
    public typealias ShortInvitations = (UInt8) -> [UInt8]?

    /// The secure channel version this code speaks.
    public static let version: UInt8 = 2
    /// Bytes of injected randomness a channel needs: 32 for the ephemeral key, 32 for the nonce.
    public static let seedByteCount = 64
    /// The most open invitations whose keys a responder tries on a joiner's `confirm`.
    public static let invitationsMax = 16
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
    /// The largest `sealed` frame (type byte plus payload); a revocation that does not fit is
    /// not sent (the refusal is a plain one then).
    public static let revokedFrameBytesMax = 16 << 10

    /// Channel frame types. `helloV1` is the first frame of a version 1 peer.
    enum FrameType: UInt8 {
        case helloV1 = 0xF0, data = 0xF4, hello = 0xF5, reply = 0xF6, confirm = 0xF7, accept = 0xF8, finish = 0xF9
        case sealed = 0xFA, transfers = 0xFC, revoked = 0xFD, refused = 0xFE
    }

    /// Why a peer presenting this side's own identity key is refused (issue 20, point 9).
    static let reflected = "the other side presents this device's own key: a connection reflected back to this device or a replayed handshake"
    /// What a side speaking another channel version is told (and reports).
    static let otherVersion = "the other laptop runs another kidledger version (secure channel v1, this one speaks v2); update both"
    /// Why a responder refuses a member's `confirm` it cannot open.
    static let notOpened = "device of another household, or a handshake altered on the way"
    /// Why a responder refuses a joiner's `confirm` no open invitation's key opens.
    static let noInvitation = "this invitation is unknown here, already used or expired; ask for a new code"
    /// Why a responder refuses a short-code `confirm` it cannot open (the codes differ), or a
    /// short-code `hello` whose slot holds no open invitation.
    public static let codeMismatch = "no open invitation here matches that code"

    static let helloBytes = 1 + 1 + 32 + 32
    /// A short-code `hello` carries the slot after the nonce.
    static let shortCodeHelloBytes = helloBytes + 1
    static let replyBytes = 32 + 32
    static let identityBytes = 32 + 64
    static let sealedIdentityBytes = identityBytes + SecretStream.overheadBytes

    private enum Phase: Equatable {
        case idle, awaitingHello, awaitingReply, awaitingConfirm, awaitingAccept, awaitingFinish, established, failed
        /// This side sent a `revoked` frame and waits for the refused side's `transfers` answer
        /// (or the connection's end) before it fails with ``SecureChannel/refusal``.
        case awaitingAnswer
    }

    /// The largest data frame accepted after establishment (type byte plus payload), from
    /// 1 + the secretstream overhead up to ``frameBytesMax`` (the default); other values are
    /// clamped. A server sets ``unadmittedFrameBytesMax`` until its session admits the peer, so a
    /// peer makes it buffer kilobytes, not megabytes; a longer length prefix fails the channel
    /// as soon as its 4 bytes arrive.
    public var dataFrameBytesMax: Int = SecureChannel.frameBytesMax {
        didSet { dataFrameBytesMax = min(max(dataFrameBytesMax, 1 + SecretStream.overheadBytes), Self.frameBytesMax) }
    }

    /// This side's role.
    public let role: Role
    /// The household this side belongs to; the peer's keys are bound to it, so a peer of another
    /// household cannot open what this side seals.
    public let household: RecordID
    /// What this side comes for (initiator), or what the initiator came for (responder, once its
    /// `hello` is in; the invitation key once its `confirm` opened).
    public private(set) var mode: Mode
    /// The peer's identity key once its signature has been verified (before authorisation), else nil.
    public private(set) var peerKey: PublicKey?

    private let identity: Identity
    private let authorize: Authorize
    private let evidence: Evidence
    private let answer: Answer
    private let invitations: Invitations
    private let shortInvitations: ShortInvitations
    /// The CPace scalar (short-code mode only), from the seed's first 32 bytes.
    private var cpaceScalar: [UInt8] = []
    /// The seed's first 32 bytes, kept for a responder's scalar until `hello` says the mode.
    private var scalarSeed: [UInt8]
    private var phase: Phase
    /// The failure a refusal that awaits its answer ends with.
    private var refusal: SecurityError?
    private var decoder = ChannelFrameDecoder()
    private var ephemeralPublic = [UInt8](repeating: 0, count: 32)
    private var ephemeralSecret = [UInt8](repeating: 0, count: 32)
    private let nonce: [UInt8]
    private var peerNonce: [UInt8] = []
    /// The `hello` and `reply` payloads, hashed into every key and signature.
    private var helloPayload: [UInt8] = []
    private var replyPayload: [UInt8] = []
    /// The crypto_kx keys of the two directions (before the transcript, household and
    /// invitation key are mixed in).
    private var kxReceive: [UInt8] = []
    private var kxSend: [UInt8] = []
    private var sender: SecretStream?
    private var receiver: SecretStream?
    private var localClosed = false
    private var peerClosed = false

    /// A channel for `role` as `identity` in `household`, with 64 bytes of injected randomness
    /// (`seed`: the first 32 seed the ephemeral X25519 key, the last 32 are the handshake nonce).
    /// Throws ``SecurityError/badKey(_:)`` if `seed` is not 64 bytes or a join's invitation key is
    /// not 32 bytes. `mode` is what an initiator comes for; `invitations` gives a responder the
    /// keys of its open invitations (none by default: it admits no joiner). `evidence` gives the
    /// revocation to send when `authorize` refuses a revoked member (none by default); `answer`
    /// the owner transfers to send back when the peer refuses this side with a revocation
    /// (none by default). `shortInvitations` gives a responder the passwords of its open short
    /// invitations (none by default: it admits no short-code joiner).
    public init(role: Role, identity: Identity, household: RecordID, seed: [UInt8], mode: Mode = .member,
                invitations: @escaping Invitations = { [] }, shortInvitations: @escaping ShortInvitations = { _ in nil },
                authorize: @escaping Authorize, evidence: @escaping Evidence = { _ in nil },
                answer: @escaping Answer = { _ in nil }) throws(SecurityError) {
        _ = Sodium.ready
        guard seed.count == Self.seedByteCount else {
            throw .badKey("a secure channel needs \(Self.seedByteCount) bytes of randomness, got \(seed.count)")
        }
        if case .join(let key) = mode, key.count != 32 { throw .badKey("an invitation key has 32 bytes, got \(key.count)") }
        if case .shortCode(let slot, let password) = mode, password.count != 32 || Int(slot) >= ShortCode.slots {
            throw .badKey("a short code's password has 32 bytes and its slot is 0...\(ShortCode.slots - 1)")
        }
        self.role = role
        self.identity = identity
        self.household = household
        self.mode = role == .initiator ? mode : .member
        self.invitations = invitations
        self.shortInvitations = shortInvitations
        self.scalarSeed = Array(seed[0..<32])
        self.authorize = authorize
        self.evidence = evidence
        self.answer = answer
        self.nonce = Array(seed[32..<64])
        self.phase = .idle
        let rc = crypto_kx_seed_keypair(&ephemeralPublic, &ephemeralSecret, Array(seed[0..<32]))
        try Sodium.check(rc, .badKey("crypto_kx_seed_keypair failed"))
        if role == .initiator, case .shortCode(let slot, let password) = mode {
            // The element takes the ephemeral key's place in `hello`.
            cpaceScalar = CPace.scalar(seed: scalarSeed)
            ephemeralPublic = CPace.element(scalar: cpaceScalar, password: password, sid: nonce + [slot])
        }
    }

    deinit {
        sodium_memzero(&ephemeralSecret, ephemeralSecret.count)
        sodium_memzero(&cpaceScalar, cpaceScalar.count)
        sodium_memzero(&scalarSeed, scalarSeed.count)
        sodium_memzero(&kxReceive, kxReceive.count)
        sodium_memzero(&kxSend, kxSend.count)
    }

    /// The key an invitation's secret gives (BLAKE2b-256 of a label and the secret): what the
    /// inviting device keeps (not the secret) and what both sides mix into a join's keys.
    public static func invitationKey(secret: [UInt8]) -> [UInt8] {
        Sodium.genericHash(Array("kidledger invitation key v2".utf8) + [0] + secret, key: [], outputCount: 32)
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
            helloPayload = [Self.version, mode.byte] + ephemeralPublic + nonce
            if case .shortCode(let slot, _) = mode { helloPayload.append(slot) }
            return [.send(Self.frame(.hello, helloPayload))]
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
            // A `sealed` frame may carry a revocation (answering this side's confirm or accept) or
            // its answer: only then may a handshake-phase frame be larger than ``handshakeFrameBytesMax``.
            let mayBeLarge = phase == .awaitingAccept || phase == .awaitingFinish || phase == .awaitingAnswer
            let frame: (type: UInt8, payload: [UInt8])?
            do {
                frame = try decoder.next { type in
                    if established { return dataFrameBytesMax }
                    if mayBeLarge && (type == nil || type == FrameType.sealed.rawValue) { return Self.revokedFrameBytesMax }
                    return Self.handshakeFrameBytesMax
                }
            } catch {
                actions += phase == .awaitingAnswer ? endRefusal(answer: nil) : fail(error, refuse: phase != .established)
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
            out += sealedFrame(.data, Array(plaintext[start..<end]))
            start = end
        }
        return out
    }

    /// The frame that closes this side's sending direction cleanly (a final secretstream message);
    /// ``seal(_:)`` throws afterwards. The peer reports ``ChannelAction/closed``.
    public func close() throws(SecurityError) -> [UInt8] {
        guard phase == .established, !localClosed, sender != nil else { throw .notEstablished }
        localClosed = true
        return sealedFrame(.data, [], tag: SecretStream.tagFinal)
    }

    // MARK: - Handshake

    private func handle(type: UInt8, payload: [UInt8]) -> [ChannelAction] {
        if phase == .awaitingAnswer {
            // Anything but one sealed, non-empty `transfers` answer ends the refusal without one.
            guard type == FrameType.sealed.rawValue, let inner = open(.sealed, payload), inner.first == FrameType.transfers.rawValue,
                  inner.count > 1 else { return endRefusal(answer: nil) }
            return endRefusal(answer: Array(inner.dropFirst()))
        }
        guard let kind = FrameType(rawValue: type) else {
            return fail(.badFrame("unknown channel frame type \(type)"), refuse: phase != .established)
        }
        if kind == .refused {
            guard phase != .established, let reason = Self.reason(payload) else {
                return fail(.badFrame("malformed or unexpected refusal"), refuse: false)
            }
            // A v1 peer does not know a v2 hello's frame type.
            let v1 = phase == .awaitingReply && reason.hasSuffix("unknown channel frame type \(FrameType.hello.rawValue)")
            return fail(.refused(v1 ? Self.otherVersion : reason), refuse: false)
        }
        switch (phase, kind) {
        case (.awaitingHello, .helloV1): return fail(.handshakeFailed(Self.otherVersion), refuse: true)
        case (.awaitingHello, .hello): return onHello(payload)
        case (.awaitingReply, .reply): return onReply(payload)
        case (.awaitingConfirm, .confirm): return onConfirm(payload)
        case (.awaitingAccept, .accept): return onAccept(payload)
        case (.awaitingFinish, .finish): return onFinish(payload)
        case (.awaitingAccept, .sealed), (.awaitingFinish, .sealed): return onSealed(payload)
        case (.established, .data): return onData(payload)
        case (.established, _):
            return fail(.badFrame("unexpected \(kind) frame after establishment"), refuse: false)
        default:
            return fail(.handshakeFailed("unexpected \(kind) frame"), refuse: true)
        }
    }

    private func onHello(_ payload: [UInt8]) -> [ChannelAction] {
        let shortCode = payload.count == Self.shortCodeHelloBytes && payload[1] == Mode.shortCode(slot: 0, password: []).byte
        guard payload.count == Self.helloBytes || shortCode else { return fail(.handshakeFailed("malformed hello"), refuse: true) }
        guard payload[0] == Self.version else {
            return fail(.handshakeFailed("peer speaks secure channel version \(payload[0]), this side speaks \(Self.version)"), refuse: true)
        }
        switch payload[1] {
        case 0: mode = .member
        case 1: mode = .join(invitationKey: [])  // the key is the open invitation that opens `confirm`
        case 2 where shortCode:
            let slot = payload[Self.helloBytes]
            guard Int(slot) < ShortCode.slots, let password = shortInvitations(slot), password.count == 32 else {
                return fail(.handshakeFailed(Self.codeMismatch), refuse: true)
            }
            mode = .shortCode(slot: slot, password: password)
        default: return fail(.handshakeFailed("unknown handshake mode \(payload[1])"), refuse: true)
        }
        helloPayload = payload
        peerNonce = Array(payload[34..<66])
        let peerElement = Array(payload[2..<34])
        if case .shortCode(let slot, let password) = mode {
            cpaceScalar = CPace.scalar(seed: scalarSeed)
            ephemeralPublic = CPace.element(scalar: cpaceScalar, password: password, sid: peerNonce + [slot])
            guard agree(peerElement: peerElement, sid: peerNonce + [slot]) else { return fail(.handshakeFailed("bad element"), refuse: true) }
        } else {
            guard exchange(peerEphemeral: peerElement) else { return fail(.handshakeFailed("bad ephemeral key"), refuse: true) }
        }
        replyPayload = ephemeralPublic + nonce
        phase = .awaitingConfirm
        return [.send(Self.frame(.reply, replyPayload))]
    }

    private func onReply(_ payload: [UInt8]) -> [ChannelAction] {
        guard payload.count == Self.replyBytes else { return fail(.handshakeFailed("malformed reply"), refuse: true) }
        replyPayload = payload
        let peerElement = Array(payload[0..<32])
        if case .shortCode(let slot, _) = mode {
            guard agree(peerElement: peerElement, sid: nonce + [slot]) else { return fail(.handshakeFailed("bad element"), refuse: true) }
        } else {
            guard exchange(peerEphemeral: peerElement) else { return fail(.handshakeFailed("bad ephemeral key"), refuse: true) }
        }
        peerNonce = Array(payload[32..<64])
        (sender, receiver) = streams(invitationKey: mode.invitationKey ?? [])
        var w = ByteWriter(capacity: Self.identityBytes)
        w.write(raw: identity.publicKey.bytes)
        w.write(raw: identity.sign(transcript(signer: .initiator, initiator: identity.publicKey.bytes)))
        phase = .awaitingAccept
        return [.send(sealedFrame(.confirm, w.bytes))]
    }

    private func onConfirm(_ payload: [UInt8]) -> [ChannelAction] {
        // A member's keys have no invitation key; a joiner's have the key of one open invitation.
        // A short code's keys come from its CPace exchange already.
        var candidates: [[UInt8]] = [[]]
        if case .join = mode { candidates = Array(invitations().filter { $0.count == 32 }.prefix(Self.invitationsMax)) }
        var opened: [UInt8]?
        for key in candidates where opened == nil {
            let pair = streams(invitationKey: key)
            var receive = pair.receive
            guard let message = Self.pull(&receive, payload, .confirm) else { continue }
            opened = message
            sender = pair.send
            receiver = receive
            if !key.isEmpty { mode = .join(invitationKey: key) }
        }
        guard let opened else {
            let why = switch mode {
            case .member: Self.notOpened
            case .join: Self.noInvitation
            case .shortCode: Self.codeMismatch
            }
            return fail(.handshakeFailed(why), refuse: true)
        }
        guard opened.count == Self.identityBytes else { return fail(.handshakeFailed("malformed confirm"), refuse: true) }
        let initiator = PublicKey(bytes: opened[0..<32])!
        guard initiator.bytes != identity.publicKey.bytes else { return fail(.handshakeFailed(Self.reflected), refuse: true) }
        guard Identity.verify(signature: Array(opened[32..<96]), message: transcript(signer: .initiator, initiator: initiator.bytes),
                              key: initiator) else {
            return fail(.badSignature, refuse: true)
        }
        peerKey = initiator
        // A short-code joiner is admitted to nothing but the invitation's hand-over: it proved
        // the code; its membership comes with the join that follows (docs/PROTOCOL.md).
        if case .shortCode = mode {} else if let reason = authorize(initiator, household, .initiator, mode.invitationKey) {
            return fail(.unauthorized(reason), refuse: true)
        }
        var w = ByteWriter(capacity: Self.identityBytes)
        w.write(raw: identity.publicKey.bytes)
        w.write(raw: identity.sign(transcript(signer: .responder, initiator: initiator.bytes)))
        phase = .awaitingFinish
        return [.send(sealedFrame(.accept, w.bytes))]
    }

    private func onAccept(_ payload: [UInt8]) -> [ChannelAction] {
        guard let opened = open(.accept, payload) else { return fail(.handshakeFailed("accept does not authenticate"), refuse: true) }
        guard opened.count == Self.identityBytes else { return fail(.handshakeFailed("malformed accept"), refuse: true) }
        let responder = PublicKey(bytes: opened[0..<32])!
        guard responder.bytes != identity.publicKey.bytes else { return fail(.handshakeFailed(Self.reflected), refuse: true) }
        guard Identity.verify(signature: Array(opened[32..<96]),
                              message: transcript(signer: .responder, initiator: identity.publicKey.bytes, responder: responder.bytes),
                              key: responder) else {
            return fail(.badSignature, refuse: true)
        }
        peerKey = responder
        if let reason = authorize(responder, household, .responder, nil) {
            return fail(.unauthorized(reason), refuse: true)
        }
        let finish = sealedFrame(.finish, [])
        phase = .established
        return [.send(finish), .established(peer: responder)]
    }

    private func onFinish(_ payload: [UInt8]) -> [ChannelAction] {
        guard let opened = open(.finish, payload), opened.isEmpty, let initiator = peerKey else {
            return fail(.handshakeFailed("finish does not authenticate"), refuse: true)
        }
        phase = .established
        return [.established(peer: initiator)]
    }

    /// A sealed refusal of this side (plain, or with the revocation of its member).
    private func onSealed(_ payload: [UInt8]) -> [ChannelAction] {
        guard let inner = open(.sealed, payload), let type = inner.first else { return fail(.decryptFailed, refuse: false) }
        let body = Array(inner.dropFirst())
        switch FrameType(rawValue: type) {
        case .refused?:
            guard let reason = Self.reason(body) else { return fail(.badFrame("malformed refusal"), refuse: false) }
            return fail(.refused(reason), refuse: false)
        case .revoked?:
            guard let (reason, revocation) = Self.decodeRevoked(body) else {
                return fail(.badFrame("malformed revocation refusal"), refuse: false)
            }
            let transfers = answer(revocation) ?? []
            let frame = transfers.isEmpty ? nil : sealedFrame(.sealed, [FrameType.transfers.rawValue] + transfers, most: Self.revokedFrameBytesMax)
            let failure = fail(.revokedByPeer(reason, revocation: revocation), refuse: false)
            return (frame.map { [ChannelAction.send($0)] } ?? []) + failure
        default:
            return fail(.badFrame("unexpected sealed frame"), refuse: false)
        }
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

    /// Runs crypto_kx with the peer's ephemeral key (initiator = client); false if it is
    /// unacceptable (e.g. a low-order point).
    private func exchange(peerEphemeral: [UInt8]) -> Bool {
        var rx = [UInt8](repeating: 0, count: 32), tx = [UInt8](repeating: 0, count: 32)
        let rc = switch role {
        case .initiator: crypto_kx_client_session_keys(&rx, &tx, ephemeralPublic, ephemeralSecret, peerEphemeral)
        case .responder: crypto_kx_server_session_keys(&rx, &tx, ephemeralPublic, ephemeralSecret, peerEphemeral)
        }
        guard rc == 0 else { return false }
        kxReceive = rx
        kxSend = tx
        return true
    }

    /// The household the keys and signatures are bound to: none (zero) for a short code, whose
    /// joiner learns the household only from the invitation handed over.
    private var boundHousehold: RecordID {
        if case .shortCode = mode { .zero } else { household }
    }

    /// Runs CPace with the peer's element (short-code mode; sid = the initiator's nonce and the
    /// slot): both directions' keys are mixed from its result. False if the element is unacceptable.
    private func agree(peerElement: [UInt8], sid: [UInt8]) -> Bool {
        let (initiator, responder) = role == .initiator ? (ephemeralPublic, peerElement) : (peerElement, ephemeralPublic)
        guard let isk = CPace.sessionKey(scalar: cpaceScalar, peerElement: peerElement, sid: sid,
                                         initiatorElement: initiator, responderElement: responder) else { return false }
        (kxReceive, kxSend) = (isk, isk)
        return true
    }

    private static func label(_ role: Role) -> String { role == .initiator ? "initiator" : "responder" }

    /// The hash of both handshake messages every key and signature is bound to.
    private var messagesHash: [UInt8] {
        Sodium.genericHash(Array("kidledger channel v2".utf8) + [0] + helloPayload + replyPayload, key: [], outputCount: 32)
    }

    /// The two secretstreams (this side's sending one, the peer's) under keys bound to the
    /// handshake messages, the household and `invitationKey` (empty for a member).
    private func streams(invitationKey: [UInt8]) -> (send: SecretStream, receive: SecretStream) {
        let h = messagesHash
        let peer: Role = role == .initiator ? .responder : .initiator
        func key(_ of: Role, _ kx: [UInt8]) -> [UInt8] {
            Sodium.genericHash(Array("kidledger channel v2 key \(Self.label(of))".utf8) + [0] + h + boundHousehold.bytes + invitationKey,
                               key: kx, outputCount: 32)
        }
        func header(_ of: Role, _ nonce: [UInt8]) -> [UInt8] {
            Sodium.genericHash(Array("kidledger stream header \(Self.label(of))".utf8), key: nonce, outputCount: SecretStream.headerBytes)
        }
        return (SecretStream(header: header(role, nonce), key: key(role, kxSend)),
                SecretStream(header: header(peer, peerNonce), key: key(peer, kxReceive)))
    }

    /// The bytes `signer` signs: a role label, the messages' hash, the household, the initiator's
    /// identity key and (for the responder's signature) the responder's.
    private func transcript(signer: Role, initiator: [UInt8], responder: [UInt8]? = nil) -> [UInt8] {
        var w = ByteWriter(capacity: 160)
        w.write(raw: Array("kidledger channel v2 \(Self.label(signer))".utf8))
        w.write(0)
        w.write(raw: messagesHash)
        w.write(id: boundHousehold)
        w.write(raw: initiator)
        if signer == .responder { w.write(raw: responder ?? identity.publicKey.bytes) }
        return w.bytes
    }

    /// A frame of `type` holding `message` sealed on this side's stream (nil when it would exceed
    /// `most` bytes: nothing is pushed then).
    private func sealedFrame(_ type: FrameType, _ message: [UInt8], tag: UInt8 = SecretStream.tagMessage, most: Int) -> [UInt8]? {
        guard 1 + message.count + SecretStream.overheadBytes <= most else { return nil }
        return Self.frame(type, sender!.push(message, tag: tag, associated: [type.rawValue]))
    }

    private func sealedFrame(_ type: FrameType, _ message: [UInt8], tag: UInt8 = SecretStream.tagMessage) -> [UInt8] {
        sealedFrame(type, message, tag: tag, most: .max)!
    }

    /// The message of a sealed handshake frame of `type` (TAG_MESSAGE), or nil.
    private func open(_ type: FrameType, _ payload: [UInt8]) -> [UInt8]? {
        guard receiver != nil else { return nil }
        return Self.pull(&receiver!, payload, type)
    }

    private static func pull(_ stream: inout SecretStream, _ payload: [UInt8], _ type: FrameType) -> [UInt8]? {
        guard let opened = stream.pull(payload, associated: [type.rawValue]), opened.tag == SecretStream.tagMessage else { return nil }
        return opened.message
    }

    /// A refusal reason: at most ``refusalBytesMax`` bytes of UTF-8, else nil.
    private static func reason(_ bytes: [UInt8]) -> String? {
        bytes.count <= refusalBytesMax ? String(validating: bytes, as: UTF8.self) : nil
    }

    /// Fails the channel; with `refuse`, tells the peer why: sealed once the keys are shared
    /// (with the revocation of the refused member when `evidence` has it), plaintext before.
    private func fail(_ error: SecurityError, refuse: Bool) -> [ChannelAction] {
        let sealing = sender != nil && phase != .established
        phase = .failed
        decoder = ChannelFrameDecoder()
        defer { if phase == .failed { sender = nil; receiver = nil } }
        guard refuse else { return [.failed(error)] }
        let reason: String = switch error {
        case .unauthorized(let why): why
        default: error.description
        }
        guard sealing else { return [.send(Self.frame(.refused, Self.truncated(reason))), .failed(error)] }
        if case .unauthorized = error, let key = peerKey, let revocation = evidence(key), !revocation.isEmpty,
           let frame = sealedFrame(.sealed, Self.revokedInner(reason, revocation: revocation), most: Self.revokedFrameBytesMax) {
            phase = .awaitingAnswer
            refusal = error
            return [.send(frame)]
        }
        return [.send(sealedFrame(.sealed, [FrameType.refused.rawValue] + Self.truncated(reason))), .failed(error)]
    }

    /// Ends a refusal that sent a `revoked` frame: with the refused side's `transfers` answer
    /// (``SecurityError/answeredRefusal(_:transfers:)``), or without one (the refusal's own error).
    private func endRefusal(answer transfers: [UInt8]?) -> [ChannelAction] {
        phase = .failed
        decoder = ChannelFrameDecoder()
        sender = nil
        receiver = nil
        let error = refusal ?? .unauthorized("refused")
        guard let transfers, case .unauthorized(let why) = error else { return [.failed(error)] }
        return [.failed(.answeredRefusal(why, transfers: transfers))]
    }

    /// The inner bytes of a sealed `revoked` refusal: its type, `reason` (cut to
    /// ``refusalBytesMax``) and the encoded revocation.
    static func revokedInner(_ reason: String, revocation: [UInt8]) -> [UInt8] {
        let text = truncated(reason)
        return [FrameType.revoked.rawValue, UInt8(text.count)] + text + revocation
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

extension SecureChannel.Mode {
    /// The invitation key mixed into a join's keys, or nil (a member's session).
    var invitationKey: [UInt8]? {
        if case .join(let key) = self, !key.isEmpty { key } else { nil }
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

import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerReplica
import KidLedgerSecurity

/// What a member's relay session takes from the ledger (plain inputs: where they are kept is the
/// membership layer's work): the stream key, the epoch keys, the epoch to seal under and the
/// relay's key, and optionally an access list to hand on and boxes to post.
public struct RelayMemberSetup: Sendable {
    /// The relay's key (pinned in the channel; named in every refusal).
    public var relay: PublicKey
    /// The household's stream key.
    public var streamKey: RelayStreamKey
    /// The epoch keys this member holds (what it opens envelopes with).
    public var keyring: EpochKeyring
    /// The epoch this member seals its uploads under (its key must be in ``keyring``).
    public var sealEpoch: UInt32
    /// An owner-signed access list to install when the relay holds an older one (nil: none).
    public var accessList: SignedRelayAccessList?
    /// Epoch boxes to file in members' mailboxes (the owner's, after a new epoch).
    public var posts: [RelayMailboxPost]
    /// The session's bounds.
    public var limits: RelayMemberLimits

    /// A setup.
    public init(relay: PublicKey, streamKey: RelayStreamKey, keyring: EpochKeyring, sealEpoch: UInt32,
                accessList: SignedRelayAccessList? = nil, posts: [RelayMailboxPost] = [], limits: RelayMemberLimits = RelayMemberLimits()) {
        self.relay = relay
        self.streamKey = streamKey
        self.keyring = keyring
        self.sealEpoch = sealEpoch
        self.accessList = accessList
        self.posts = posts
        self.limits = limits
    }
}

/// Bounds of a member's relay session. Values are clamped to the protocol's limits.
public struct RelayMemberLimits: Equatable, Sendable {
    /// Most changes per envelope (1...``changesPerBatchMax``); a run between two signed heads
    /// longer than this goes in one envelope up to that hard bound.
    public var changesPerEnvelope: Int
    /// Most payload bytes per envelope (1 KiB...``RelayEnvelope/payloadBytesMax``), with the same exception.
    public var payloadBytes: Int
    /// Most uploads sent and not yet answered (1...16).
    public var uploadsInFlightMax: Int
    /// Most envelope bytes asked for per page (1...``RelayMessage/pageBytesMax``).
    public var pageBytes: Int
    /// Most envelopes uploaded in one session.
    public var uploadsPerSessionMax: Int
    /// Most pages read in one session (over all passes).
    public var pagesPerSessionMax: Int
    /// Most download passes (a pass again when the last one applied changes and left some that
    /// waited for them: a grant in another stream, a gap).
    public var passesMax: Int

    /// Limits, each clamped into its range.
    public init(changesPerEnvelope: Int = changesPerBatchMax, payloadBytes: Int = 512 << 10, uploadsInFlightMax: Int = 4,
                pageBytes: Int = RelayMessage.pageBytesMax, uploadsPerSessionMax: Int = 1 << 16, pagesPerSessionMax: Int = 1 << 12,
                passesMax: Int = 4) {
        self.changesPerEnvelope = min(max(changesPerEnvelope, 1), changesPerBatchMax)
        self.payloadBytes = min(max(payloadBytes, 1 << 10), RelayEnvelope.payloadBytesMax)
        self.uploadsInFlightMax = min(max(uploadsInFlightMax, 1), 16)
        self.pageBytes = min(max(pageBytes, 1), RelayMessage.pageBytesMax)
        self.uploadsPerSessionMax = max(uploadsPerSessionMax, 0)
        self.pagesPerSessionMax = max(pagesPerSessionMax, 1)
        self.passesMax = min(max(passesMax, 1), 8)
    }
}

/// What a member's relay session did.
public struct RelayMemberSummary: Equatable, Sendable {
    /// Most refusal messages kept (the count goes on).
    public static let refusalsKept = 32

    /// The access list number the relay held at hello (nil: none), and the one this session installed.
    public var relayAccessList: UInt64?, installedAccessList: UInt64?
    /// Envelopes uploaded and stored, their changes and bytes.
    public var envelopesUploaded = 0, changesUploaded = 0, bytesUploaded = 0
    /// Uploads the relay held already.
    public var envelopesAlreadyHeld = 0
    /// Envelopes received in pages.
    public var envelopesReceived = 0
    /// Changes applied from them, and those held already.
    public var changesApplied = 0, duplicates = 0
    /// Changes not applied yet: a gap, a grant not here yet, a stamp too far ahead (a later pass
    /// or session takes them).
    public var changesDeferred = 0
    /// Envelopes refused (did not open, or their changes failed authentication): nothing of them applied.
    public var envelopesRefused = 0
    /// Requests the relay refused (an upload over quota, a stale list, …).
    public var requestsRefused = 0
    /// The first ``refusalsKept`` refusals, each a sentence naming the relay.
    public var refusals: [String] = []
    /// The relay's held vector at welcome (what it could bring every listed member), and as this
    /// session left it: raised by each upload it stored or held already.
    public var relayHeldAtWelcome: [RelayStreamTag: UInt64] = [:], relayHeld: [RelayStreamTag: UInt64] = [:]
    /// Whether the relay refused an upload for its quota (the uploads stopped there).
    public var uploadsOverQuota = false
    /// Runs of changes not uploaded because no signed head fell within an envelope's bound.
    public var runsTooLarge = 0
    /// Boxes filed in mailboxes.
    public var boxesPosted = 0
    /// This member's mailbox as the relay holds it (for the caller to open and keep the keys).
    public var mailbox: [RelayMailboxBox] = []
    /// The recovery-signed owner statement the relay handed with the mailbox (nil: the relay never
    /// followed a recovery), for the caller to check against its genesis's recovery key.
    public var ownerStatement: RelayOwnerStatement?
    /// The listed members' status (opaque: ``RelayMemberSession/versionVector(of:)`` maps a vector to origins).
    public var members: [RelayMemberReport] = []
    /// The vector acknowledged last.
    public var acknowledged: [RelayStreamTag: UInt64] = [:]
    /// Download passes run.
    public var passes = 0
    /// Bytes sent and received.
    public var bytesSent = 0, bytesReceived = 0

    /// An empty summary.
    public init() {}

    mutating func refuse(_ sentence: String) {
        if refusals.count < Self.refusalsKept { refusals.append(sentence) }
    }
}

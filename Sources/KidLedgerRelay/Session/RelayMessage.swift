import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerSecurity

/// One message between a member and the relay (docs/RELAY-DESIGN.md, "Sessions"), framed as
/// the sync protocol frames its own (``Frame``: length u32 | type u8 | payload, at most
/// ``frameBytesMax``). The member asks, the relay answers each request with one message in
/// order: its answer, `refused` (the request stored nothing; the session goes on) or `error`
/// (the session ends).
public enum RelayMessage: Equatable, Sendable {
    /// Member → relay, first: the relay protocol versions it speaks.
    case hello(versionMin: UInt16, versionMax: UInt16)
    /// Relay → member: the chosen version, the number of the access list held (nil: none), the
    /// member's acknowledged vector and, per stream, the sequence up to which the relay can bring
    /// every listed member (``RelayStore/held(including:)``).
    case welcome(version: UInt16, accessList: UInt64?, acknowledged: [RelayStreamTag: UInt64], held: [RelayStreamTag: UInt64])
    /// An owner-signed access list to install.
    case install(SignedRelayAccessList)
    /// The list was installed; its number.
    case installed(number: UInt64)
    /// One sealed envelope to store.
    case upload([UInt8])
    /// What became of it: stored, or held already (a replay, or the same range uploaded before).
    case uploaded(stored: Bool)
    /// The member's vector (stream → highest sequence held); it also records the sync time.
    case acknowledge([RelayStreamTag: UInt64])
    /// The acknowledgement is recorded.
    case acknowledged
    /// A page of the envelopes above the member's vector, after `after` (nil: from the start).
    case pendingRequest(after: RelayEnvelopeHeader?, countMax: UInt16, bytesMax: UInt32)
    /// The page: whole envelopes in stream and sequence order, and where the next one starts.
    case pendingPage(envelopes: [[UInt8]], next: RelayEnvelopeHeader?)
    /// An epoch box to file in a member's mailbox.
    case mailboxPost(RelayMailboxPost)
    /// Whether it was filed (false: the same box was held, or the mailbox holds newer epochs).
    case mailboxPosted(filed: Bool)
    /// The member asks for its mailbox.
    case mailboxFetch
    /// The member's mailbox, epochs ascending.
    case mailbox([RelayMailboxBox])
    /// The member's mailbox, from a relay that followed a recovery: the recovery-signed statement
    /// it re-pinned its owner with, so that the member can accept boxes the new owner signed
    /// before its ledger names that owner (docs/RELAY-DESIGN.md, "Running a relay").
    case ownerMailbox(statement: RelayOwnerStatement, boxes: [RelayMailboxBox])
    /// A page of the listed members' status, after member key `after` (nil: from the first).
    case statusRequest(after: RelayMemberKey?)
    /// The page and the key it ended at when more follow.
    case statusPage(members: [RelayMemberReport], next: RelayMemberKey?)
    /// The request was refused and stored nothing; the session goes on.
    case refused(code: UInt16, message: String)
    /// The sender gives up; the session ends on both sides.
    case error(code: UInt16, message: String)
    /// The member is done; the relay answers with `bye` too.
    case bye

    /// The lowest relay protocol version this build speaks.
    public static let versionMin: UInt16 = 1
    /// The highest relay protocol version this build speaks.
    public static let versionMax: UInt16 = 1
    /// Most vector entries in a message (``RelayStore/streamsPerMemberMax``).
    public static let vectorEntriesMax = Int(RelayStore.streamsPerMemberMax)
    /// Most envelopes in a page (``RelayStore/pendingCountMax``).
    public static let pageEnvelopesMax = RelayStore.pendingCountMax
    /// Most bytes of envelopes in a page: a page of at most this plus its framing fits a frame.
    public static let pageBytesMax = 3 << 20
    /// Most members in a status page (each with a vector of up to 1,024 entries: about 1.6 MB).
    public static let statusMembersMax = 64
    /// Longest text of `refused` and `error`, in UTF-8 bytes.
    public static let textBytesMax = errorMessageBytesMax

    /// The message type byte.
    public var type: UInt8 {
        switch self {
        case .hello: 1
        case .welcome: 2
        case .install: 3
        case .installed: 4
        case .upload: 5
        case .uploaded: 6
        case .acknowledge: 7
        case .acknowledged: 8
        case .pendingRequest: 9
        case .pendingPage: 10
        case .mailboxPost: 11
        case .mailboxPosted: 12
        case .mailboxFetch: 13
        case .mailbox: 14
        case .statusRequest: 15
        case .statusPage: 16
        case .refused: 17
        case .error: 18
        case .bye: 19
        case .ownerMailbox: 20
        }
    }

    /// A short name for errors.
    public var name: String {
        switch self {
        case .hello: "hello"
        case .welcome: "welcome"
        case .install: "install"
        case .installed: "installed"
        case .upload: "upload"
        case .uploaded: "uploaded"
        case .acknowledge: "acknowledge"
        case .acknowledged: "acknowledged"
        case .pendingRequest: "pendingRequest"
        case .pendingPage: "pendingPage"
        case .mailboxPost: "mailboxPost"
        case .mailboxPosted: "mailboxPosted"
        case .mailboxFetch: "mailboxFetch"
        case .mailbox: "mailbox"
        case .statusRequest: "statusRequest"
        case .statusPage: "statusPage"
        case .refused: "refused"
        case .error: "error"
        case .bye: "bye"
        case .ownerMailbox: "ownerMailbox"
        }
    }

    /// The complete frame.
    public func frame() -> [UInt8] { Frame.encode(type: type, payload: encodePayload()) }
}

/// A box to file in a member's mailbox (``RelayStore/post(box:epoch:to:from:)``).
public struct RelayMailboxPost: Equatable, Sendable {
    /// The member relay key whose mailbox takes it.
    public var recipient: RelayMemberKey
    /// The box's epoch.
    public var epoch: UInt32
    /// The box (``EpochRecord/boxBytes`` bytes).
    public var box: [UInt8]

    /// A post.
    public init(recipient: RelayMemberKey, epoch: UInt32, box: [UInt8]) {
        self.recipient = recipient
        self.epoch = epoch
        self.box = box
    }
}

/// One box of a mailbox.
public struct RelayMailboxBox: Equatable, Sendable {
    /// The box's epoch.
    public var epoch: UInt32
    /// The box (``EpochRecord/boxBytes`` bytes), for the member to open (``EpochRecord/openBox(_:epoch:as:owner:household:)``).
    public var box: [UInt8]

    /// A box.
    public init(epoch: UInt32, box: [UInt8]) {
        self.epoch = epoch
        self.box = box
    }
}

/// What the relay tells a member of one listed member key: opaque to the relay.
public struct RelayMemberReport: Equatable, Sendable {
    /// Its key, quota, charge and last sync time.
    public var status: RelayMemberStatus
    /// Its acknowledged vector.
    public var acknowledged: [RelayStreamTag: UInt64]

    /// A report.
    public init(status: RelayMemberStatus, acknowledged: [RelayStreamTag: UInt64]) {
        self.status = status
        self.acknowledged = acknowledged
    }
}

import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerRelay
import KidLedgerSecurity

/// How the simulated relay behaves (docs/SIMULATOR.md, "Relays"). Every hostile mode may only
/// delay the honest members: the checks hold once it is honest again.
public enum RelayMode: Sendable, Equatable, CustomStringConvertible {
    /// Stores and serves as the protocol says.
    case honest
    /// Answers uploads as stored and stores nothing.
    case drop
    /// Holds every message it sends for seconds.
    case delay
    /// Serves envelopes it served before again, with every page.
    case replay
    /// Serves each page's envelopes in a shuffled order.
    case reorder
    /// Serves this replica empty pages.
    case withhold(Int)
    /// Serves (and stores into) a copy of its store taken when the mode began; the copy is
    /// forgotten when it is honest again.
    case stale

    /// The modes' names in the scenario language (`relay MODE`).
    static let names = ["honest", "drop", "delay", "replay", "reorder", "withhold", "stale"]

    public var description: String {
        switch self {
        case .honest: "honest"
        case .drop: "drop"
        case .delay: "delay"
        case .replay: "replay"
        case .reorder: "reorder"
        case .withhold(let r): "withhold r\(r)"
        case .stale: "stale"
        }
    }

    /// The coverage key of the mode (`relay.MODE`).
    var countKey: String {
        if case .withhold = self { return "relay.withhold" }
        return "relay.\(description)"
    }
}

/// The simulated relay: a ``RelayStore`` on an in-memory store, the pinned owner key, its mode,
/// and its open sessions with members (``RelayLink``). The owner's side of the access list (its
/// number and the keys it last signed) is kept here too: it is the owner laptop's daemon state.
final class SimRelay {
    /// The relay's device key.
    let identity: Identity
    /// Its durable store (a wipe replaces it).
    var memory = MemoryStore()
    /// A copy of ``memory`` served while ``mode`` is stale.
    var staleCopy: MemoryStore?
    var isUp = true
    var mode = RelayMode.honest
    /// The owner key pinned when the relay was added (nil: not added yet).
    var owner: PublicKey?
    /// Envelopes served so far (the last ``servedKept``), for replaying.
    var served: [[UInt8]] = []
    static let servedKept = 16
    var links: [Int: RelayLink] = [:]
    var nextLink = 0
    /// The owner's access list: its number, the member relay keys it names, and the signed list.
    var listNumber: UInt64 = 0
    var listKeys: [[UInt8]] = []
    var signedList: SignedRelayAccessList?
    /// The list number the owner last saw the relay hold (nil: unknown, it installs again).
    var numberSeen: UInt64?
    /// The epoch keys each member opened from its mailbox (the member daemon keeps them).
    var mailboxKeys: [Int: [EpochKey]] = [:]

    init(identity: Identity) {
        self.identity = identity
    }

    /// The store sessions use now.
    var store: RelayStore { RelayStore(store: staleCopy ?? memory) }
}

/// One session between a member's replica and the relay, each end a real session state machine.
final class RelayLink {
    let id: Int
    let node: Int
    /// The replica's incarnation the member session runs on (a restart ends the session).
    let incarnation: UInt64
    var server: RelayServerSession?
    var member: RelayMemberSession?
    /// Whether the member connected with the owner's own key (to install the access list).
    let asOwner: Bool
    /// The latest scheduled delivery towards the relay (0) and the member (1): in order.
    var lastDelivery: [Int64] = [0, 0]

    init(id: Int, node: Int, incarnation: UInt64, server: RelayServerSession, member: RelayMemberSession, asOwner: Bool) {
        self.id = id
        self.node = node
        self.incarnation = incarnation
        self.server = server
        self.member = member
        self.asOwner = asOwner
    }
}

import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerSecurity

/// What a relay session did (``RelayServerSession``).
public struct RelayServerSummary: Equatable, Sendable {
    /// Requests answered (refusals included).
    public var requests = 0
    /// Requests refused (nothing stored by them).
    public var refusals = 0
    /// Envelopes stored, and their bytes.
    public var envelopesStored = 0, bytesStored = 0
    /// Uploads the store held already.
    public var envelopesAlreadyHeld = 0
    /// Envelopes served in pages, and their bytes.
    public var envelopesServed = 0, bytesServed = 0
    /// The access list number installed in this session, if one was.
    public var installed: UInt64?
    /// What the collection after the session (and after an install) deleted and freed.
    public var collected = 0, freedBytes: UInt64 = 0
    /// Why the collection stopped early, if it did (a damaged store, or its bound).
    public var collectionProblem: String?
    /// Bytes received and sent.
    public var bytesReceived = 0, bytesSent = 0

    /// An empty summary.
    public init() {}
}

/// The relay's side of one session with one peer (docs/RELAY-DESIGN.md, "Sessions"): a pure
/// state machine over the ``RelayStore``. Bytes and the time go in; bytes to send and the outcome
/// come out as ``RelaySessionAction``s. No I/O, no clock, no threads: the TCP daemon and the
/// simulator drive the same code.
///
/// The session runs inside a `SecureChannel`, which authenticated the peer's Ed25519 key (a
/// member's relay key): that key is `peer`. The relay serves only keys on the access list it
/// holds; the pinned owner key may also connect to install a list. Every request is one store
/// call (one transaction): a refused request stores nothing and is answered with `refused`; a
/// malformed or unexpected message ends the session with `error`. When the session ends, however
/// it ends, the store is collected (at most ``collectCallsMax`` calls).
public final class RelayServerSession {
    /// Where the session is.
    public enum State: Equatable, Sendable {
        /// Waiting for the peer's hello.
        case awaitingHello
        /// Answering requests.
        case serving
        /// Ended with `bye`.
        case finished
        /// Failed.
        case failed
    }

    /// Most requests one session answers.
    public static let requestsMax = 1 << 20
    /// Most ``RelayStore/collect(visitingAtMost:)`` calls after a session or an install.
    public static let collectCallsMax = 64

    /// The relay's store.
    public let store: RelayStore
    /// The relay's own key (what the owner signs access lists for).
    public let relay: PublicKey
    /// The pinned owner key.
    public let owner: PublicKey
    /// The authenticated peer.
    public let peer: PublicKey
    /// The recovery-signed statement the relay re-pinned its owner with, handed to members with
    /// their mailbox (nil: the relay never followed a recovery; the mailbox goes alone).
    public let ownerStatement: RelayOwnerStatement?
    /// The current state.
    public private(set) var state = State.awaitingHello
    /// Counters so far.
    public private(set) var summary = RelayServerSummary()
    /// Why the session failed; nil while it has not.
    public private(set) var failure: RelaySessionError?

    private let member: RelayMemberKey
    private var decoder = FrameDecoder()
    private var actions: [RelaySessionAction<RelayServerSummary>] = []

    /// A session with `peer` over `store`, for the relay whose key is `relay`, pinned to `owner`
    /// (by `ownerStatement`, when a recovery re-pinned it).
    public init(store: RelayStore, relay: PublicKey, owner: PublicKey, peer: PublicKey, ownerStatement: RelayOwnerStatement? = nil) {
        self.store = store
        self.relay = relay
        self.owner = owner
        self.peer = peer
        self.ownerStatement = ownerStatement
        // 32 bytes, as every public key.
        member = RelayMemberKey(bytes: peer.bytes)!
    }

    /// Feeds bytes from the peer (any chunking), received at `now` (milliseconds, the driver's
    /// clock: the time an acknowledgement records), and returns what to do.
    public func receive(_ bytes: [UInt8], atMilliseconds now: Int64) -> [RelaySessionAction<RelayServerSummary>] {
        guard state == .awaitingHello || state == .serving else { return [] }
        summary.bytesReceived += bytes.count
        decoder.push(bytes)
        while state == .awaitingHello || state == .serving {
            do throws(RelaySessionError) {
                let limit = state == .awaitingHello ? helloFrameBytesMax : frameBytesMax
                guard let message = try RelayMessage.next(from: &decoder, limit: limit) else { break }
                try handle(message, now: now)
            } catch {
                fail(error)
            }
        }
        return takeActions()
    }

    /// Tells the session the connection is gone; the store is collected.
    public func connectionClosed() -> [RelaySessionAction<RelayServerSummary>] {
        guard state == .awaitingHello || state == .serving else { return [] }
        state = .failed
        failure = .connectionClosed
        collect()
        return [.failed(.connectionClosed)]
    }

    // MARK: Requests

    // long-function: the server's table: one case per request.
    private func handle(_ message: RelayMessage, now: Int64) throws(RelaySessionError) {
        if case .error(let code, let text) = message { throw .peer(code: code, message: text) }
        guard state == .serving else {
            guard case .hello(let lo, let hi) = message else { throw .unexpectedMessage("\(message.name) before hello") }
            guard lo <= RelayMessage.versionMax, hi >= RelayMessage.versionMin else { throw .versionMismatch(peerMin: lo, peerMax: hi) }
            let list = try stored { try store.accessList() }
            let listed = list?.quotas[member] != nil
            guard listed || peer == owner else { throw .store(.notOnAccessList) }
            var acknowledged: [RelayStreamTag: UInt64] = [:], held: [RelayStreamTag: UInt64] = [:]
            if listed {
                acknowledged = try stored { try store.vector(of: member) }
                held = try stored { try store.held(including: acknowledged.keys) }
            }
            state = .serving
            send(.welcome(version: min(hi, RelayMessage.versionMax), accessList: list?.number, acknowledged: acknowledged, held: held))
            return
        }
        summary.requests += 1
        guard summary.requests <= Self.requestsMax else { throw .limitReached("\(Self.requestsMax) requests in one session") }
        do throws(RelaySessionError) {
            switch message {
            case .install(let signed):
                let list = try signed.verified(relay: relay, owner: owner)
                guard try stored({ try store.install(list) }) else {
                    throw .staleAccessList(held: try stored { try store.accessList()?.number } ?? 0, offered: list.number)
                }
                summary.installed = list.number
                send(.installed(number: list.number))
                collect()
            case .upload(let envelope):
                let stored = try stored { try store.upload(envelope, from: member) } == .stored
                if stored {
                    summary.envelopesStored += 1
                    summary.bytesStored += envelope.count
                } else {
                    summary.envelopesAlreadyHeld += 1
                }
                send(.uploaded(stored: stored))
            case .acknowledge(let vector):
                try stored { try store.acknowledge(vector, from: member, atMilliseconds: now) }
                send(.acknowledged)
            case .pendingRequest(let after, let countMax, let bytesMax):
                let page = try stored {
                    try store.pending(for: member, after: after, countMax: Int(countMax), bytesMax: Int(bytesMax))
                }
                summary.envelopesServed += page.envelopes.count
                summary.bytesServed += page.envelopes.reduce(0) { $0 + $1.count }
                send(.pendingPage(envelopes: page.envelopes, next: page.next))
            case .mailboxPost(let post):
                send(.mailboxPosted(filed: try stored { try store.post(box: post.box, epoch: post.epoch, to: post.recipient, from: member) }))
            case .mailboxFetch:
                guard try stored({ try store.accessList() })?.quotas[member] != nil else { throw .store(.notOnAccessList) }
                let boxes = try stored { try store.mailbox(of: member) }.map { RelayMailboxBox(epoch: $0.epoch, box: $0.box) }
                send(ownerStatement.map { .ownerMailbox(statement: $0, boxes: boxes) } ?? .mailbox(boxes))
            case .statusRequest(let after):
                send(try status(after: after))
            case .bye:
                send(.bye)
                state = .finished
                collect()
                actions.append(.finished(summary))
            default:
                throw .unexpectedMessage("\(message.name) from a member")
            }
        } catch {
            switch error {
            case .store(.damaged), .storage, .malformed, .unexpectedMessage, .limitReached: throw error
            default:
                summary.refusals += 1
                send(.refused(code: error.code, message: error.description))
            }
        }
    }

    /// One page of the listed members' status after `after`: ≤ ``RelayMessage/statusMembersMax``.
    private func status(after: RelayMemberKey?) throws(RelaySessionError) -> RelayMessage {
        let all = try stored { try store.members() }
        guard all.contains(where: { $0.key == member }) else { throw .store(.notOnAccessList) }
        let rest = all.filter { status in after.map { $0 < status.key } ?? true }
        let page = rest.prefix(RelayMessage.statusMembersMax)
        var reports: [RelayMemberReport] = []
        for status in page {
            reports.append(RelayMemberReport(status: status, acknowledged: try stored { try store.vector(of: status.key) }))
        }
        return .statusPage(members: reports, next: rest.count > page.count ? page.last?.key : nil)
    }

    /// Collects until a sweep reaches the store's end, at most ``collectCallsMax`` calls.
    private func collect() {
        for _ in 0..<Self.collectCallsMax {
            do {
                let done = try store.collect()
                summary.collected += done.deleted
                summary.freedBytes += done.freedBytes
                if done.reachedEnd { return }
            } catch {
                summary.collectionProblem = "\(error)"
                return
            }
        }
        summary.collectionProblem = "the sweep did not reach the store's end in \(Self.collectCallsMax) calls; the next session goes on"
    }

    // MARK: Helpers

    private func stored<T>(_ body: () throws -> T) throws(RelaySessionError) -> T {
        do { return try body() } catch let error as RelayStoreError { throw .store(error) } catch {
            throw .storage("\(error)")
        }
    }

    private func send(_ message: RelayMessage) {
        let frame = message.frame()
        summary.bytesSent += frame.count
        actions.append(.send(frame))
    }

    private func fail(_ error: RelaySessionError) {
        guard state == .awaitingHello || state == .serving else { return }
        if case .peer = error {} else { send(.error(code: error.code, message: error.description)) }
        failure = error
        state = .failed
        collect()
        actions.append(.failed(error))
    }

    private func takeActions() -> [RelaySessionAction<RelayServerSummary>] {
        defer { actions = [] }
        return actions
    }
}

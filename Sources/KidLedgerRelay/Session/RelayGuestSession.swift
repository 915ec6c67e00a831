import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerSecurity

/// What a joiner's guest session did (``RelayGuestSession``).
public struct RelayGuestSummary: Equatable, Sendable {
    /// Whether the request is filed (now, or before: the relay holds a box in its slot).
    public var requestFiled = false
    /// The relay's refusal of the request, when it refused it for another reason.
    public var requestRefused: String?
    /// The guest key's mailbox (the owner's box for the joiner, once admitted).
    public var mailbox: [RelayMailboxBox] = []
    /// Every envelope pending for the guest key, in store order (when the session downloads).
    public var envelopes: [[UInt8]] = []
    /// Whether the download stopped at the session's bound before the store's end.
    public var truncated = false

    /// An empty summary.
    public init() {}
}

/// A joiner's side of a short relay session under its guest key (docs/RELAY-DESIGN.md, "Joining
/// through the relay"): a pure state machine, as ``RelayMemberSession``. hello; post the join
/// request (when given); fetch the mailbox; page every pending envelope (when asked, to learn the
/// epoch keys from the records they carry before the member session applies them); bye.
public final class RelayGuestSession {
    /// Most pages one download reads (each at most ``RelayMessage/pageBytesMax``).
    public static let pagesMax = 256

    /// The current state.
    public private(set) var state = RelayMemberSession.State.created
    /// What it did so far.
    public private(set) var summary = RelayGuestSummary()

    private let request: RelayMailboxPost?
    private let download: Bool
    private var decoder = FrameDecoder()
    private var actions: [RelaySessionAction<RelayGuestSummary>] = []
    private var pages = 0
    private enum Phase { case post, fetch, download, bye }
    private var phase = Phase.post

    /// A session that posts `request` (nil: none) and, when `download`, reads every pending envelope.
    public init(request: RelayMailboxPost?, download: Bool) {
        self.request = request
        self.download = download
    }

    /// Sends hello.
    public func start() -> [RelaySessionAction<RelayGuestSummary>] {
        guard state == .created else { return [] }
        state = .awaitingWelcome
        send(.hello(versionMin: RelayMessage.versionMin, versionMax: RelayMessage.versionMax))
        return takeActions()
    }

    /// Feeds bytes from the relay and returns what to do.
    public func receive(_ bytes: [UInt8]) -> [RelaySessionAction<RelayGuestSummary>] {
        guard state == .awaitingWelcome || state == .working else { return [] }
        decoder.push(bytes)
        while state == .awaitingWelcome || state == .working {
            do throws(RelaySessionError) {
                guard let message = try RelayMessage.next(from: &decoder) else { break }
                try handle(message)
            } catch {
                fail(error)
            }
        }
        return takeActions()
    }

    /// The connection is gone.
    public func connectionClosed() -> [RelaySessionAction<RelayGuestSummary>] {
        guard state == .awaitingWelcome || state == .working else { return [] }
        state = .failed
        return [.failed(.connectionClosed)]
    }

    private func handle(_ message: RelayMessage) throws(RelaySessionError) {
        if case .error(let code, let text) = message { throw .peer(code: code, message: text) }
        switch (state, phase, message) {
        case (.awaitingWelcome, _, .welcome):
            state = .working
            if let request { send(.mailboxPost(request)) } else { phase = .fetch; send(.mailboxFetch) }
        case (.working, .post, .mailboxPosted):
            summary.requestFiled = true
            phase = .fetch
            send(.mailboxFetch)
        case (.working, .post, .refused(let code, let text)):
            // Slot taken: this invitation's request is filed already (an earlier try).
            if code == RelaySessionError.store(.mailboxSlotTaken(epoch: 0)).code { summary.requestFiled = true } else { summary.requestRefused = text }
            phase = .fetch
            send(.mailboxFetch)
        case (.working, .fetch, .mailbox(let boxes)), (.working, .fetch, .ownerMailbox(_, let boxes)):
            summary.mailbox = boxes
            if download { phase = .download; send(page(after: nil)) } else { phase = .bye; send(.bye) }
        case (.working, .fetch, .refused):
            phase = .bye
            send(.bye)
        case (.working, .download, .pendingPage(let envelopes, let next)):
            summary.envelopes += envelopes
            pages += 1
            if let next, pages < Self.pagesMax { send(page(after: next)) } else {
                summary.truncated = next != nil
                phase = .bye
                send(.bye)
            }
        case (.working, .download, .refused(_, let text)):
            throw .refusedByPeer(code: 0, message: text)
        case (.working, .bye, .bye):
            state = .finished
            actions.append(.finished(summary))
        default:
            throw .unexpectedMessage("\(message.name) in a guest session")
        }
    }

    private func page(after: RelayEnvelopeHeader?) -> RelayMessage {
        .pendingRequest(after: after, countMax: UInt16(RelayMessage.pageEnvelopesMax), bytesMax: UInt32(RelayMessage.pageBytesMax))
    }

    private func send(_ message: RelayMessage) { actions.append(.send(message.frame())) }

    private func fail(_ error: RelaySessionError) {
        guard state == .awaitingWelcome || state == .working else { return }
        if case .peer = error {} else { send(.error(code: error.code, message: error.description)) }
        state = .failed
        actions.append(.failed(error))
    }

    private func takeActions() -> [RelaySessionAction<RelayGuestSummary>] {
        defer { actions = [] }
        return actions
    }
}

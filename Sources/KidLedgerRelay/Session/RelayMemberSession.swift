import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerReplica
import KidLedgerSecurity

/// A member's side of one relay session (docs/RELAY-DESIGN.md, "Sessions"): a pure state machine
/// over the member's ``Replica``. Bytes go in; bytes to send and the outcome come out as
/// ``RelaySessionAction``s. No I/O, no clock, no threads; envelope nonces come from the generator
/// passed to ``start(using:)`` and ``receive(_:using:)``.
///
/// One request at a time (uploads: up to ``RelayMemberLimits/uploadsInFlightMax``), in this
/// order: hello; install the setup's access list if the relay's is older; post the setup's
/// boxes; fetch the mailbox; upload, per origin, the runs of changes above the relay's held
/// vector, sealed under the setup's epoch; page the pending envelopes, open, check and apply each
/// as a peer's batch; acknowledge what the replica now holds (again after each pass); read the
/// members' status; bye.
public final class RelayMemberSession {
    /// Where the session is.
    public enum State: Equatable, Sendable {
        /// Before ``RelayMemberSession/start(using:)``.
        case created
        /// Waiting for the relay's welcome.
        case awaitingWelcome
        /// Exchanging requests and answers.
        case working
        /// Ended with `bye`.
        case finished
        /// Failed.
        case failed
    }

    /// What the session is doing between welcome and bye.
    enum Phase: Equatable {
        case install, post(Int), fetchMailbox, upload, correct, download(after: RelayEnvelopeHeader?), acknowledge
        case status(after: RelayMemberKey?), bye
    }

    /// Most status pages read (1,000 keys at most, 64 a page).
    static let statusPagesMax = 16

    /// The member's replica.
    public let replica: Replica
    /// The ledger's inputs.
    public let setup: RelayMemberSetup
    /// The current state.
    public private(set) var state = State.created
    /// Counters so far.
    public internal(set) var summary = RelayMemberSummary()
    /// Why the session failed; nil while it has not.
    public private(set) var failure: RelaySessionError?

    var phase = Phase.install
    private var decoder = FrameDecoder()
    private var actions: [RelaySessionAction<RelayMemberSummary>] = []
    /// The relay's vectors at welcome.
    var relayAcknowledged: [RelayStreamTag: UInt64] = [:]
    var held: [RelayStreamTag: UInt64] = [:]
    /// Stream tags of the origins seen, both ways.
    var tags: [ReplicaID: RelayStreamTag] = [:]
    var origins: [RelayStreamTag: ReplicaID] = [:]
    /// Uploads: what the relay holds or this session queued, per origin; changes read and not yet sealed.
    var uploadCursor: VersionVector = [:]
    var uploadQueue: ArraySlice<EncodedChange> = []
    var uploadsExhausted = false
    var uploadsInFlight = 0
    var uploadsSent = 0
    /// The stream and last sequence of each upload in flight, in the order sent (answers come in order).
    var uploadRanges: [(stream: RelayStreamTag, last: UInt64)] = []
    /// Downloads: pages read, this pass's progress, recomputations spent.
    var pagesRead = 0
    var passApplied = 0, passDeferred = 0
    var recomputations = 0
    var statusPages = 0

    /// A session of `replica` with the relay `setup` names.
    public init(replica: Replica, setup: RelayMemberSetup) {
        self.replica = replica
        self.setup = setup
    }

    /// Starts the session: sends hello.
    public func start(using random: inout some RandomNumberGenerator) -> [RelaySessionAction<RelayMemberSummary>] {
        guard state == .created else { return [] }
        guard setup.keyring[setup.sealEpoch] != nil else {
            state = .failed
            failure = .storage("no key of epoch \(setup.sealEpoch) to seal under")
            return [.failed(failure!)]
        }
        send(.hello(versionMin: RelayMessage.versionMin, versionMax: RelayMessage.versionMax))
        state = .awaitingWelcome
        return takeActions()
    }

    /// Feeds bytes from the relay (any chunking) and returns what to do.
    public func receive(_ bytes: [UInt8], using random: inout some RandomNumberGenerator) -> [RelaySessionAction<RelayMemberSummary>] {
        guard state == .awaitingWelcome || state == .working else { return [] }
        summary.bytesReceived += bytes.count
        decoder.push(bytes)
        while state == .awaitingWelcome || state == .working {
            do throws(RelaySessionError) {
                guard let message = try RelayMessage.next(from: &decoder) else { break }
                try handle(message, using: &random)
            } catch {
                fail(error)
            }
        }
        return takeActions()
    }

    /// Tells the session the connection is gone. What was applied stays applied.
    public func connectionClosed() -> [RelaySessionAction<RelayMemberSummary>] {
        guard state == .awaitingWelcome || state == .working else { return [] }
        state = .failed
        failure = .connectionClosed
        return [.failed(.connectionClosed)]
    }

    /// `vector` (a status report's, of stream tags) as a version vector of the origins this
    /// replica knows; streams of origins it does not know are left out.
    public func versionVector(of vector: [RelayStreamTag: UInt64]) throws -> VersionVector {
        for origin in try replica.versionVector().keys { _ = tag(of: origin) }
        var mapped: VersionVector = [:]
        for (stream, sequence) in vector { if let origin = origins[stream] { mapped[origin] = sequence } }
        return mapped
    }

    // MARK: Answers

    // long-function: the session's table: one case per (phase, answer) pair.
    private func handle(_ message: RelayMessage, using random: inout some RandomNumberGenerator) throws(RelaySessionError) {
        if case .error(let code, let text) = message { throw .peer(code: code, message: text) }
        guard state == .working else {
            guard case .welcome(let version, let list, let acknowledged, let held) = message else {
                throw .unexpectedMessage("\(message.name) before welcome")
            }
            guard (RelayMessage.versionMin...RelayMessage.versionMax).contains(version) else {
                throw .versionMismatch(peerMin: version, peerMax: version)
            }
            summary.relayAccessList = list
            relayAcknowledged = acknowledged
            self.held = held
            summary.relayHeldAtWelcome = held
            summary.relayHeld = held
            try prepareUploads()
            state = .working
            try advance(using: &random)
            return
        }
        if case .refused(let code, let text) = message {
            try refused(code: code, text)
        } else {
            switch (phase, message) {
            case (.install, .installed(let number)):
                summary.installedAccessList = number
                phase = .post(0)
            case (.post(let i), .mailboxPosted(let filed)):
                if filed { summary.boxesPosted += 1 }
                phase = .post(i + 1)
            case (.fetchMailbox, .mailbox(let boxes)):
                summary.mailbox = boxes
                phase = .upload
            case (.fetchMailbox, .ownerMailbox(let statement, let boxes)):
                summary.mailbox = boxes
                summary.ownerStatement = statement
                phase = .upload
            case (.upload, .uploaded(let stored)):
                try answered(upload: stored)
            case (.correct, .acknowledged):
                relayAcknowledged.merge(try correction() ?? [:]) { $1 }
                phase = .download(after: nil)
            case (.download, .pendingPage(let envelopes, let next)):
                try apply(envelopes)
                pagesRead += 1
                phase = next != nil && pagesRead < setup.limits.pagesPerSessionMax ? .download(after: next) : .acknowledge
            case (.acknowledge, .acknowledged):
                // Another pass when this one applied changes that others waited for.
                let again = passApplied > 0 && passDeferred > 0 && summary.passes < setup.limits.passesMax
                    && pagesRead < setup.limits.pagesPerSessionMax
                phase = again ? .download(after: nil) : .status(after: nil)
            case (.status, .statusPage(let members, let next)):
                summary.members += members
                statusPages += 1
                phase = next != nil && statusPages < Self.statusPagesMax ? .status(after: next) : .bye
            case (.bye, .bye):
                state = .finished
                actions.append(.finished(summary))
                return
            default:
                throw .unexpectedMessage("\(message.name) answering \(phase)")
            }
        }
        try advance(using: &random)
    }

    /// A refusal of the request in flight: noted, and the session goes on with the next step.
    private func refused(code: UInt16, _ text: String) throws(RelaySessionError) {
        summary.requestsRefused += 1
        summary.refuse("relay \(setup.relay.fingerprint) refused: \(text)")
        switch phase {
        case .install: phase = .post(0)
        case .post(let i): phase = .post(i + 1)
        case .fetchMailbox: phase = .upload
        case .upload:
            // Over quota, or the envelope was refused: no more uploads this session.
            guard uploadsInFlight > 0 else { throw .unexpectedMessage("a refusal with no upload in flight") }
            if code == 11 { summary.uploadsOverQuota = true }  // RelayStoreError.overQuota's wire code
            if !uploadRanges.isEmpty { uploadRanges.removeFirst() }
            uploadsExhausted = true
            uploadQueue = []
            uploadsInFlight -= 1
        case .correct, .download: phase = .acknowledge
        case .acknowledge: phase = .status(after: nil)
        case .status: phase = .bye
        case .bye: throw .refusedByPeer(code: code, message: text)
        }
    }

    /// Sends the next request(s) of the phase, moving on through phases with nothing to send.
    // long-function: one case per phase of the session's fixed order.
    private func advance(using random: inout some RandomNumberGenerator) throws(RelaySessionError) {
        // Each pass sends a request or moves to a later phase (the download phases go back only
        // through an answer), so this ends within the number of phases.
        for _ in 0..<16 {
            switch phase {
            case .install:
                if let list = setup.accessList, let number = list.number, number > summary.relayAccessList ?? 0 {
                    send(.install(list))
                    return
                }
                phase = .post(0)
            case .post(let i):
                guard i < setup.posts.count else { phase = .fetchMailbox; continue }
                send(.mailboxPost(setup.posts[i]))
                return
            case .fetchMailbox:
                send(.mailboxFetch)
                return
            case .upload:
                while uploadsInFlight < setup.limits.uploadsInFlightMax, let envelope = try nextEnvelope(using: &random) {
                    if let header = try? RelayEnvelope.header(of: envelope) { uploadRanges.append((header.stream, header.lastSequence)) }
                    send(.upload(envelope))
                    uploadsInFlight += 1
                    uploadsSent += 1
                }
                guard uploadsInFlight == 0 else { return }
                phase = try correction() != nil ? .correct : .download(after: nil)
            case .correct:
                send(.acknowledge(try correction() ?? [:]))
                return
            case .download(let after):
                if after == nil {
                    summary.passes += 1
                    passApplied = 0
                    passDeferred = 0
                }
                send(.pendingRequest(after: after, countMax: UInt16(RelayMessage.pageEnvelopesMax), bytesMax: UInt32(setup.limits.pageBytes)))
                return
            case .acknowledge:
                let vector = try localVector()
                summary.acknowledged = vector
                relayAcknowledged = vector
                send(.acknowledge(vector))
                return
            case .status(let after):
                send(.statusRequest(after: after))
                return
            case .bye:
                send(.bye)
                return
            }
        }
        preconditionFailure("the member session's phases did not settle")
    }

    // MARK: Helpers

    /// The stream tag of `origin` (computed once per origin).
    func tag(of origin: ReplicaID) -> RelayStreamTag {
        if let known = tags[origin] { return known }
        let stream = setup.streamKey.tag(of: origin)
        tags[origin] = stream
        origins[stream] = origin
        return stream
    }

    /// The replica's vector by stream tag (at most ``RelayMessage/vectorEntriesMax`` origins:
    /// the lowest ones, when it holds more).
    func localVector() throws(RelaySessionError) -> [RelayStreamTag: UInt64] {
        let vector = try storage { try replica.versionVector() }
        var mapped: [RelayStreamTag: UInt64] = [:]
        for (origin, sequence) in vector.sorted(by: { $0.key < $1.key }).prefix(RelayMessage.vectorEntriesMax) where sequence > 0 {
            mapped[tag(of: origin)] = sequence
        }
        return mapped
    }

    /// What to acknowledge before paging when the relay's vector for this member says more than
    /// its replica holds (restored from an older copy, or another laptop's files): the streams it
    /// names above the replica's, set to what the replica holds (0: forget). Nil when none.
    func correction() throws(RelaySessionError) -> [RelayStreamTag: UInt64]? {
        let mine = try localVector()
        var fixes: [RelayStreamTag: UInt64] = [:]
        for (stream, sequence) in relayAcknowledged where sequence > mine[stream] ?? 0 { fixes[stream] = mine[stream] ?? 0 }
        return fixes.isEmpty ? nil : fixes
    }

    func storage<T>(_ body: () throws -> T) throws(RelaySessionError) -> T {
        do { return try body() } catch { throw .storage("\(error)") }
    }

    private func send(_ message: RelayMessage) {
        let frame = message.frame()
        summary.bytesSent += frame.count
        actions.append(.send(frame))
    }

    private func fail(_ error: RelaySessionError) {
        guard state == .awaitingWelcome || state == .working else { return }
        if case .peer = error {} else { send(.error(code: error.code, message: error.description)) }
        failure = error
        state = .failed
        actions.append(.failed(error))
    }

    private func takeActions() -> [RelaySessionAction<RelayMemberSummary>] {
        defer { actions = [] }
        return actions
    }
}

import KidLedgerDomain
import KidLedgerReplica

/// One sync session with one peer: a pure state machine. Bytes and events go in; bytes to send
/// and outcomes come out as ``SessionAction``s. No sockets, clocks, randomness or threads: TCP and
/// the simulator drive the same code. See docs/PROTOCOL.md for the flow and the state diagram.
public final class SyncSession {
    /// Which side of the connection this is.
    public enum Role: Equatable, Sendable {
        /// Opened the connection; sends hello.
        case initiator
        /// Accepted the connection; answers hello.
        case responder
    }

    /// Where the session is.
    public enum State: Equatable, Sendable {
        /// Before ``SyncSession/start()``.
        case created
        /// Responder: waiting for hello.
        case awaitingHello
        /// Initiator: waiting for welcome.
        case awaitingWelcome
        /// Waiting for the peer's version vector.
        case awaitingVector
        /// Initiator: sent its vector; waiting for the responder's first batch or its re-sent vector.
        case awaitingPeerStart
        /// Exchanging batches, acks and done.
        case transferring
        /// Completed.
        case finished
        /// Failed; nothing more happens.
        case failed

        /// The state machine's transitions: start, hello or welcome, the vectors, the first batch,
        /// done; any state but the two ends may fail, and the ends are final.
        static func isLegal(from old: State, to new: State) -> Bool {
            switch (old, new) {
            case (.created, .awaitingWelcome), (.created, .awaitingHello),
                 (.awaitingHello, .awaitingVector), (.awaitingWelcome, .awaitingVector),
                 (.awaitingVector, .awaitingPeerStart), (.awaitingVector, .transferring),
                 (.awaitingPeerStart, .transferring), (.transferring, .finished):
                true
            case (.finished, _), (.failed, _): false
            case (_, .failed): true
            default: false
            }
        }
    }

    /// This side's role.
    public let role: Role
    /// The local replica.
    public let replica: Replica
    /// The household this session syncs; a peer of another household is refused.
    public let household: RecordID
    /// Batch and flow-control bounds.
    public let limits: SessionLimits
    // Not `Sendable`: a session stays in the isolation domain that made it (the compiler checks
    // that), and Swift's run-time exclusivity checks guard its state.
    /// The current state. Every change of it is one of ``State/isLegal(from:to:)``'s transitions.
    public private(set) var state: State = .created {
        didSet { assert(State.isLegal(from: oldValue, to: state), "session state \(oldValue) -> \(state)") }
    }
    /// Counters so far (final in ``SessionAction/finished(_:)``).
    public private(set) var summary = SessionSummary()

    private var decoder = FrameDecoder()
    private var peerHas: VersionVector = [:]
    private var peerKnown: VersionVector = [:]
    private var queued: ArraySlice<EncodedChange> = []
    private var inFlight = 0
    private var sentLast = false
    private var receivedLast = false
    private var doneSent = false
    private var doneReceived = false
    private var checksReceived = false
    /// This side's per-child checks, taken once its exchange completed (nil before).
    private var myChecks: [ChildCheck]?
    /// The `checksDigest` message of ``myChecks`` (computed once, sent and compared).
    private var myDigest: Message?
    /// The peer's checks digest, once received.
    private var peerDigest: Message?
    /// Whether the digests differed, so both sides send their full checks before done.
    private var checksDiffer = false
    /// The pages of a paged message received so far (``Message/part(_:)``), joined.
    private var pages: Message?
    private var actions: [SessionAction] = []

    /// Initiator: the invitation secret sent in hello when joining (empty otherwise).
    public let joinToken: [UInt8]
    /// Initiator: the TCP port this device's daemon accepts peers on, sent in hello (0: none).
    public let listenPort: UInt16
    /// Responder: decides whether to admit the peer (nil admits every peer of the household).
    private let admit: (@Sendable (Admission) -> ProtocolError?)?
    /// The protocol versions this side speaks: ``protocolVersionMin`` to ``protocolVersionMax``
    /// unless narrowed before ``start()`` (docs/PROTOCOL.md, "Versions").
    public var versions: ClosedRange<UInt16> = protocolVersionMin...protocolVersionMax
    /// This side's kidledger version, named in the refusal a peer without a common version gets
    /// (``VersionRefusal``).
    public var product = KidLedgerVersion.current
    /// Why the session failed; nil while it has not.
    public private(set) var failure: ProtocolError?
    /// The protocol version both sides speak, once agreed (`welcome`).
    public private(set) var negotiatedVersion: UInt16?
    /// For each origin whose changes the peer can't read at ``negotiatedVersion``: the first
    /// sequence held back (``RecordVersions/readablePart(of:by:)``).
    private var withheld: [ReplicaID: UInt64] = [:]

    /// Creates a session; nothing happens until ``start()``.
    ///
    /// - Parameters:
    ///   - joinToken: initiator only; the invitation secret when joining a household.
    ///   - listenPort: initiator only; where this device's daemon listens (0: no daemon).
    ///   - admit: responder only; returns an error to refuse the peer described by its hello.
    public init(role: Role, replica: Replica, household: RecordID, limits: SessionLimits = SessionLimits(),
                joinToken: [UInt8] = [], listenPort: UInt16 = 0, admit: (@Sendable (Admission) -> ProtocolError?)? = nil) {
        self.role = role
        self.replica = replica
        self.household = household
        self.limits = limits
        self.joinToken = joinToken
        self.listenPort = listenPort
        self.admit = admit
    }

    /// Starts the session: the initiator sends hello; the responder waits for it.
    public func start() -> [SessionAction] {
        guard state == .created else { return [] }
        precondition(limits.changesPerBatch >= 1, "a batch must hold a change")
        precondition(limits.changesPerBatch <= changesPerBatchMax, "batches above the protocol's limit")
        precondition(limits.batchesInFlightMax >= 1, "the window must hold a batch")
        precondition(limits.frameBytes <= frameBytesMax, "frames above the protocol's limit")
        switch role {
        case .initiator:
            send(.hello(protocolVersionMin: versions.lowerBound, protocolVersionMax: versions.upperBound,
                        replica: replica.replicaID, household: household, joinToken: joinToken, listenPort: listenPort))
            state = .awaitingWelcome
        case .responder:
            state = .awaitingHello
        }
        return takeActions()
    }

    /// Feeds bytes received from the peer (any chunking) and returns what to do.
    public func receive(_ bytes: [UInt8]) -> [SessionAction] {
        guard state != .finished && state != .failed else { return [] }
        summary.bytesReceived += bytes.count
        decoder.push(bytes)
        while state != .finished && state != .failed {
            do throws(ProtocolError) {
                // Until the peer's hello admits it, only a hello-sized frame is buffered.
                guard let frame = try decoder.next(limit: state == .awaitingHello ? helloFrameBytesMax : frameBytesMax) else { break }
                let message = try Message.decode(type: frame.type, payload: frame.payload)
                guard let whole = try joined(message) else { continue }
                try handle(whole)
            } catch {
                fail(error)
            }
        }
        return takeActions()
    }

    /// Tells the session the connection is gone. Batches applied so far stay applied.
    public func connectionClosed() -> [SessionAction] {
        guard state != .finished && state != .failed else { return [] }
        state = .failed
        return [.failed(.connectionClosed)]
    }

    // MARK: Message handling

    // long-function: the state machine's table: one case per (state, message) pair.
    private func handle(_ message: Message) throws(ProtocolError) {
        switch (state, message) {
        case (_, .error(let code, let text)):
            throw .peer(code: code, message: text)
        case (.awaitingHello, .hello(let lo, let hi, let peer, let peerHousehold, let token, let listenPort)):
            guard lo <= versions.upperBound && hi >= versions.lowerBound else { throw .versionMismatch(peerMin: lo, peerMax: hi) }
            guard peerHousehold == household else { throw .otherHousehold }
            guard peer != replica.replicaID else { throw .sameReplica }
            if let admit, let refusal = admit(Admission(replica: peer, household: peerHousehold, joinToken: token, listenPort: listenPort)) {
                throw refusal
            }
            summary.peer = peer
            // The highest version both speak.
            agree(on: min(hi, versions.upperBound))
            send(.welcome(protocolVersion: min(hi, versions.upperBound), replica: replica.replicaID))
            send(.vector(try localSummary(forked: [])))
            state = .awaitingVector
        case (.awaitingWelcome, .welcome(let version, let peer)):
            guard versions.contains(version) else {
                throw .versionMismatch(peerMin: version, peerMax: version)
            }
            guard peer != replica.replicaID else { throw .sameReplica }
            summary.peer = peer
            agree(on: version)
            state = .awaitingVector
        case (.awaitingVector, .vector(let peer)):
            let (forks, mine) = try examine(peer)
            setPeerVector(peer.vector, forked: forks.union(peer.forked), mine: mine)
            if role == .initiator {
                send(.vector(try localSummary(forked: forks, vector: mine)))
                state = .awaitingPeerStart
            } else {
                // Announce forks before the first batch, so the initiator sends every version.
                if !forks.isEmpty { send(.forked(forks.sorted())) }
                state = .transferring
                try pump()
            }
        case (.awaitingPeerStart, .forked(let origins)):
            for origin in origins { peerHas[origin] = 0 }
            queued = []
        case (.awaitingPeerStart, .changes(let changes, let isLast, let heads)):
            state = .transferring
            try pump()
            try receiveBatch(changes, heads: heads, isLast: isLast)
        case (.transferring, .changes(let changes, let isLast, let heads)):
            guard !receivedLast else { throw .unexpectedMessage("changes after the last batch") }
            try receiveBatch(changes, heads: heads, isLast: isLast)
        case (.transferring, .ack(let peerVector)):
            guard inFlight > 0 else { throw .unexpectedMessage("ack with no batch in flight") }
            inFlight -= 1
            precondition(inFlight >= 0, "more acks than batches sent")
            peerKnown = peerVector
            try pump()
            try finishIfDone()
        case (.transferring, .checksDigest):
            guard peerDigest == nil else { throw .unexpectedMessage("a second checks digest") }
            peerDigest = message
            try finishIfDone()
        case (.transferring, .checks(let theirs)):
            guard !checksReceived, peerDigest != nil else { throw .unexpectedMessage("checks before the checks digest, or twice") }
            checksReceived = true
            try compare(theirs)
        case (.transferring, .done):
            guard sentLast && receivedLast && inFlight == 0 && !doneReceived, peerDigest != nil,
                  checksReceived || !checksDiffer else {
                throw .unexpectedMessage("done before the exchange completed")
            }
            doneReceived = true
            try finishIfDone()
        default:
            throw .unexpectedMessage("\(message.name) message in state \(Self.name(of: state))")
        }
    }

    /// The state's case name, as `"\(state)"` prints it (without the reflection that costs).
    static func name(of state: State) -> String {
        switch state {
        case .created: "created"
        case .awaitingHello: "awaitingHello"
        case .awaitingWelcome: "awaitingWelcome"
        case .awaitingVector: "awaitingVector"
        case .awaitingPeerStart: "awaitingPeerStart"
        case .transferring: "transferring"
        case .finished: "finished"
        case .failed: "failed"
        }
    }

    /// What the peer holds; for a forked origin, "nothing", so every version is sent. `mine` is
    /// this replica's vector when the caller read it already (nil: read it here).
    private func setPeerVector(_ vector: VersionVector, forked: Set<ReplicaID>, mine known: VersionVector? = nil) {
        if let mine = known ?? (try? replica.versionVector()) {
            summary.changesExpected = changesMissing(from: mine, in: vector)
            summary.changesToSend = changesMissing(from: vector, in: mine)
        }
        peerHas = vector
        for origin in forked { peerHas[origin] = 0 }
        peerKnown = vector
        queued = []
    }

    private func receiveBatch(_ changes: [Change], heads: [SignedHead], isLast: Bool) throws(ProtocolError) {
        summary.batchesReceived += 1
        let recomputes = summary.recomputations < Limits.recomputationsPerSessionMax
        let report = try storage { try replica.applyRemote(changes, heads: heads, recomputes: recomputes) }
        if report.recomputed { summary.recomputations += 1 }
        summary.notAdmittedReceived += report.notAdmitted
        summary.unauthenticatedReceived += report.unauthenticated
        summary.heldBackReceived += report.heldBack
        summary.changesApplied += report.applied
        summary.duplicatesReceived += report.duplicates
        summary.gapsReceived += report.gaps
        summary.forkedVersionsReceived += report.forkedVersions
        if report.rotatedReplicaID { summary.recoveredFromStaleCopy = true }
        // An empty batch (a side with nothing to send says so with one) changes nothing here: no ack.
        if !changes.isEmpty { send(.ack(try localVector())) }
        receivedLast = isLast
        try finishIfDone()
    }

    /// Sends batches while the flow-control window allows and something is left.
    private func pump() throws(ProtocolError) {
        let overhead = 1 + 1 + 3  // type, isLast, count varint (≤ 4096 fits in 2; 3 to be safe)
        while inFlight < limits.batchesInFlightMax && !sentLast {
            if queued.isEmpty { try refill() }
            // The batch is a prefix of the queue: as many changes as the batch and frame bounds allow.
            // Read through a local: one exclusivity check per batch rather than per change.
            let queue = queued
            let start = queue.startIndex
            var end = start
            var bytes = overhead
            while end < queue.endIndex && end - start < limits.changesPerBatch {
                let size = queue[end].bytes.count + Self.headBytes(queue[end])
                if bytes + size > limits.frameBytes {
                    if end == start { throw .changeTooLarge(bytes: size) }
                    break
                }
                bytes += size
                end += 1
            }
            // A batch ends where its receiver can authenticate it (``EncodedChange/mayEndBatch``:
            // at a signed head, in a household with an owner): back to the last such change, or,
            // when the batch holds none, on to the next one, up to the protocol's own bounds.
            if end > start && !queue[end - 1].mayEndBatch {
                if let last = queue[start..<end].lastIndex(where: \.mayEndBatch) {
                    for i in (last + 1)..<end { bytes -= queue[i].bytes.count + Self.headBytes(queue[i]) }
                    end = last + 1
                } else {
                    while end < queue.endIndex && !queue[end - 1].mayEndBatch {
                        bytes += queue[end].bytes.count + Self.headBytes(queue[end])
                        end += 1
                    }
                    if end - start > changesPerBatchMax || bytes > frameBytesMax - 1 { throw .changeTooLarge(bytes: bytes) }
                }
            }
            let batch = queue[start..<end]
            precondition(batch.count <= changesPerBatchMax, "a batch above the protocol's batch limit")
            precondition(bytes <= frameBytesMax - 1, "a batch above the frame limit")
            queued = queue[end...]
            // Only the last change of each run of one origin: the same final values as writing
            // every change in order, with one dictionary write per run.
            for i in batch.indices where i + 1 == end || batch[i + 1].origin != batch[i].origin {
                peerHas[batch[i].origin] = batch[i].sequence
            }
            if queued.isEmpty { try refill() }
            let isLast = queued.isEmpty
            // Only the last batch may be empty (a side with nothing to send says so with it).
            precondition(!batch.isEmpty || isLast, "an empty batch before the last")
            sendFrame(Message.changesFrame(encoded: batch, isLast: isLast))
            if !batch.isEmpty { inFlight += 1 }  // an empty batch is not acknowledged
            precondition(inFlight <= limits.batchesInFlightMax, "more batches in flight than the window")
            summary.batchesSent += 1
            summary.changesSent += batch.count
            sentLast = isLast
        }
    }

    /// The most a change's stored head adds to a batch (when it is sent: ``SignedHead/sent(with:)``).
    private static func headBytes(_ change: EncodedChange) -> Int {
        guard let head = change.head else { return 0 }
        return 10 + 64 + 10 + 18 * head.choices.count + 10
    }

    private func refill() throws(ProtocolError) {
        let limit = limits.changesPerBatch
        var peer = peerHas
        while true {
            // An origin held back is done for this session: nothing after its cut is read there.
            for origin in withheld.keys { peer[origin] = .max }
            let found = try storage { try replica.encodedChanges(notCoveredBy: peer, limit: limit) }
            guard let version = negotiatedVersion, version < RecordVersions.newest, !found.isEmpty else {
                queued = ArraySlice(found)
                return
            }
            let part = RecordVersions.readablePart(of: found, by: version)
            withheld.merge(part.withheld) { first, _ in first }
            // Each pass that finds nothing readable holds back one more origin at least.
            if !part.readable.isEmpty || part.withheld.isEmpty {
                queued = ArraySlice(part.readable)
                return
            }
        }
    }

    /// Records the version both sides speak.
    private func agree(on version: UInt16) {
        negotiatedVersion = version
        summary.protocolVersion = version
    }

    private func finishIfDone() throws(ProtocolError) {
        guard state == .transferring else { return }
        // Once this side's exchange is complete: its checks digest. Once the peer's digest is in:
        // equal digests mean every child agrees; otherwise both sides send their full checks
        // (before done, so each receives the other's before the session ends) and compare.
        if myChecks == nil && sentLast && inFlight == 0 && receivedLast {
            let (checks, digest) = try localChecks()
            myChecks = checks
            myDigest = digest
            send(digest)
        }
        if !doneSent, let mine = myChecks, let theirs = peerDigest {
            if theirs == myDigest {
                summary.childrenAgreeing = mine.map(\.child)
            } else {
                checksDiffer = true
                send(.checks(mine))
            }
            send(.done)
            doneSent = true
        }
        if doneSent && doneReceived {
            precondition(sentLast, "finished before sending the last batch")
            precondition(receivedLast, "finished before receiving the last batch")
            precondition(inFlight == 0, "finished with batches in flight")
            precondition(myChecks != nil, "finished without this side's checks")
            precondition(peerDigest != nil, "finished without the peer's checks digest")
            let mine = try storage { try replica.versionVector() }
            summary.changesWithheld = withheld.reduce(0) { total, entry in
                total + Int(clamping: (mine[entry.key] ?? 0) - min(mine[entry.key] ?? 0, entry.value - 1))
            }
            summary.bothUpToDate = Self.normalized(mine) == Self.normalized(peerKnown)
            summary.peerVector = Self.normalized(peerKnown)
            state = .finished
            actions.append(.finished(summary))
        }
    }

    // MARK: Stale copies and forked histories

    /// Compares the peer's vector with this replica's: origins whose hash chains differ at the
    /// peer's sequence have forked histories (some replica was restored from stale files and
    /// reused sequences); both sides then send every version of them. Also returns this
    /// replica's vector for the caller to reuse.
    ///
    /// What a peer says of this replica's own origin here (a higher vector entry, another chain,
    /// a `forked` list naming it) never makes it rotate its id: any member can say anything
    /// (issue 20, point 9). Only changes of its own origin that it does not hold, received and
    /// logged, do (``Replica/applyRemote(_:heads:recomputes:)``, docs/SYNC.md); a fork found here makes
    /// both sides send every version of the origin, so they arrive.
    private func examine(_ peer: VectorSummary) throws(ProtocolError) -> (forks: Set<ReplicaID>, mine: VersionVector?) {
        var forks = Set<ReplicaID>()
        let mine = try storage { try replica.versionVector() }
        for (origin, theirs) in peer.vector where theirs > 0 && theirs <= (mine[origin] ?? 0) {
            let local = try storage { try replica.chain(origin, at: theirs) }
            if local != peer.chains[origin] { forks.insert(origin) }
        }
        summary.forkedOrigins += forks.count
        return (forks, mine)
    }

    // MARK: Per-child checks

    /// This side's per-child checks (sorted by child) and their `checksDigest` message.
    private func localChecks() throws(ProtocolError) -> (checks: [ChildCheck], digest: Message) {
        let aggregates = try storage { try replica.aggregates() }
        guard aggregates.count <= checksTotalMax else { throw .storage("more than \(checksTotalMax) children") }
        return Self.checks(of: aggregates)
    }

    /// The `checksDigest` message of `checks` (sorted by child, as ``localChecks()`` returns them).
    static func digest(of checks: [ChildCheck]) -> Message {
        var hasher = SHA256Hasher()
        var payload = ByteWriter(capacity: 4 + 50 * checks.count)
        Message.write(checks: checks, &payload)  // the `checks` payload, for any number of children
        hasher.update(payload.bytes)
        return .checksDigest(children: UInt64(checks.count), digest: hasher.finalizeWords().prefix(16))
    }

    private func compare(_ theirs: [ChildCheck]) throws(ProtocolError) {
        let mine = Dictionary(uniqueKeysWithValues: (myChecks ?? []).map { ($0.child, $0) })
        let other = Dictionary(uniqueKeysWithValues: theirs.map { ($0.child, $0) })
        for child in Set(mine.keys).union(other.keys).sorted() {
            if mine[child] == other[child] { summary.childrenAgreeing.append(child) } else { summary.childrenDiffering.append(child) }
        }
    }

    // MARK: Pages

    /// Joins a paged message: nil while its pages arrive, the whole message at its last page.
    private func joined(_ message: Message) throws(ProtocolError) -> Message? {
        if case .part(let page) = message {
            if let earlier = pages { pages = try Self.join(earlier, page) } else { pages = page }
            return nil
        }
        guard let earlier = pages else { return message }
        pages = nil
        return try Self.join(earlier, message)
    }

    /// The pages `earlier` and `next` of one message, joined. Pages of a vector or an ack name
    /// disjoint origins, pages of checks follow each other in child order, and the whole stays
    /// within ``vectorEntriesTotalMax`` or ``checksTotalMax``.
    static func join(_ earlier: Message, _ next: Message) throws(ProtocolError) -> Message {
        switch (earlier, next) {
        case (.vector(let a), .vector(let b)):
            let vector = try joinVectors(a.vector, b.vector)
            guard a.forked.count + b.forked.count <= vectorEntriesTotalMax else { throw .malformed("a paged forked list above \(vectorEntriesTotalMax) origins") }
            return .vector(VectorSummary(vector: vector, chains: a.chains.merging(b.chains) { old, _ in old }, forked: a.forked + b.forked))
        case (.ack(let a), .ack(let b)):
            return .ack(try joinVectors(a, b))
        case (.checks(let a), .checks(let b)):
            guard a.count + b.count <= checksTotalMax else { throw .malformed("paged checks above \(checksTotalMax) children") }
            if let last = a.last, let first = b.first, last.child >= first.child { throw .malformed("pages of checks out of child order") }
            return .checks(a + b)
        default:
            throw .unexpectedMessage("\(next.name) message inside a paged \(earlier.name)")
        }
    }

    private static func joinVectors(_ a: VersionVector, _ b: VersionVector) throws(ProtocolError) -> VersionVector {
        guard a.count + b.count <= vectorEntriesTotalMax else { throw .malformed("a paged vector above \(vectorEntriesTotalMax) entries") }
        var joined = a
        for (origin, sequence) in b {
            guard joined.updateValue(sequence, forKey: origin) == nil else { throw .malformed("two pages of a vector name origin \(origin)") }
        }
        return joined
    }

    /// `message` as it is sent: a `vector`, `ack` or `checks` message with more entries than one
    /// message holds as pages (``Message/part(_:)``) and the message with the last page; a
    /// `forked` list that long as several `forked` messages; any other message as it is.
    static func paged(_ message: Message) -> [Message] {
        func chunks<T>(_ items: [T], _ size: Int) -> [[T]] {
            stride(from: 0, to: max(items.count, 1), by: size).map { Array(items[$0..<min($0 + size, items.count)]) }
        }
        func asPages(_ messages: [Message]) -> [Message] {
            messages.dropLast().map { .part($0) } + messages.suffix(1)
        }
        switch message {
        case .vector(let summary) where summary.vector.count > vectorEntriesMax || summary.forked.count > vectorEntriesMax:
            let origins = summary.vector.filter { $0.value > 0 }.keys.sorted()
            var byOrigin = chunks(origins, vectorEntriesMax), forked = chunks(summary.forked, vectorEntriesMax)
            while byOrigin.count < forked.count { byOrigin.append([]) }
            while forked.count < byOrigin.count { forked.append([]) }
            return asPages(zip(byOrigin, forked).map { page, forks in
                .vector(VectorSummary(vector: Dictionary(uniqueKeysWithValues: page.map { ($0, summary.vector[$0]!) }),
                                      chains: Dictionary(uniqueKeysWithValues: page.compactMap { o in summary.chains[o].map { (o, $0) } }),
                                      forked: forks))
            })
        case .ack(let vector) where vector.count > vectorEntriesMax:
            let origins = vector.filter { $0.value > 0 }.keys.sorted()
            return asPages(chunks(origins, vectorEntriesMax).map { page in .ack(Dictionary(uniqueKeysWithValues: page.map { ($0, vector[$0]!) })) })
        case .checks(let checks) where checks.count > checksMax:
            return asPages(chunks(checks.sorted { $0.child < $1.child }, checksMax).map { .checks($0) })
        case .forked(let origins) where origins.count > vectorEntriesMax:
            return chunks(Set(origins).sorted(), vectorEntriesMax).map { .forked($0) }
        default:
            return [message]
        }
    }

    // MARK: Helpers

    private func localSummary(forked: Set<ReplicaID>, vector known: VersionVector? = nil) throws(ProtocolError) -> VectorSummary {
        let vector: VersionVector
        if let known { vector = try Self.checkedVector(known) } else { vector = try localVector() }
        let chains = try storage { try replica.chains(at: vector) }
        return VectorSummary(vector: vector, chains: chains, forked: forked.sorted())
    }

    private func localVector() throws(ProtocolError) -> VersionVector {
        try Self.checkedVector(try storage { try replica.versionVector() })
    }

    private static func checkedVector(_ vector: VersionVector) throws(ProtocolError) -> VersionVector {
        guard vector.count <= vectorEntriesTotalMax else { throw .storage("more than \(vectorEntriesTotalMax) replicas in the vector") }
        return vector
    }

    private func storage<T>(_ body: () throws -> T) throws(ProtocolError) -> T {
        do { return try body() } catch { throw .storage("\(error)") }
    }

    private func send(_ message: Message) {
        for page in Self.paged(message) { sendFrame(page.frame()) }
    }

    private func sendFrame(_ frame: [UInt8]) {
        summary.bytesSent += frame.count
        actions.append(.send(frame))
    }

    private func fail(_ error: ProtocolError) {
        guard state != .failed && state != .finished else { return }
        switch error {
        case .peer: break
        case .versionMismatch(let lo, let hi):
            // Names this side's kidledger and versions, for the peer to say which laptop to update.
            send(.error(code: error.code, message: VersionRefusal.text(product: product, mine: versions, peer: lo...hi)))
        default: send(.error(code: error.code, message: error.description))
        }
        failure = error
        state = .failed
        actions.append(.failed(error))
    }

    private func takeActions() -> [SessionAction] {
        defer { actions = [] }
        return actions
    }

    static func normalized(_ vector: VersionVector) -> VersionVector {
        vector.filter { $0.value > 0 }
    }
}

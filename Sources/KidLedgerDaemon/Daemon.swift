#if canImport(Glibc)
import Glibc
#endif
import Foundation
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerProtocol
import KidLedgerTransport
import KidLedgerLMDB
import KidLedgerSecurity
import Synchronization
import KidLedgerSystem

/// Set by SIGINT/SIGTERM; every loop of the daemon checks it. Lock-free, so the signal handler
/// may store to it.
private let stopSignal = Atomic<Bool>(false)
/// Signalled with ``stopSignal``: wakes the gossip loop at once (it otherwise sleeps until its
/// next peer is due).
private let stopWakeup = Wakeup()

/// `kidledger serve`: accepts peers, gossips with every known peer on an interval and soon after
/// a local change (including one made by another `kidledger` process on the same home), logs one
/// line per session to standard error. Local commands keep working meanwhile: LMDB lets several
/// processes use one home, and every session's writes are short transactions.
public final class Daemon: Sendable {
    /// How often every known peer is synced even without local changes.
    static let gossipIntervalMillis: Int64 = 30_000
    /// How soon after a local change the peers are synced.
    static let changeDelayMillis: Int64 = 100
    /// The longest the gossip loop sleeps when nothing is due: it wakes earlier for a commit to the
    /// store by any process (``FileWatch`` on data.mdb), a device discovery found, a peer due, or a
    /// stop. Idle, the daemon wakes about once a minute per thread (docs/PERFORMANCE.md, "Idle").
    static let idleWaitMillis: Int64 = 60_000
    /// The longest the gossip loop sleeps without looking at the store: a backstop for a commit
    /// whose inotify event came before LMDB published it to readers (seen under heavy load, after
    /// ``commitSettleMillis`` too); six cheap reads a minute at rest.
    static let storeLookMillis: Int64 = 10_000
    /// How long after a write to data.mdb woke the gossip loop it looks at the store once more
    /// (the commit may not have been published to readers when the write woke it).
    static let commitSettleMillis: Int64 = 50
    /// How long the accept loop waits for a connection before it checks for a stop (closing the
    /// listener wakes it earlier); a second while refusals are being counted, to log them on time.
    static let acceptWaitMillis = 60_000
    /// The most addresses of one device tried in one round (the first that answers is synced with).
    public static let addressesPerDialMax = 4
    /// How often the daemon looks for allowance periods due (``payAllowances(_:)``), besides after
    /// every change to the store.
    static let allowanceCheckMillis: Int64 = 60_000
    /// The product's connection limits (``limits``): at most 16 sessions at once, at most 8 of
    /// them not admitted yet, and at most 4 from one address. Past 4 from an address a connection
    /// is refused at accept; past 8 not admitted (or 16 in all) it takes the place of one not
    /// admitted yet, whose connection is closed (``ConnectionLimiter``).
    public static let limitsDefault = ConnectionLimiter.Limits(connectionsMax: 16, unadmittedMax: 8, perAddressMax: 4)
    /// A serving session drops its resident map pages after sending this many changes.
    static let changesPerPageRelease = 32_768
    /// The default of ``peerTimeoutMillis``.
    public static let peerTimeoutDefaultMillis = 15_000
    /// The environment variable that sets ``peerTimeoutMillis`` (milliseconds, 100...600000).
    static let peerTimeoutVariable = "KIDLEDGER_PEER_TIMEOUT_MS"

    /// How long a connecting peer may take for the whole secure handshake, then for its sync
    /// `hello` (after which it is admitted or refused), and the longest a session waits for the
    /// peer to send or accept anything. A peer trickling bytes is dropped when the time is up.
    let peerTimeoutMillis: Int

    let environment: LMDBEnvironment
    let household: RecordID
    let identity: Identity
    let listener: TCPListener
    let log: @Sendable (String) -> Void
    /// Counts the connections in service against ``limitsDefault`` (or the limits given to init).
    let limiter: ConnectionLimiter
    /// Why syncing must stop now (attentionRequired), checked before each session.
    let attention: (@Sendable (Replica) -> String?)?
    /// The wall clock of the daemon's replicas: it decides which allowance periods are due.
    let clock: any WallClock
    /// The accept loop and the session threads still running.
    private let activeThreads = Atomic<Int>(0)
    /// Connections closed before admission to make room for newer ones, so far.
    private let evictions = Atomic<Int>(0)
    /// The dial groups (``SyncDriver/dialGroups(_:)``) of devices discovery found at a new
    /// address: the gossip loop dials them at once.
    private let woken = Mutex<Set<String>>([])
    /// Writes the daily backup when it is due (the CLI's `ScheduledBackup.runIfDue` on the home),
    /// given the gossip loop's replica and the time; nil: none are written.
    let scheduledBackup: (@Sendable (Replica, _ now: Int64) -> Void)?
    /// Wakes the gossip loop when discovery found a device.
    private let wakeup = Wakeup()

    public init(environment: LMDBEnvironment, household: RecordID, identity: Identity, listener: TCPListener,
         peerTimeoutMillis: Int = Daemon.peerTimeoutDefaultMillis, limits: ConnectionLimiter.Limits = Daemon.limitsDefault,
         log: @escaping @Sendable (String) -> Void, attention: (@Sendable (Replica) -> String?)? = nil,
         clock: any WallClock = SystemClock(), scheduledBackup: (@Sendable (Replica, _ now: Int64) -> Void)? = nil) {
        self.scheduledBackup = scheduledBackup
        self.attention = attention
        self.clock = clock
        self.limiter = ConnectionLimiter(limits)
        self.peerTimeoutMillis = peerTimeoutMillis
        self.environment = environment
        self.household = household
        self.identity = identity
        self.listener = listener
        self.log = log
    }

    public func makeReplica() throws -> Replica {
        let replica = try Replica(store: environment, clock: clock, random: SystemRandomNumberGenerator(), verifier: SodiumVerifier())
        replica.zones = FoundationZones()
        replica.workSplitter = ThreadedWork.forThisMachine()
        replica.signer = identity.signer
        return replica
    }

    public static func installSignalHandlers() {
        _ = stopWakeup  // made before a handler can need it
        signal(SIGINT) { _ in stopSignal.store(true, ordering: .relaxed); stopWakeup.signal() }
        signal(SIGTERM) { _ in stopSignal.store(true, ordering: .relaxed); stopWakeup.signal() }
        signal(SIGPIPE, SIG_IGN)
        // A parent may have started us with these blocked (the mask survives exec): unblock them.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    var stopping: Bool { stopSignal.load(ordering: .relaxed) }

    /// Whether SIGINT or SIGTERM arrived (``installSignalHandlers()``).
    public static var stopRequested: Bool { stopSignal.load(ordering: .relaxed) }

    /// Runs until SIGINT or SIGTERM, with LAN discovery unless `discovery` is nil (`--no-discovery`).
    public func run(discovery settings: Discovery.Settings? = nil) throws {
        let acceptor = Thread { [self] in acceptLoop() }
        acceptor.start()
        var discovery: Discovery?
        if let settings, let genesis = try makeReplica().genesis() {
            discovery = Discovery(settings: settings, household: genesis, identity: identity, tcpPort: listener.port, log: log,
                                  makeReplica: { [self] in try makeReplica() },
                                  found: { [self] member in
                                      _ = woken.withLock { $0.insert(SyncDriver.dialGroupKey(member: member)) }
                                      wakeup.signal()
                                  })
            discovery?.start(stopping: { stopSignal.load(ordering: .relaxed) })
        }
        try gossipLoop()
        listener.close()
        discovery?.stop()
        // Let sessions in progress end (each batch is its own transaction; an abandoned session
        // loses nothing), but not forever.
        let deadline = Monotonic.millis() + 5_000
        while threadsActive() > 0 && Monotonic.millis() < deadline { usleep(50_000) }
        log("stopped")
    }

    private func threadsActive() -> Int {
        activeThreads.load(ordering: .acquiring)
    }

    private func adjustThreads(_ delta: Int) {
        let now = activeThreads.wrappingAdd(delta, ordering: .acquiringAndReleasing).newValue
        precondition(now >= 0, "more daemon threads ended than started")
    }

    private func acceptLoop() {
        adjustThreads(1)
        defer { adjustThreads(-1) }
        var refusals = RefusalLog()
        while !stopping {
            for line in refusals.due(now: Monotonic.millis()) { log(line) }
            let connection: TCPConnection?
            do { connection = try listener.accept(timeoutMillis: refusals.tracked > 0 ? 1_000 : Self.acceptWaitMillis) } catch {
                if stopping { return }
                log("accept failed: \(error)")
                usleep(100_000)
                continue
            }
            guard let connection else { continue }
            let slot: ConnectionLimiter.Slot
            let evictedBefore = evictions.load(ordering: .relaxed)
            switch limiter.tryAcquire(address: connection.remoteHost, evict: { [self] in
                evictions.add(1, ordering: .relaxed)
                connection.close()
            }) {
            case .success(let taken):
                slot = taken
                if evictions.load(ordering: .relaxed) != evictedBefore, let line = refusals.evicted(now: Monotonic.millis()) { log(line) }
            case .failure(let refusal):
                if let line = refusals.refused(connection.remote, address: connection.remoteHost, refusal.reason, now: Monotonic.millis()) {
                    log(line)
                }
                refuse(connection, refusal.reason)
                continue
            }
            adjustThreads(1)
            Thread.detachNewThread { [self] in
                defer { limiter.release(slot); adjustThreads(-1) }
                serve(connection, slot)
            }
        }
    }

    /// Tells a connection it is refused (a channel refusal frame, best effort, never waiting on the
    /// peer) and closes it. What the peer already sent is read and dropped first, so closing does
    /// not reset the connection before the refusal can be read.
    private func refuse(_ connection: TCPConnection, _ reason: String) {
        _ = try? connection.read(maxBytes: 4 << 10, timeoutMillis: 0)
        try? connection.write(SecureChannel.refusalFrame(reason), timeoutMillis: 50)
        connection.close()
    }

    /// Parses ``peerTimeoutVariable``'s value: nil when unset; throws a usage error when invalid.
    public static func peerTimeout(from environment: [String: String]) throws -> Int? {
        guard let raw = environment[peerTimeoutVariable] else { return nil }
        guard let value = Int(raw), (100...600_000).contains(value) else {
            throw DaemonError("\(peerTimeoutVariable) must be a whole number of milliseconds from 100 to 600000, got \"\(raw)\"", kind: .usage)
        }
        return value
    }

    /// Serves one connection. Until the session admits the peer (the handshake done and its
    /// `hello` accepted, within one peer timeout from accept) the slot counts as not admitted and
    /// the channel takes data frames of at most ``SecureChannel/unadmittedFrameBytesMax``.
    private func serve(_ connection: TCPConnection, _ slot: ConnectionLimiter.Slot) {
        let started = Monotonic.millis()
        let remote = connection.remote
        do {
            let replica = try makeReplica()
            if let reason = attention?(replica) {
                connection.close()
                log("session from \(remote) refused: attention required here: \(reason)")
                return
            }
            let household = self.household
            let daemon = self
            let channel = try responderChannel(replica)
            let stream: SecureStream
            do { stream = try SecureStream.establish(channel, over: connection, timeoutMillis: peerTimeoutMillis, now: Monotonic.millis) } catch {
                if limiter.wasEvicted(slot) { return }  // closed to make room: counted by the accept loop
                // What the refusal taught is recorded before the connection closes: a refused peer
                // that answered waits for the close before it tries again.
                defer { connection.close() }
                let learned = SyncDriver.learn(from: error, in: replica, identity: identity).map { "; " + SyncDriver.describe($0) }
                let answered = SyncDriver.learnAnswer(from: error, in: replica).map { "; " + SyncDriver.describe($0) }
                log("session from \(remote) refused in the handshake: \(error)" + (learned ?? answered ?? "") + shortCodeTry(channel, replica))
                return
            }
            // A joiner that proved a short code gets the invitation's long code, and joins with it.
            if case .shortCode(let slot, _) = channel.mode {
                handOver(slot: slot, over: stream, replica: replica)
                return
            }
            let peerKey = stream.peerKey
            let remoteHost = connection.remoteHost
            // The channel admitted the peer; the session checks it is (still, or now) a member, and
            // records where its daemon accepts peers, as its hello says.
            let admit: @Sendable (Admission) -> ProtocolError? = { admission in
                guard let r = try? daemon.makeReplica() else { return .refused("the ledger could not be opened") }
                guard SyncDriver.admissibleKeys(r).members.contains(peerKey.bytes) else { return .refused("this device is not a member of this household") }
                daemon.learn(PeerAddress(host: remoteHost, port: admission.listenPort), of: peerKey.bytes, in: r)
                return nil
            }
            let session = SyncSession(role: .responder, replica: replica, household: household, admit: admit)
            // Sending a long log touches pages all over the map: let them go every so often so
            // the daemon's resident memory stays small whatever the ledger's size.
            var sentAtRelease = 0
            let environment = self.environment
            let limiter = self.limiter
            // The handshake and the hello share one deadline: the peer timeout from accept.
            let helloLeft = max(peerTimeoutMillis - Int(Monotonic.millis() - started), 1)
            let outcome = SessionRunner.run(session, over: stream, idleTimeoutMillis: peerTimeoutMillis,
                                            helloTimeoutMillis: helloLeft, admitted: {
                channel.dataFrameBytesMax = SecureChannel.frameBytesMax
                limiter.admit(slot)
            }, progress: { p in
                guard p.changesSent - sentAtRelease >= Self.changesPerPageRelease else { return }
                sentAtRelease = p.changesSent
                environment.releaseResidentPages()
            }, now: Monotonic.millis)
            if sentAtRelease > 0 { environment.releaseResidentPages() }
            logEnd(of: session, outcome, from: connection, key: peerKey.bytes, slot, started: started, replica: replica)
        } catch {
            connection.close()
            log("session from \(remote) failed: \(error)")
        }
    }

    /// The responder's channel for one connection: it admits members and, with the key of an open
    /// invitation, joiners; it refuses everyone else before this device reveals its key
    /// (docs/SECURITY.md). Until the session admits the peer, its data frames are small.
    private func responderChannel(_ replica: Replica) throws -> SecureChannel {
        let (members, revoked) = SyncDriver.admissibleKeys(replica)
        let owner = identity
        let daemon = self
        let channel = try SecureChannel(role: .responder, identity: identity, household: household,
                                        seed: Sodium.randomBytes(SecureChannel.seedByteCount),
                                        invitations: { (try? replica.device.openInvites().map(\.key)) ?? [] },
                                        shortInvitations: { slot in (try? replica.device.takeShortTry(slot: slot))?.password },
                                        authorize: { key, _, _, invitation in
                                            if revoked.contains(key.bytes) { return "this device's membership was revoked" }
                                            if members.contains(key.bytes) { return nil }
                                            guard let invitation else { return "this device is not a member of this household" }
                                            return daemon.admitJoiner(key, invitation: invitation, owner: owner)
                                        },
                                        evidence: SyncDriver.revocationEvidence(replica, revoked: revoked),
                                        answer: SyncDriver.answer(replica, identity: identity))
        channel.dataFrameBytesMax = SecureChannel.unadmittedFrameBytesMax
        return channel
    }

    /// Records and logs how an inbound session ended: what it exchanged, a version gap, or why it failed.
    private func logEnd(of session: SyncSession, _ outcome: SessionOutcome, from connection: TCPConnection, key peerKey: [UInt8],
                        _ slot: ConnectionLimiter.Slot, started: Int64, replica: Replica) {
        let remote = connection.remote
        let seconds = Double(Monotonic.millis() - started) / 1000
        if let s = outcome.summary {
            recordInbound(s, of: peerKey, from: connection.remoteHost, in: replica)
            log("session from \(remote)\(s.peer.map { " (replica \($0.description.prefix(8)))" } ?? ""): sent \(s.changesSent), received \(s.changesApplied) new changes, \(s.bytesSent + s.bytesReceived) bytes in \(SyncDriver.formatSeconds(seconds))" + SyncDriver.heldBackNote(s) + SyncDriver.withheldNote(s))
        } else if let gap = VersionGap(session.failure, mine: session.versions, product: session.product) {
            let message = gap.message(laptop: VersionGap.laptop(replica, key: peerKey, address: remote.description))
            try? replica.device.setSetting(VersionGap.inboundSetting(peerKey), message)
            log("session from \(remote) refused: " + message)
        } else if !limiter.wasEvicted(slot) {  // one closed to make room is counted by the accept loop
            log("session from \(remote) failed after \(SyncDriver.formatSeconds(seconds)): \(outcome.errorDescription ?? "unknown error")")
        }
    }

    /// Records where a member's daemon accepts peers, as its `hello` said (the port) at the address
    /// its connection came from: the inviter learns the joiner's daemon once it syncs (issue 22,
    /// point 2). A new address wakes the member's dial group, like one discovery found.
    func learn(_ address: PeerAddress, of member: [UInt8], in replica: Replica) {
        guard address.port != 0, !address.host.isEmpty, address.host != "?" else { return }
        do {
            guard try replica.device.learnAddress(address.description, member: member, from: .session) else { return }
            log("learned from its session that member \(PublicKey(bytes: member)?.fingerprint ?? "?") accepts peers at \(address)")
            _ = woken.withLock { $0.insert(SyncDriver.dialGroupKey(member: member)) }
        } catch {
            log("cannot record \(address): \(error)")
        }
    }

    /// Admits a joiner whose handshake opened with the key of an open invitation
    /// (``JoinAdmission/admit(_:invitation:owner:household:in:atMillis:)``). Nil when admitted, else
    /// the reason sent to it.
    private func admitJoiner(_ key: PublicKey, invitation: [UInt8], owner: Identity) -> String? {
        guard let r = try? makeReplica() else { return "the ledger could not be opened" }
        return JoinAdmission.admit(key, invitation: invitation, owner: owner, household: household, in: r, atMillis: SystemClock().nowMillis())
    }

    /// After a short-code handshake that failed: how many tries its code has left, and the code
    /// burned (deleted) when none is left (docs/SECURITY.md, "Short codes"); "" for other handshakes.
    private func shortCodeTry(_ channel: SecureChannel, _ replica: Replica) -> String {
        guard case .shortCode(let slot, _) = channel.mode, let open = try? replica.device.shortInvite(slot: slot) else { return "" }
        guard open.triesLeft == 0 else { return "; the short code of invitation slot \(slot) has \(Wording.plural(open.triesLeft, "try", "tries")) left" }
        try? replica.device.removeShortInvite(slot: slot)
        return "; the short code of invitation slot \(slot) is burned after \(DeviceState.shortCodeTries) tries (its long code still works; `kidledger invite` makes a new one)"
    }

    /// Hands the long code of the short invitation in `slot` to the joiner that proved its short
    /// code, and closes: the short code is used up; the joiner joins with the long one next
    /// (through the one join path: the invitation's key, the owner's key).
    private func handOver(slot: UInt8, over stream: SecureStream, replica: Replica) {
        defer { stream.close() }
        guard let open = try? replica.device.shortInvite(slot: slot) else {
            log("session from \(stream.remote): the short code of invitation slot \(slot) was used or expired meanwhile")
            return
        }
        do { try stream.write(Array(open.code.utf8), timeoutMillis: peerTimeoutMillis) } catch {
            log("session from \(stream.remote): could not hand over the invitation of short code slot \(slot): \(error)")
            return
        }
        try? replica.device.removeShortInvite(slot: slot)
        log("session from \(stream.remote) proved the short code of invitation slot \(slot): handed it the invitation; it joins with it next")
    }

    /// Records a session another laptop opened that completed, in one transaction
    /// (``DeviceState/recordInbound(member:from:_:)``): counted (issue 22, point 2: the owner's
    /// laptop sees that the joined one syncs with it), and its member's address, time and receipt
    /// kept, so `status` shows a member whose laptop runs no daemon as one that dials in.
    private func recordInbound(_ summary: SessionSummary, of member: [UInt8], from host: String, in replica: Replica) {
        do {
            try replica.device.recordInbound(member: member, from: host, SyncDriver.outcome(of: summary))
            if try VersionGap.refusedInbound(member, in: replica) != nil { try replica.device.setSetting(VersionGap.inboundSetting(member), "") }
            VersionGap.recordWithheld(summary, of: member, in: replica)
        } catch {
            log("cannot record the session of member \(PublicKey(bytes: member)?.fingerprint ?? "?") from \(host): \(error)")
        }
    }

    /// Whether this laptop's member key is revoked as its own ledger knows it (``Replica/isRevokedHere(_:)``).
    public static func listsItselfRevoked(_ replica: Replica, _ identity: Identity) throws -> Bool {
        try replica.isRevokedHere(identity.publicKey.bytes)
    }

    // long-function: one scheduling loop; its branches share the schedule (due times, backoffs, the last change seen).
    /// Syncs with every known peer when due: on the interval, soon after a local change, and with
    /// bounded exponential backoff with jitter after failures. In attentionRequired it does not,
    /// except that a laptop revoked as it knows still tries each peer on the interval.
    private func gossipLoop() throws {
        let replica = try makeReplica()
        var lastVector = try replica.versionVector()
        var changedAt: Int64?
        var nextDue: [String: Int64] = [:]
        var backoff: [String: Backoff] = [:]
        var relaySchedule = RelaySchedule()
        var random = SystemRandomNumberGenerator()
        var allowanceCheckedAt: Int64?
        let watch = FileWatch(path: environment.directory + "/data.mdb")
        var storeWritten = false
        while !stopping {
            let now = Monotonic.millis()
            if storeWritten || (allowanceCheckedAt.map({ now - $0 >= Daemon.allowanceCheckMillis }) ?? true) {
                allowanceCheckedAt = now
                payAllowances(replica)
                scheduledBackup?(replica, clock.nowMillis())
            }
            let vector = try replica.versionVector()
            if vector != lastVector {
                lastVector = vector
                changedAt = changedAt ?? now
            }
            let changeDue = changedAt.map { now - $0 >= Daemon.changeDelayMillis } ?? false
            var synced = false
            for group in SyncDriver.dialGroups(try replica.device.peers()) where !stopping {
                // Discovery found this device at a new address: dial it now, whatever its backoff.
                if woken.withLock({ $0.remove(group.key) != nil }) {
                    nextDue[group.key] = 0
                    backoff[group.key] = nil
                }
                let due = nextDue[group.key] ?? 0
                let failing = !(backoff[group.key]?.attempt == 0 || backoff[group.key] == nil)
                guard now >= due || (changeDue && !failing) else { continue }
                let reason = attention?(replica)
                // A laptop revoked as it knows still asks this peer in, on the interval: a refusal
                // confirms the revocation; being let in means it does not hold there (a recovery
                // of ownership the revoking owner had not seen voided it: docs/SECURITY.md), and
                // the sync brings the transfer that clears it here too.
                let probing = try reason != nil && Self.listsItselfRevoked(replica, identity)
                if let reason, !probing {
                    log("not syncing: attention required: \(reason)")
                    nextDue[group.key] = Monotonic.millis() + Daemon.gossipIntervalMillis
                    continue
                }
                if probing && now < due { continue }  // only on the interval, not after changes
                // One device under several addresses: the first that answers is synced with.
                var succeeded = false
                for address in group.addresses.prefix(Self.addressesPerDialMax) where !stopping {
                    let result = SyncDriver.sync(replica, household: household, with: address, identity: identity,
                                                 listenPort: listener.port)
                    synced = true
                    log(SyncDriver.line(result))
                    if probing && result.succeeded && attention?(replica) == nil {
                        log("\(address) let this laptop in and its revocation no longer holds (an ownership recovery voided it): syncing again")
                    }
                    succeeded = result.succeeded
                    if result.succeeded || result.wasRefused { break }
                }
                var b = backoff[group.key] ?? Backoff()
                if succeeded {
                    b.reset()
                    nextDue[group.key] = Monotonic.millis() + Daemon.gossipIntervalMillis
                } else {
                    nextDue[group.key] = Monotonic.millis() + b.nextDelayMillis(using: &random)
                }
                backoff[group.key] = b
            }
            // After the direct peers: the granted relays that are due.
            if relayRound(replica, now: now, changeDue: changeDue, schedule: &relaySchedule, random: &random) { synced = true }
            if changeDue || synced {
                // What this round received is not a local change to push again; a local change
                // committed while the round ran (another command on this home) is.
                if changeDue { changedAt = nil }
                // The round's own writes (each session's outcome) are not news. Dropped before the
                // vector is read again: a commit by another process after this point is either in
                // `after` (and caught below) or wakes the loop anew.
                if synced { watch.drain() }
                let after = try replica.versionVector()
                if synced && after[replica.replicaID] != vector[replica.replicaID] { changedAt = changedAt ?? Monotonic.millis() }
                lastVector = after
            }
            // Sleep until something is due, or a commit, a discovery or a stop wakes the loop.
            var dues = SyncDriver.dialGroups(try replica.device.peers()).map { nextDue[$0.key] ?? 0 }
            dues += ((try? replica.relays()) ?? []).map { relaySchedule.due[Hex.encode($0.key)] ?? 0 }
            // A commit is visible to readers a moment after its last write to data.mdb (LMDB
            // publishes the transaction id in lock.mdb after the meta page): look once more then.
            if storeWritten { dues.append(Monotonic.millis() + Daemon.commitSettleMillis) }
            let wait = min(Self.waitMillis(now: Monotonic.millis(), nextDue: dues, changedAt: changedAt, allowanceCheckedAt: allowanceCheckedAt),
                           Self.storeLookMillis)
            let woke = wakeup.wait(timeoutMillis: Int(wait), also: [stopWakeup.readFD, watch.fd].filter { $0 >= 0 })
            storeWritten = woke.ready.contains(watch.fd)
            if storeWritten { watch.drain() }
        }
    }

    /// How long the gossip loop may sleep at `now`: until the first peer is due (`nextDue`), a
    /// local change is to be pushed (``changeDelayMillis`` after `changedAt`), or the allowances
    /// are to be checked; at least 10 ms, at most ``idleWaitMillis``.
    static func waitMillis(now: Int64, nextDue: [Int64], changedAt: Int64?, allowanceCheckedAt: Int64?) -> Int64 {
        var until = now + idleWaitMillis
        until = min(until, (allowanceCheckedAt ?? now) + allowanceCheckMillis)
        if let changedAt { until = min(until, changedAt + changeDelayMillis) }
        for due in nextDue { until = min(until, due) }
        return max(10, min(until - now, idleWaitMillis))
    }

    /// Pays the allowance periods now due (one change: the loop then pushes it to the peers like
    /// any local change), unless attention is required; a failure is logged and retried on the
    /// next check.
    public func payAllowances(_ replica: Replica) {
        do {
            guard try replica.hasDueAllowances(now: clock.nowMillis()) else { return }
            // The gate and the payments in one write transaction. Attention required (the sync
            // step logs why): nothing is written here.
            let paid = try replica.change {
                attention?(replica) != nil ? [] : try replica.payDueAllowances(now: clock.nowMillis())
            }
            for p in paid {
                log("paid \(p.childName)'s allowance of \(Money.format(cents: p.transaction.amountCents)) for the period from \(Timestamp.short(millis: p.transaction.createdAtMillis)) UTC")
            }
        } catch {
            log("allowance: \(error)")
        }
    }
}

/// The accept loop's refusal log lines, bounded per address: the first refusal of an address is
/// logged; more from it within ``intervalMillis`` are counted and then logged as one line. So a
/// flood from one address costs at most two lines per interval, and the table at most
/// ``addressesMax`` entries (past that it starts afresh and those counts go unreported).
struct RefusalLog {
    /// How long after a logged refusal more from the same address are only counted.
    static let intervalMillis: Int64 = 10_000
    /// The most addresses tracked at once.
    static let addressesMax = 1_024

    /// Per address (or ``evictionsKey``): when its interval began, how many more were only
    /// counted since, and what the counting line says: "VERB N more connections COUNTED".
    private var quiet: [String: (since: Int64, count: Int, verb: String, counted: String)] = [:]

    /// The line to log for refusing a connection from `remote` (`address` and port) for `reason`,
    /// or nil when it is only counted.
    mutating func refused(_ remote: String, address: String, _ reason: String, now: Int64) -> String? {
        let within = "within \(Self.intervalMillis / 1000) s"
        return isFirst(address, now: now, verb: "refused", counted: "from \(address) \(within) (not logged one by one): \(reason)")
            ? "refused \(remote): \(reason)" : nil
    }

    /// The line to log for closing a connection not admitted yet to make room for a newer one,
    /// or nil when it is only counted (one line per interval, like refusals of one address).
    mutating func evicted(now: Int64) -> String? {
        isFirst(Self.evictionsKey, now: now, verb: "closed", counted: "not admitted yet within \(Self.intervalMillis / 1000) s to make room for newer ones")
            ? "closed a connection not admitted yet to make room for a newer one (the oldest from the address holding the most)" : nil
    }

    /// The key evictions are counted under (no address looks like it).
    static let evictionsKey = "(evictions)"

    /// Whether an event under `key` is the first of its interval (to log); else it is counted,
    /// for the line `verb` and `counted` make when the interval ends.
    private mutating func isFirst(_ key: String, now: Int64, verb: String, counted: String) -> Bool {
        if let entry = quiet[key], now - entry.since < Self.intervalMillis {
            quiet[key] = (entry.since, entry.count + 1, verb, counted)
            return false
        }
        if quiet.count >= Self.addressesMax { quiet.removeAll() }
        quiet[key] = (now, 0, verb, counted)
        return true
    }

    /// The addresses tracked now.
    var tracked: Int { quiet.count }

    /// Lines for the addresses whose interval ended with refusals counted (which ends tracking them).
    mutating func due(now: Int64) -> [String] {
        var lines: [String] = []
        for (key, entry) in quiet where now - entry.since >= Self.intervalMillis {
            quiet[key] = nil
            guard entry.count > 0 else { continue }
            lines.append("\(entry.verb) \(entry.count) more \(entry.count == 1 ? "connection" : "connections") \(entry.counted)")
        }
        return lines
    }
}

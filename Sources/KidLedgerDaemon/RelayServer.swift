#if canImport(Glibc)
import Glibc
#endif
import Foundation
import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerSecurity
import KidLedgerSystem
import KidLedgerTransport
import KidLedgerLMDB
import Synchronization

/// `kidledger relay serve`: the relay's accept loop (docs/RELAY-DESIGN.md, "Running a relay").
/// Each connection runs the `SecureChannel` as responder under the relay's device key, bound to
/// no household (the relay knows none: the zero id), then either the adoption (while no owner
/// adopted the relay), an owner change (``RelayOwnerChange``, after a recovery) or a
/// ``RelayServerSession`` with the key the channel authenticated. The
/// relay holds no ledger; everything it stores is in its ``RelayStore``.
public final class RelayServer: Sendable {
    /// Who adopted the relay, and the one-time secret while nobody has.
    public struct Adoption: Sendable {
        /// The pinned owner (nil until adopted).
        public var pin: RelayPin?
        /// The secret of the printed code (nil once adopted).
        public var secret: [UInt8]?
        /// An adoption state.
        public init(pin: RelayPin?, secret: [UInt8]?) {
            self.pin = pin
            self.secret = secret
        }
        /// The pinned owner key (nil until adopted).
        public var owner: PublicKey? { pin?.owner }
    }

    /// Connection limits: as the daemon's.
    public static let limitsDefault = Daemon.limitsDefault
    /// How long one session may take in all.
    static let sessionTotalMillis: Int64 = 600_000
    /// The most reads one session takes (a bound against a clock that stands still).
    static let readsMax = 1 << 22

    let environment: LMDBEnvironment
    let identity: Identity
    let listener: TCPListener
    let log: @Sendable (String) -> Void
    let limiter: ConnectionLimiter
    let peerTimeoutMillis: Int
    private let adoption: Mutex<Adoption>
    /// Persists the adoption (the owner pinned, the secret forgotten) or an owner change before it is answered.
    private let persist: @Sendable (RelayPin) throws -> Void
    private let activeThreads = Atomic<Int>(0)

    /// A relay serving `environment` (a ``RelayStore``'s tables) as `identity` on `listener`.
    public init(environment: LMDBEnvironment, identity: Identity, listener: TCPListener, adoption: Adoption,
                peerTimeoutMillis: Int = Daemon.peerTimeoutDefaultMillis, limits: ConnectionLimiter.Limits = RelayServer.limitsDefault,
                log: @escaping @Sendable (String) -> Void, persist: @escaping @Sendable (RelayPin) throws -> Void) {
        self.environment = environment
        self.identity = identity
        self.listener = listener
        self.adoption = Mutex(adoption)
        self.peerTimeoutMillis = peerTimeoutMillis
        self.limiter = ConnectionLimiter(limits)
        self.log = log
        self.persist = persist
    }

    /// The owner key, once adopted.
    public var owner: PublicKey? { adoption.withLock { $0.owner } }

    /// Accepts until SIGINT or SIGTERM (``Daemon/installSignalHandlers()``), then lets sessions
    /// in progress end (at most 5 s).
    public func run() {
        var refusals = RefusalLog()
        while !Daemon.stopRequested {
            for line in refusals.due(now: Monotonic.millis()) { log(line) }
            let connection: TCPConnection?
            do { connection = try listener.accept(timeoutMillis: 1_000) } catch {
                log("accept failed: \(error)")
                usleep(100_000)
                continue
            }
            guard let connection else { continue }
            switch limiter.tryAcquire(address: connection.remoteHost, evict: { connection.close() }) {
            case .success(let slot):
                activeThreads.add(1, ordering: .acquiringAndReleasing)
                Thread.detachNewThread { [self] in
                    defer { limiter.release(slot); activeThreads.subtract(1, ordering: .acquiringAndReleasing) }
                    serve(connection)
                }
            case .failure(let refusal):
                if let line = refusals.refused(connection.remote, address: connection.remoteHost, refusal.reason, now: Monotonic.millis()) {
                    log(line)
                }
                try? connection.write(SecureChannel.refusalFrame(refusal.reason), timeoutMillis: 50)
                connection.close()
            }
        }
        listener.close()
        let deadline = Monotonic.millis() + 5_000
        while activeThreads.load(ordering: .acquiring) > 0 && Monotonic.millis() < deadline { usleep(50_000) }
        log("stopped")
    }

    /// One connection: the handshake, then the adoption or a session. Never traps on peer input:
    /// every decoder throws, every loop is bounded by a read count and a deadline.
    private func serve(_ connection: TCPConnection) {
        let remote = connection.remote
        let stream: SecureStream
        do {
            // Any key may complete the handshake: the adoption checks the secret, the session the access list.
            let channel = try SecureChannel(role: .responder, identity: identity, household: .zero,
                                            seed: Sodium.randomBytes(SecureChannel.seedByteCount), authorize: { _, _, _, _ in nil })
            channel.dataFrameBytesMax = SecureChannel.unadmittedFrameBytesMax
            stream = try SecureStream.establish(channel, over: connection, timeoutMillis: peerTimeoutMillis, now: Monotonic.millis)
            channel.dataFrameBytesMax = SecureChannel.frameBytesMax
        } catch {
            connection.close()
            log("session from \(remote) refused in the handshake: \(error)")
            return
        }
        defer { stream.close() }
        let peer = stream.peerKey
        guard adoption.withLock({ $0.owner }) != nil else {
            adopt(over: stream, peer: peer)
            return
        }
        // The first frame's header decides: an owner change, or a session (the bytes go to it).
        var first: [UInt8] = []
        for _ in 0..<64 where first.count < 5 {
            guard let chunk = try? stream.read(maxBytes: 16 << 10, timeoutMillis: peerTimeoutMillis), !chunk.isEmpty else { return }
            first += chunk
        }
        if first.count >= 5 && first[4] == RelayOwnerChange.changeType { return changeOwner(over: stream, peer: peer, read: first) }
        // Read after the owner change could have re-pinned it.
        guard let pin = adoption.withLock({ $0.pin }) else { return }
        let owner = pin.owner
        let started = Monotonic.millis()
        let session = RelayServerSession(store: RelayStore(store: environment), relay: identity.publicKey, owner: owner, peer: peer,
                                         ownerStatement: pin.statement)
        let failure = Self.drive(stream, idleMillis: peerTimeoutMillis, start: session.receive(first, atMilliseconds: SystemClock().nowMillis()),
                                 receive: { session.receive($0, atMilliseconds: SystemClock().nowMillis()) },
                                 closed: { session.connectionClosed() })
        let s = session.summary
        let seconds = String(format: "%.2f", Double(Monotonic.millis() - started) / 1000)
        let what = "\(s.requests) requests, \(s.envelopesStored) envelopes stored (\(s.bytesStored) bytes), \(s.envelopesServed) served (\(s.bytesServed) bytes)"
            + (s.installed.map { ", access list \($0) installed" } ?? "") + (s.collected > 0 ? ", \(s.collected) collected" : "")
        let who = peer == owner ? "the owner" : "key \(peer.fingerprint)"
        if let failure {
            log("session from \(remote) (\(who)) failed after \(seconds) s: \(failure); \(what)")
        } else {
            log("session from \(remote) (\(who)): \(what) in \(seconds) s")
        }
    }

    /// The adoption (``RelayAdoption``): one `adopt` frame with the code's secret and a list the
    /// peer signed; the first that proves the secret becomes the owner, pinned and persisted.
    private func adopt(over stream: SecureStream, peer: PublicKey) {
        let remote = stream.remote
        func refuse(_ error: RelaySessionError) {
            try? stream.write(RelayMessage.error(code: error.code, message: error.description).frame(), timeoutMillis: 1_000)
            log("adoption from \(remote) (key \(peer.fingerprint)) refused: \(error.description)")
        }
        var decoder = FrameDecoder()
        let deadline = Monotonic.millis() + Int64(peerTimeoutMillis)
        var frame: (type: UInt8, payload: [UInt8])?
        for _ in 0..<4_096 where frame == nil {
            let left = Int(deadline - Monotonic.millis())
            guard left > 0 else { return refuse(.limitReached("no adopt within \(peerTimeoutMillis) ms")) }
            guard let chunk = try? stream.read(maxBytes: 16 << 10, timeoutMillis: left), !chunk.isEmpty else { return }
            decoder.push(chunk)
            do { frame = try decoder.next(limit: RelayAdoption.frameBytesMax) } catch {
                return refuse(.malformed("\(error)"))
            }
        }
        guard let frame, frame.type == RelayAdoption.adoptType else {
            return refuse(.unexpectedMessage("a session before an owner adopted this relay (add it with `kidledger relay add CODE` first)"))
        }
        let request: (secret: [UInt8], list: SignedRelayAccessList, recovery: PublicKey?)
        do { request = try RelayAdoption.decodeAdopt(frame.payload) } catch { return refuse(error) }
        let problem: RelaySessionError? = adoption.withLock { state in
            guard state.owner == nil, let secret = state.secret else { return .unexpectedMessage("adopt: this relay was adopted already") }
            guard RelayAdoption.constantTimeEqual(secret, request.secret) else {
                return .refusedByPeer(code: 20, message: "that relay code's secret does not match this relay's; copy the code it printed again")
            }
            do {
                let list = try request.list.verified(relay: identity.publicKey, owner: peer)
                _ = try RelayStore(store: environment).install(list)
                try persist(RelayPin(owner: peer, recovery: request.recovery))
            } catch let error as RelaySessionError {
                return error
            } catch {
                return .storage("\(error)")
            }
            state = Adoption(pin: RelayPin(owner: peer, recovery: request.recovery), secret: nil)
            return nil
        }
        if let problem { return refuse(problem) }
        try? stream.write(RelayAdoption.adoptedFrame, timeoutMillis: 5_000)
        log("adopted by owner key \(peer.fingerprint) from \(remote): the relay code is used up; serving the household's listed keys"
            + (request.recovery == nil ? " (no recovery key: it can't follow an owner change)" : ""))
    }

    /// The owner change (``RelayOwnerChange``): one `ownerChange` frame (`read` holds its first
    /// bytes) from the new owner's identity key after a recovery; applied and persisted, then
    /// answered `ownerChanged`, or refused with an `error` and nothing changed.
    private func changeOwner(over stream: SecureStream, peer: PublicKey, read: [UInt8]) {
        let remote = stream.remote
        func refuse(_ error: RelaySessionError) {
            try? stream.write(RelayMessage.error(code: error.code, message: error.description).frame(), timeoutMillis: 1_000)
            log("owner change from \(remote) (key \(peer.fingerprint)) refused: \(error.description)")
        }
        var decoder = FrameDecoder()
        decoder.push(read)
        let deadline = Monotonic.millis() + Int64(peerTimeoutMillis)
        var frame: (type: UInt8, payload: [UInt8])?
        for _ in 0..<4_096 {
            do { frame = try decoder.next(limit: RelayOwnerChange.frameBytesMax) } catch { return refuse(.malformed("\(error)")) }
            if frame != nil { break }
            let left = Int(deadline - Monotonic.millis())
            guard left > 0 else { return refuse(.limitReached("no whole owner change within \(peerTimeoutMillis) ms")) }
            guard let chunk = try? stream.read(maxBytes: 16 << 10, timeoutMillis: left), !chunk.isEmpty else { return }
            decoder.push(chunk)
        }
        guard let frame else { return }
        let outcome: Result<(RelayPin, changed: Bool), RelaySessionError> = adoption.withLock { state in
            guard let pin = state.pin else { return .failure(.unexpectedMessage("owner change before an adoption")) }
            do throws(RelaySessionError) {
                let next = try RelayOwnerChange.apply(frame.payload, relay: identity.publicKey, pin: pin, peer: peer,
                                                      store: RelayStore(store: environment), persist: persist)
                state.pin = next
                return .success((next, next != pin))
            } catch { return .failure(error) }
        }
        switch outcome {
        case .failure(let error): refuse(error)
        case .success(let (pin, changed)):
            try? stream.write(RelayOwnerChange.changedFrame(term: pin.term), timeoutMillis: 5_000)
            log(changed ? "owner changed to key \(pin.owner.fingerprint) (owner term \(pin.term), signed by the household's recovery key) from \(remote); its access list installed"
                        : "owner change from \(remote) repeated (owner term \(pin.term)): nothing to change")
        }
    }

    /// Drives a relay session (either side) over `stream`: `start`'s actions, then each chunk
    /// read into `receive`, until it finishes or fails (returned), the peer closes (`closed`),
    /// the idle time passes between reads, or ``sessionTotalMillis`` in all.
    public static func drive<S>(_ stream: any ByteStream, idleMillis: Int, start: [RelaySessionAction<S>],
                                receive: ([UInt8]) -> [RelaySessionAction<S>],
                                closed: () -> [RelaySessionAction<S>]) -> RelaySessionError? {
        let deadline = Monotonic.millis() + sessionTotalMillis
        // nil: go on; .some(nil): finished; .some(error): failed.
        func perform(_ actions: [RelaySessionAction<S>]) -> RelaySessionError?? {
            var out: [UInt8] = []
            var ended: RelaySessionError??
            for action in actions {
                switch action {
                case .send(let bytes): out += bytes
                case .finished: ended = .some(nil)
                case .failed(let error): ended = .some(error)
                }
            }
            if !out.isEmpty {
                do { try stream.write(out, timeoutMillis: idleMillis) } catch {
                    return ended ?? .some(.storage("could not send to \(stream.remote): \(error)"))
                }
            }
            return ended
        }
        if let ended = perform(start) { return ended }
        for _ in 0..<readsMax {
            let left = Int(min(Int64(idleMillis), deadline - Monotonic.millis()))
            guard left > 0 else { return outcome(perform(closed()), else: .limitReached("the session took longer than \(sessionTotalMillis / 1000) s")) }
            let chunk: [UInt8]
            do { chunk = try stream.read(maxBytes: 256 << 10, timeoutMillis: left) } catch {
                return outcome(perform(closed()), else: .storage("reading from \(stream.remote): \(error)"))
            }
            if chunk.isEmpty { return outcome(perform(closed()), else: .connectionClosed) }
            if let ended = perform(receive(chunk)) { return ended }
        }
        return outcome(perform(closed()), else: .limitReached("the session took more than \(readsMax) reads"))
    }

    /// What `ended` says (nil: finished), or `otherwise` when it did not end.
    private static func outcome(_ ended: RelaySessionError??, else otherwise: RelaySessionError) -> RelaySessionError? {
        switch ended {
        case .some(let error): error
        case .none: otherwise
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerSystem
import KidLedgerTransport

/// The joiner's side of a join through the relay (docs/RELAY-DESIGN.md, "Joining through the
/// relay"), for `join` when none of the code's addresses answers: ask the owner's laptop through
/// its mailbox, wait for its box, then download and apply the ledger as the guest key.
public enum RelayJoin {
    /// How often the joiner asks the relay whether the owner's box is there.
    public static let pollMillis: Int64 = 2_000

    /// Why a join through the relay did not finish.
    public enum Failure: Error, CustomStringConvertible {
        /// The owner's box did not come within the wait.
        case timedOut(String)
        /// The relay refused the request, or what it served does not make this home a member.
        case failed(String)

        public var description: String {
            switch self {
            case .timedOut(let s), .failed(let s): s
            }
        }
    }

    /// The guest key of `code`'s invitation for its relay.
    public static func guest(_ code: InviteCode, relay: InviteCode.Relay) throws -> Identity {
        try RelayGuestIdentity.derive(invitationKey: SecureChannel.invitationKey(secret: code.secret), relay: relay.key)
    }

    /// Leaves the join request of `me` in the owner's mailbox and asks every ``pollMillis`` until
    /// the guest key's mailbox holds an epoch box that opens for `me` with the owner's signature
    /// for this household, at most `waitMillis`. Returns its key.
    public static func awaitAdmission(_ code: InviteCode, relay: InviteCode.Relay, me: Identity, waitMillis: Int64,
                                      progress: (String) -> Void) throws(Failure) -> EpochKey {
        guard let owner = PublicKey(bytes: code.owner), let ownerRelay = RelayMemberKey(bytes: relay.ownerRelayKey),
              let guest = try? guest(code, relay: relay) else { throw .failed("the invitation's relay part is not usable") }
        var random = SystemRandomNumberGenerator()
        let box: [UInt8]
        do { box = try RelayJoinRequest.seal(joiner: me, owner: owner, household: code.household, guest: guest.publicKey, using: &random) } catch {
            throw .failed("could not seal the join request: \(error)")
        }
        let request = RelayMailboxPost(recipient: ownerRelay, epoch: RelayJoinRequest.slot(of: guest.publicKey.bytes), box: box)
        let deadline = Monotonic.millis() + waitMillis
        var filed = false, last = "no answer yet", told = false
        // Each round waits pollMillis, so the bound only guards the arithmetic.
        for _ in 0..<100_000 {
            let session = RelayGuestSession(request: filed ? nil : request, download: false)
            if let failure = run(session, relay: relay, as: guest, start: session.start()) {
                last = failure.notListed ? "the relay does not list this invitation yet" : failure.sentence
            } else {
                filed = filed || session.summary.requestFiled
                if let refused = session.summary.requestRefused { throw .failed("the relay refused the join request: \(refused)") }
                for held in session.summary.mailbox where held.epoch < RelayJoinRequest.slotMin {
                    if let key = try? EpochRecord.openBox(held.box, epoch: held.epoch, as: me, owner: owner, household: code.household) { return key }
                }
                last = filed ? "the request is with the relay; the owner's laptop has not answered" : "the request is not filed yet"
                if filed && !told {
                    progress("The request is with the relay; waiting for the owner's laptop to let this one in.")
                    told = true
                }
            }
            let left = deadline - Monotonic.millis()
            guard left > 0 else { break }
            usleep(useconds_t(min(left, pollMillis) * 1_000))
            if Monotonic.millis() >= deadline { break }
        }
        throw .timedOut(last)
    }

    /// Downloads the ledger into `replica` (the staging home, its genesis pinned) as the guest
    /// key: every envelope first, to learn the older epochs' keys from the records they carry
    /// (``RelayJoinKeys``), then member sessions that open, check and apply them as a peer's
    /// batches, until the household is here and nothing waits (at most 4). Returns the keyring.
    public static func download(into replica: Replica, _ code: InviteCode, relay: InviteCode.Relay, key: EpochKey) throws(Failure) -> EpochKeyring {
        guard let owner = PublicKey(bytes: code.owner), let relayKey = PublicKey(bytes: relay.key),
              let streamKey = try? RelayStreamKey(bytes: relay.streamKey), let guest = try? guest(code, relay: relay) else {
            throw .failed("the invitation's relay part is not usable")
        }
        let fetch = RelayGuestSession(request: nil, download: true)
        if let failure = run(fetch, relay: relay, as: guest, start: fetch.start()) { throw .failed("the relay could not be read: \(failure.sentence)") }
        let keyring = RelayJoinKeys.discover(fetch.summary.envelopes, keyring: EpochKeyring([key]), owner: owner, household: code.household)
        var random = SystemRandomNumberGenerator()
        for _ in 0..<4 {
            let setup = RelayMemberSetup(relay: relayKey, streamKey: streamKey, keyring: keyring, sealEpoch: key.epoch)
            let session = RelayMemberSession(replica: replica, setup: setup)
            if let failure = run(session, relay: relay, as: guest, start: session.start(using: &random), receive: { session.receive($0, using: &random) },
                                 closed: { session.connectionClosed() }) {
                throw .failed("the session with the relay failed: \(failure.sentence)")
            }
            if session.summary.changesDeferred == 0 || session.summary.changesApplied == 0 { break }
        }
        return keyring
    }

    /// Uploads what `replica` (now a member's) holds above the relay, as the guest key: the
    /// joiner's name and relay key, so the owner's next session lists its own key. Nil when done.
    public static func upload(_ replica: Replica, _ code: InviteCode, relay: InviteCode.Relay, identity: Identity, keyring: EpochKeyring) -> String? {
        guard let relayKey = PublicKey(bytes: relay.key), let streamKey = try? RelayStreamKey(bytes: relay.streamKey),
              let guest = try? guest(code, relay: relay) else { return "the invitation's relay part is not usable" }
        // The ledger's keyring now (its records hold a box for this member), else what the join learned.
        var merged = keyring
        if let ledger = try? replica.relayKeyring(identity: identity), (ledger.newestEpoch ?? 0) >= (keyring.newestEpoch ?? 0) { merged = ledger }
        guard let epoch = merged.newestEpoch else { return "no epoch key" }
        var random = SystemRandomNumberGenerator()
        let session = RelayMemberSession(replica: replica, setup: RelayMemberSetup(relay: relayKey, streamKey: streamKey, keyring: merged, sealEpoch: epoch))
        return run(session, relay: relay, as: guest, start: session.start(using: &random), receive: { session.receive($0, using: &random) },
                   closed: { session.connectionClosed() }).map(\.sentence)
    }

    /// Why one session with the relay did not finish.
    private struct SessionFailure {
        /// The relay refused the key (not on its list: code 10, or refused in the handshake).
        var notListed: Bool
        /// The sentence.
        var sentence: String
    }

    private static func run(_ session: RelayGuestSession, relay: InviteCode.Relay, as guest: Identity,
                            start: [RelaySessionAction<RelayGuestSummary>]) -> SessionFailure? {
        run(session, relay: relay, as: guest, start: start, receive: { session.receive($0) }, closed: { session.connectionClosed() })
    }

    private static func run<S>(_ session: AnyObject, relay: InviteCode.Relay, as guest: Identity, start: @autoclosure () -> [RelaySessionAction<S>],
                               receive: ([UInt8]) -> [RelaySessionAction<S>], closed: () -> [RelaySessionAction<S>]) -> SessionFailure? {
        let stream: SecureStream
        do { (stream, _) = try RelayDriver.connect(relay.addresses, relay: relay.key, as: guest) } catch {
            // Refused in the handshake: not listed (yet), as a refused hello is.
            if case .refusedByPeer(let message) = error { return SessionFailure(notListed: true, sentence: message) }
            return SessionFailure(notListed: false, sentence: "the relay at \(relay.addresses.joined(separator: ", ")) could not be reached")
        }
        defer { stream.close() }
        guard let failure = RelayServer.drive(stream, idleMillis: Daemon.peerTimeoutDefaultMillis, start: start(), receive: receive, closed: closed) else {
            return nil
        }
        if case .peer(let code, _) = failure, code == 10 { return SessionFailure(notListed: true, sentence: failure.description) }
        return SessionFailure(notListed: false, sentence: failure.description)
    }
}

#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerProtocol
import KidLedgerTransport
import KidLedgerLMDB
import KidLedgerSecurity
import KidLedgerSystem

/// Runs one initiator session with a peer over TCP and records the outcome in the peer's record.
public enum SyncDriver {
    /// Connect timeout for a peer.
    public static let connectTimeoutMillis = 5_000
    /// The longest the whole secure handshake may take (a busy peer answers slowly).
    public static let handshakeTimeoutMillis = 15_000

    /// The outcome of one sync with one peer.
    public struct Result {
        public var address: String
        public var outcome: SessionOutcome?
        public var connectError: TransportError?
        public var seconds: Double
        /// Bytes that crossed the wire each way (TCP payload: handshake, encryption and framing included).
        public var wireBytesSent = 0
        public var wireBytesReceived = 0
        /// The peer refused this device's revoked member and sent the revocation: what came of it.
        public var learned: LearnedRevocation?
        /// This device refused the peer's revoked member and the peer answered with owner
        /// transfers that void the revocation there: what came of them.
        public var answered: LearnedTransfers?
        /// The other device's member key, once its handshake proved it.
        public var peerKey: [UInt8]?
        /// The plain message when the two laptops share no protocol version (``VersionGap``).
        public var versionGap: String?

        public var succeeded: Bool { outcome?.summary != nil }
        /// Whether the other device refused this one (in the handshake or at admission).
        public var wasRefused: Bool {
            if case .refusedByPeer? = connectError { return true }
            if case .revokedByPeer? = connectError { return true }
            if case .refused? = outcome { return true }
            return false
        }
        public var failure: String? {
            if let learned, let connectError { return connectError.description + "; " + SyncDriver.describe(learned) }
            if let answered, let connectError { return connectError.description + "; " + SyncDriver.describe(answered) }
            if let connectError { return connectError.description }
            if let versionGap { return versionGap }
            return outcome?.errorDescription
        }
    }

    /// Which peer keys this replica accepts: members and the owner, minus revoked ones.
    public static func admissibleKeys(_ replica: Replica) -> (members: Set<[UInt8]>, revoked: Set<[UInt8]>) {
        let members = (try? replica.members()) ?? []
        return (Set(members.filter { !$0.isRevoked }.map(\.key)), Set(members.filter(\.isRevoked).map(\.key)))
    }

    /// The owner-signed revocation of a revoked member, encoded, for the channel to send with
    /// its refusal of that member (so the refused device learns it: docs/SECURITY.md). Read only
    /// when the channel refuses one: its placement in the owner's log reads the owner's changes.
    static func revocationEvidence(_ replica: Replica, revoked: Set<[UInt8]>) -> SecureChannel.Evidence {
        { key in revoked.contains(key.bytes) ? try? replica.revocation(of: key.bytes) : nil }
    }

    /// When `error` is a refusal of this device's revoked member carrying the revocation, checks it
    /// and records it if it verifies (``Replica/learnRevocation(_:of:)``); nil otherwise.
    static func learn(from error: TransportError?, in replica: Replica, identity: Identity) -> LearnedRevocation? {
        guard case .revokedByPeer(_, let revocation)? = error else { return nil }
        do { return try replica.learnRevocation(revocation, of: identity.publicKey.bytes) } catch {
            return .forged("could not record it: \(error)")
        }
    }

    /// When `error` says this device refused a revoked member and the peer answered with owner
    /// transfers, checks them and records those that verify (``Replica/learnTransfers(_:)``); nil
    /// otherwise.
    static func learnAnswer(from error: TransportError?, in replica: Replica) -> LearnedTransfers? {
        guard case .answeredRefusal(_, let transfers)? = error else { return nil }
        do { return try replica.learnTransfers(transfers) } catch {
            return .forged("could not record them: \(error)")
        }
    }

    /// The channel's answer hook: the owner transfers that void a revocation of this device's
    /// member that a peer refused it with, when they do (``Replica/transfersVoiding(_:of:)``).
    static func answer(_ replica: Replica, identity: Identity) -> SecureChannel.Answer {
        let member = identity.publicKey.bytes
        return { revocation in
            do { return try replica.transfersVoiding(revocation, of: member) } catch { return nil }
        }
    }

    /// The `--json` name of a learned revocation's outcome.
    public static func name(of learned: LearnedRevocation) -> String {
        switch learned {
        case .recorded: "recorded"
        case .alreadyKnown: "alreadyKnown"
        case .void: "void"
        case .placed: "placed"
        case .forged: "forged"
        }
    }

    /// What a learned revocation means, as a sentence for the user and the log.
    public static func describe(_ learned: LearnedRevocation) -> String {
        switch learned {
        case .recorded, .alreadyKnown:
            "it sent the owner's signed revocation of this device's membership, now recorded here: changes and sync are stopped; the data here is kept"
        case .void:
            "it sent a revocation a former owner signed after an owner transfer this device holds ended that owner's term: void here (nothing changed); this device answered with the owner transfers, so the other device can let it in"
        case .placed:
            "it sent the revocation of this device's membership with proof of where the owner's log holds it, before the owner transfer that ended the signer's term: it holds, and is kept here; changes and sync are stopped; the data here is kept"
        case .forged(let why): "it sent a revocation that does not verify (ignored, nothing changed): \(why)"
        }
    }

    /// What a refused peer's answer came to, as a sentence for the user and the log.
    public static func describe(_ answered: LearnedTransfers) -> String {
        switch answered {
        case .recorded(let count):
            "it answered with \(count) owner transfer\(count == 1 ? "" : "s") this device lacked, now recorded: the revocation it was refused for may no longer hold here; the next sync judges it again"
        case .alreadyKnown: "it answered with owner transfers this device already holds"
        case .forged(let why): "it answered with owner transfers that do not verify (ignored, nothing changed): \(why)"
        }
    }

    /// Syncs `replica` with the peer at `address` (one session inside the authenticated, encrypted
    /// channel, as `identity`), recording the result durably. With `invitationKey` and
    /// `expectedPeer` (joining), the handshake is bound to the invitation and the peer must prove
    /// that key (the owner's, from the invitation); otherwise it must be a member.
    ///
    /// When the peer refuses this device with a revocation that owner transfers held here void,
    /// the channel answers with them and the sync is tried once more (the peer records them and
    /// judges this device again: docs/SECURITY.md, "A stolen laptop").
    /// `listenPort`: where this device's own daemon accepts peers (0: none), told to the peer in
    /// `hello` so it can dial back.
    public static func sync(_ replica: Replica, household: RecordID, with address: String, identity: Identity,
                     invitationKey: [UInt8]? = nil, expectedPeer: [UInt8]? = nil, listenPort: UInt16 = 0,
                     progress: ((SessionProgress, Int) -> Void)? = nil) -> Result {
        let first = syncOnce(replica, household: household, with: address, identity: identity, invitationKey: invitationKey,
                             expectedPeer: expectedPeer, listenPort: listenPort, progress: progress)
        guard first.learned == .void else { return first }
        return syncOnce(replica, household: household, with: address, identity: identity, invitationKey: invitationKey,
                        expectedPeer: expectedPeer, listenPort: listenPort, progress: progress)
    }

    private static func syncOnce(_ replica: Replica, household: RecordID, with address: String, identity: Identity,
                                 invitationKey: [UInt8]?, expectedPeer: [UInt8]?, listenPort: UInt16,
                                 progress: ((SessionProgress, Int) -> Void)?) -> Result {
        let started = Monotonic.micros()
        var connection: TCPConnection?
        var peerKey: [UInt8]?
        var gap: VersionGap?
        func finish(_ outcome: SessionOutcome?, _ error: TransportError?) -> Result {
            var result = Result(address: address, outcome: outcome, connectError: error,
                                seconds: Double(Monotonic.micros() - started) / 1_000_000,
                                wireBytesSent: connection?.bytesSent ?? 0, wireBytesReceived: connection?.bytesReceived ?? 0,
                                learned: learn(from: error, in: replica, identity: identity),
                                answered: learnAnswer(from: error, in: replica), peerKey: peerKey)
            let laptop = VersionGap.laptop(replica, key: peerKey, address: address)
            result.versionGap = gap?.message(laptop: laptop)
            VersionGap.record(gap, message: result.versionGap ?? "", peerKey: peerKey, succeeded: result.succeeded, in: replica)
            if let summary = outcome?.summary { VersionGap.recordWithheld(summary, of: peerKey, in: replica) }
            record(result, in: replica)
            return result
        }
        let peer: PeerAddress
        do { peer = try PeerAddress(parsing: address) } catch { return finish(nil, error) }
        let connected: TCPConnection
        do { connected = try TCPConnection.connect(to: peer, timeoutMillis: connectTimeoutMillis) } catch { return finish(nil, error) }
        connection = connected
        let (members, revoked) = admissibleKeys(replica)
        let authorize: SecureChannel.Authorize = { key, _, _, _ in
            if let expectedPeer { return key.bytes == expectedPeer ? nil : "that device is not the household's owner" }
            if revoked.contains(key.bytes) { return "that device's membership was revoked" }
            return members.contains(key.bytes) ? nil : "that device is not a member of this household"
        }
        let stream: SecureStream
        do {
            let channel = try SecureChannel(role: .initiator, identity: identity, household: household,
                                            seed: Sodium.randomBytes(SecureChannel.seedByteCount),
                                            mode: invitationKey.map { .join(invitationKey: $0) } ?? .member, authorize: authorize,
                                            evidence: revocationEvidence(replica, revoked: revoked),
                                            answer: answer(replica, identity: identity))
            stream = try SecureStream.establish(channel, over: connected, timeoutMillis: handshakeTimeoutMillis, now: Monotonic.millis)
        } catch let error as TransportError {
            // What the refusal taught is recorded before the connection closes (a refused peer
            // that answered waits for the close before it tries again).
            defer { connected.close() }
            return finish(nil, error)
        } catch {
            connected.close()
            return finish(nil, .handshake("\(error)"))
        }
        peerKey = stream.peerKey.bytes
        let session = SyncSession(role: .initiator, replica: replica, household: household, listenPort: listenPort)
        let outcome = SessionRunner.run(session, over: stream, progress: progress.map { report in
            { p in report(p, session.summary.changesExpected) }
        }, now: Monotonic.millis)
        gap = VersionGap(session.failure, mine: session.versions, product: session.product)
        return finish(outcome, nil)
    }

    public static func record(_ result: Result, in replica: Replica) {
        let now = SystemClock().nowMillis()
        try? replica.device.updatePeer(result.address) { p in
            p.lastAttemptMillis = now
            if let key = result.peerKey { p.memberKey = key }
            if let summary = result.outcome?.summary {
                p.lastSuccessMillis = now
                p.lastError = ""
                p.outcome = Self.outcome(of: summary)
            } else {
                p.lastError = result.failure ?? "unknown error"
            }
        }
    }

    /// What a completed session established about its peer, as the device state keeps it.
    public static func outcome(of summary: SessionSummary) -> SyncOutcome {
        SyncOutcome(peerReplica: summary.peer, receipt: summary.peerVector,
                    childrenAgreeing: summary.childrenAgreeing.count, childrenDiffering: summary.childrenDiffering)
    }

    /// The known peers by device: the addresses of one member key (from a session or an
    /// announcement) or that reached one replica id belong together (in the order first listed);
    /// an address of no known device is one on its own.
    public static func devices(_ peers: [PeerRecord]) -> [[PeerRecord]] {
        var groups: [[PeerRecord]] = []
        var byReplica: [ReplicaID: Int] = [:]
        var byMember: [[UInt8]: Int] = [:]
        for peer in peers {
            let replica = peer.lastSuccessMillis > 0 ? peer.peerReplica : nil
            let member = peer.memberKey.isEmpty ? nil : peer.memberKey
            if let i = member.flatMap({ byMember[$0] }) ?? replica.flatMap({ byReplica[$0] }) {
                groups[i].append(peer)
                if let member { byMember[member] = byMember[member] ?? i }
                if let replica { byReplica[replica] = byReplica[replica] ?? i }
                continue
            }
            if let member { byMember[member] = groups.count }
            if let replica { byReplica[replica] = groups.count }
            groups.append([peer])
        }
        return groups
    }

    /// The key of a member's dial group (``dialGroups(_:)``).
    static func dialGroupKey(member: [UInt8]) -> String { "member " + Hex.encode(member) }

    /// Known peers as devices to dial: the laptops `status` counts (``devices(_:)``:
    /// the addresses of one member key or one replica id together), each with its addresses in
    /// the order to try them: typed ones first (a typed address is an override: it is always
    /// among the ``Daemon/addressesPerDialMax`` tried), then the last to sync, then the most
    /// recently announced, then by address. A group's key is its member's
    /// (``dialGroupKey(member:)``), else its first address.
    public static func dialGroups(_ peers: [PeerRecord]) -> [(key: String, addresses: [String])] {
        devices(peers).map { device in
            let key = device.first { !$0.memberKey.isEmpty }.map { dialGroupKey(member: $0.memberKey) } ?? "address \(device[0].address)"
            let sorted = device.sorted { a, b in
                if a.isLearned != b.isLearned { return !a.isLearned }
                if a.lastSuccessMillis != b.lastSuccessMillis { return a.lastSuccessMillis > b.lastSuccessMillis }
                if a.announcedAtMillis != b.announcedAtMillis { return a.announcedAtMillis > b.announcedAtMillis }
                return a.address < b.address
            }
            return (key, sorted.map(\.address))
        }
    }

    /// One readable line for logs: peer, changes each way, duration.
    public static func line(_ r: Result) -> String {
        if let s = r.outcome?.summary {
            let peer = s.peer.map { " (replica \($0.description.prefix(8)))" } ?? ""
            return "sync with \(TextEscaping.terminal(r.address))\(peer): sent \(s.changesSent), received \(s.changesApplied) new changes, "
                + "\(s.bytesSent + s.bytesReceived) bytes in \(formatSeconds(r.seconds))"
                + (s.childrenDiffering.isEmpty ? "" : "; children differ: \(s.childrenDiffering.count)")
                + (s.unauthenticatedReceived == 0 ? ""
                    : "; refused \(s.unauthenticatedReceived) changes no signed head of their author reaches (forged or altered: docs/SECURITY.md)")
                + (s.notAdmittedReceived == 0 ? ""
                    : "; refused \(s.notAdmittedReceived) changes of origins no member's claim opens "
                        + "(a key nobody granted, a grant not here yet, or a member over its origin limit: docs/SECURITY.md)")
                + heldBackNote(s) + withheldNote(s)
        }
        return "sync with \(TextEscaping.terminal(r.address)) failed after \(formatSeconds(r.seconds)): \(TextEscaping.terminal(r.failure ?? "unknown error"))"
    }

    /// The note a sync or session line ends with when changes were held back for clock skew.
    static func heldBackNote(_ s: SessionSummary) -> String {
        s.heldBackReceived == 0 ? ""
            : "; held back \(s.heldBackReceived) changes stamped more than an hour ahead of this laptop's clock "
                + "(check both clocks; they come in once this clock catches up: docs/CRDT.md)"
    }

    /// The note a sync or session line ends with when changes were held back from a laptop of an
    /// older protocol version.
    static func withheldNote(_ s: SessionSummary) -> String {
        s.changesWithheld == 0 ? ""
            : "; held back \(Wording.plural(s.changesWithheld, "change")) its kidledger can't read yet (it speaks sync protocol \(s.protocolVersion ?? 0): update it)"
    }

    static func formatSeconds(_ s: Double) -> String {
        let millis = Int((s * 1000).rounded())
        return "\(millis / 1000).\(String(format3(millis % 1000))) s"
    }

    static func format3(_ n: Int) -> String {
        let s = String(n)
        return String(repeating: "0", count: max(0, 3 - s.count)) + s
    }
}

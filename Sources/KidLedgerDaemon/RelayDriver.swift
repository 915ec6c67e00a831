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

/// A member's side of the relay over TCP (docs/RELAY-DESIGN.md, "Paths"): the adoption by the
/// owner, and one ``RelayMemberSession`` per dial, inside a `SecureChannel` whose identity is the
/// member's relay identity (``RelayMemberIdentity``) and whose expected peer is the relay's key.
/// Outcomes are kept in the device state (``RelayRecord``) for `status` and `relay status`.
public enum RelayDriver {
    /// The quota of every key on the owner's access list.
    public static let quotaBytes: UInt64 = 256 << 20

    /// The outcome of one relay sync.
    public struct Result: Sendable {
        /// The relay's key.
        public var relay: [UInt8]
        /// The address that answered (or the last tried).
        public var address: String
        /// The session's summary (also when it failed part way).
        public var summary = RelayMemberSummary()
        /// Why it failed; nil when it finished.
        public var failure: String?
        /// Whether the relay refused this member (not on its list, a refused adoption).
        public var refused = false
        /// Per member relay key: the vector the relay reported that member acknowledged, by origin.
        public var memberVectors: [[UInt8]: VersionVector] = [:]
        /// Changes this laptop holds that the relay lacked when the session ended (0 when it failed).
        public var relayLacks = 0
        /// Why they were not uploaded ("" when none lack, or no reason is known).
        public var lacksWhy = ""
        /// The members this session let in from join requests in the owner's mailbox.
        public var admitted: [PublicKey] = []
        /// Seconds it took.
        public var seconds = 0.0
        /// Whether it finished.
        public var succeeded: Bool { failure == nil }
    }

    /// Dials `addresses` in turn (at most ``Daemon/addressesPerDialMax``) and runs the channel
    /// handshake as `identity`, expecting the relay's key `relay`.
    static func connect(_ addresses: [String], relay: [UInt8], as identity: Identity) throws(TransportError) -> (SecureStream, String) {
        var last = TransportError.handshake("the relay has no address")
        for address in addresses.prefix(Daemon.addressesPerDialMax) {
            do { return (try dial(address, relay: relay, as: identity), address) } catch {
                last = error
                if case .refusedByPeer = error { throw error }
            }
        }
        throw last
    }

    /// One dial of ``connect(_:relay:as:)``.
    private static func dial(_ address: String, relay: [UInt8], as identity: Identity) throws(TransportError) -> SecureStream {
        let peer = try PeerAddress(parsing: address)
        let connection = try TCPConnection.connect(to: peer, timeoutMillis: SyncDriver.connectTimeoutMillis)
        let channel: SecureChannel
        do {
            channel = try SecureChannel(role: .initiator, identity: identity, household: .zero,
                                        seed: Sodium.randomBytes(SecureChannel.seedByteCount),
                                        authorize: { key, _, _, _ in key.bytes == relay ? nil : "that device is not the relay this household granted" })
        } catch {
            connection.close()
            throw .handshake("\(error)")
        }
        do { return try SecureStream.establish(channel, over: connection, timeoutMillis: SyncDriver.handshakeTimeoutMillis, now: Monotonic.millis) } catch {
            connection.close()
            throw error
        }
    }

    /// The owner adopts the relay of `code` (dialling `address` instead of the code's when given):
    /// proves the secret, installs `list` and hands the household's `recovery` public key.
    /// Returns the address that answered.
    /// - Throws: ``RelayAdoptionError`` with the sentence to show.
    public static func adopt(_ code: RelayCode, address: String?, owner: Identity, list: SignedRelayAccessList,
                             recovery: PublicKey? = nil) throws(RelayAdoptionError) -> String {
        let stream: SecureStream, used: String
        do { (stream, used) = try connect(address.map { [$0] } ?? code.addresses, relay: code.relay, as: owner) } catch {
            throw .unreachable("the relay at \((address.map { [$0] } ?? code.addresses).joined(separator: ", ")) could not be reached: \(error)")
        }
        defer { stream.close() }
        _ = try exchange(RelayAdoption.adoptFrame(secret: code.secret, list: list, recovery: recovery), over: stream, at: used,
                         expecting: RelayAdoption.adoptedType)
        return used
    }

    /// The access list the owner hands `relay`: the current members' published relay keys, each
    /// with ``quotaBytes``; the one kept in the device state when its keys are the same, else a
    /// new one numbered above it (at least the wall clock's milliseconds), kept. `extra` adds keys.
    public static func accessList(_ replica: Replica, owner: Identity, relay: [UInt8], now: Int64) throws -> SignedRelayAccessList {
        var quotas: [RelayMemberKey: UInt64] = [:]
        for published in try replica.relayMemberKeys(relay: relay) {
            if let key = RelayMemberKey(bytes: published.key) { quotas[key] = quotaBytes }
        }
        // The owner's own key even before its publication syncs anywhere.
        if let mine = RelayMemberKey(bytes: try RelayMemberIdentity.derive(from: owner, relay: relay).publicKey.bytes) { quotas[mine] = quotaBytes }
        // Joiners' guest keys (docs/RELAY-DESIGN.md, "Joining through the relay").
        let guests = try guestKeys(replica, relay: relay, now: now).filter { quotas[$0] == nil }
        for guest in guests { quotas[guest] = RelayRecord.guestQuotaBytes }
        let held = try RelayRecord.heldList(replica, relay: relay)
        if let held, let list = try? RelayAccessList.decode(held.listBytes), list.quotas == quotas, list.guests == guests { return held }
        let number = max((held?.number ?? 0) + 1, UInt64(max(now, 1)))
        let signed = SignedRelayAccessList.sign(try RelayAccessList(number: number, quotas: quotas, guests: guests), relay: PublicKey(bytes: relay)!,
                                                owner: owner)
        try RelayRecord.keep(signed, in: replica, relay: relay)
        return signed
    }

    /// The list that tells `relay` to serve nobody of this household (one random key no member
    /// holds, quota 0), numbered above the last one handed: what `relay remove` sends.
    public static func closingList(_ replica: Replica, owner: Identity, relay: [UInt8], now: Int64) throws -> SignedRelayAccessList {
        let held = try RelayRecord.heldList(replica, relay: relay)
        let nobody = RelayMemberKey(bytes: Sodium.randomBytes(32))!
        let number = max((held?.number ?? 0) + 1, UInt64(max(now, 1)))
        return SignedRelayAccessList.sign(try RelayAccessList(number: number, quotas: [nobody: 0]), relay: PublicKey(bytes: relay)!, owner: owner)
    }

    /// One session with `relay` as `identity`'s member: publishes this member's relay key when
    /// missing, and on the owner's laptop (`owner`) hands the newest access list and posts the
    /// current epoch's boxes to every published member key's mailbox. The epoch keys opened from
    /// this member's mailbox are kept (``RelayRecord/mailboxKeys(_:relay:)``) and merged into the
    /// keyring; when the session learned one and refused envelopes, one more session runs at once
    /// (`again`) to open them. A relay that refuses the owner's relay key (wiped, or restored from
    /// a copy older than the key's listing) is handed the list under the owner's identity key, which
    /// it pinned at adoption, and the session runs again. The outcome is recorded in the device state.
    ///
    /// A laptop that joined through the relay and whose own relay key the relay does not list yet
    /// runs its session as its guest key (``RelayRecord/guest(_:relay:)``), and forgets that key
    /// once its own works. The owner's session admits the join requests in its mailbox
    /// (``admitJoiners(_:replica:owner:relay:now:summary:)``) and then runs again at once, posting
    /// the new member's box to its guest key.
    public static func sync(_ replica: Replica, identity: Identity, relay: GrantedRelay, owner: Bool, now: Int64,
                            list: SignedRelayAccessList? = nil, again: Bool = true, guest: Identity? = nil) -> Result {
        let started = Monotonic.micros()
        var result = Result(relay: relay.key, address: relay.addresses.first ?? "")
        func finish(_ failure: String?, refused: Bool = false) -> Result {
            result.failure = failure
            result.refused = refused
            result.seconds = Double(Monotonic.micros() - started) / 1_000_000
            RelayRecord.record(result, in: replica, now: now)
            return result
        }
        let setup: RelayMemberSetup
        let relayIdentity: Identity
        do {
            _ = try replica.publishRelayKeys(identity: identity)
            relayIdentity = try guest ?? RelayMemberIdentity.derive(from: identity, relay: relay.key)
            let keyring = try mergedKeyring(replica, identity: identity, relay: relay.key)
            guard let epoch = keyring.newestEpoch else { return finish("this laptop holds no epoch key for the relay yet (it gets one with the owner's next membership change)") }
            let accessList = try list ?? (owner ? accessList(replica, owner: identity, relay: relay.key, now: now) : nil)
            setup = RelayMemberSetup(relay: PublicKey(bytes: relay.key)!, streamKey: try RelayStreamKey(bytes: relay.streamKey), keyring: keyring,
                                     sealEpoch: epoch, accessList: accessList,
                                     posts: owner ? try mailboxPosts(replica, relay: relay.key, owner: identity) + admittedPosts(replica, relay: relay.key, now: now) : [])
        } catch {
            return finish("could not prepare the relay session: \(error)")
        }
        // After a recovery: the statement re-pins the relay's owner before the first session.
        if owner, let problem = changeOwner(replica, identity: identity, relay: relay, list: setup.accessList) {
            return finish(problem.failure, refused: problem.refused)
        }
        let stream: SecureStream
        do { (stream, result.address) = try connect(relay.addresses, relay: relay.key, as: relayIdentity) } catch {
            let refused: Bool
            if case .refusedByPeer = error { refused = true } else { refused = false }
            return finish("\(error)", refused: refused)
        }
        let session = RelayMemberSession(replica: replica, setup: setup)
        var random = SystemRandomNumberGenerator()
        let failure = RelayServer.drive(stream, idleMillis: Daemon.peerTimeoutDefaultMillis, start: session.start(using: &random),
                                        receive: { session.receive($0, using: &random) }, closed: { session.connectionClosed() })
        stream.close()
        result.summary = session.summary
        for report in session.summary.members { result.memberVectors[report.status.key.bytes] = try? session.versionVector(of: report.acknowledged) }
        let learned = keepMailbox(session.summary.mailbox, statement: session.summary.ownerStatement, replica: replica, identity: identity,
                                  relay: relay.key, held: setup.keyring, summary: &result.summary)
        if owner {
            result.admitted = admitJoiners(session.summary.mailbox, replica: replica, owner: identity, relay: relay.key, now: now, summary: &result.summary)
        }
        if failure == nil, guest == nil, RelayRecord.guest(replica, relay: relay.key) != nil {
            // This laptop's own relay key works: its guest key is no longer needed.
            try? RelayRecord.keepGuest(nil, in: replica, relay: relay.key)
        }
        if let failure {
            if case .peer(let code, _) = failure, code == 10 {
                if !owner, guest == nil, let joined = RelayRecord.guest(replica, relay: relay.key) {
                    return sync(replica, identity: identity, relay: relay, owner: owner, now: now, list: list, again: again, guest: joined)
                }
                if owner, again, let handed = setup.accessList, install(handed, relay: relay, as: identity) {
                    var retried = sync(replica, identity: identity, relay: relay, owner: owner, now: now, list: list, again: false)
                    // Handed already (a closing list refuses the owner's relay key in the retry).
                    if retried.summary.installedAccessList == nil { retried.summary.installedAccessList = handed.number }
                    return retried
                }
                return finish("the relay refused this laptop: \(failure)", refused: true)
            }
            return finish("the session with the relay at \(result.address) failed: \(failure)")
        }
        (result.relayLacks, result.lacksWhy) = lacks(replica, relay: relay, summary: result.summary)
        let first = finish(nil)
        guard again, (learned > 0 && first.summary.envelopesRefused > 0) || !first.admitted.isEmpty else { return first }
        // The envelopes refused for want of the key just learned (the change carrying the new
        // epoch's record among them), or the admission's change and the new member's box.
        var second = sync(replica, identity: identity, relay: relay, owner: owner, now: now, list: list, again: false, guest: guest)
        second.admitted = first.admitted + second.admitted
        // What the first session moved counts too (its refusals were opened by the second).
        let f = first.summary
        second.summary.envelopesUploaded += f.envelopesUploaded
        second.summary.changesUploaded += f.changesUploaded
        second.summary.envelopesReceived += f.envelopesReceived
        second.summary.changesApplied += f.changesApplied
        second.summary.boxesPosted += f.boxesPosted
        second.summary.bytesSent += f.bytesSent
        second.summary.bytesReceived += f.bytesReceived
        second.seconds += first.seconds
        return second
    }

    /// The owner hands `list` to `relay` under its identity key, which the relay pinned at adoption
    /// and serves for an install although it is on no list: hello, install, bye (nothing else, as
    /// that key may do nothing else). Whether the relay installed it.
    static func install(_ list: SignedRelayAccessList, relay: GrantedRelay, as owner: Identity) -> Bool {
        guard let (stream, _) = try? connect(relay.addresses, relay: relay.key, as: owner) else { return false }
        defer { stream.close() }
        var decoder = FrameDecoder()
        func ask(_ message: RelayMessage) -> RelayMessage? {
            do { try stream.write(message.frame(), timeoutMillis: SyncDriver.handshakeTimeoutMillis) } catch { return nil }
            for _ in 0..<1_024 {
                do {
                    if let frame = try decoder.next(limit: frameBytesMax) { return try RelayMessage.decode(type: frame.type, payload: frame.payload) }
                    let chunk = try stream.read(maxBytes: 64 << 10, timeoutMillis: SyncDriver.handshakeTimeoutMillis)
                    guard !chunk.isEmpty else { return nil }
                    decoder.push(chunk)
                } catch { return nil }
            }
            return nil
        }
        guard case .welcome? = ask(.hello(versionMin: RelayMessage.versionMin, versionMax: RelayMessage.versionMax)),
              case .installed? = ask(.install(list)) else { return false }
        _ = ask(.bye)
        return true
    }

    /// The changes this laptop holds above what the relay held when the session ended (per origin,
    /// its sequence above the relay's held one of its stream), and why the session left them.
    static func lacks(_ replica: Replica, relay: GrantedRelay, summary: RelayMemberSummary) -> (Int, String) {
        guard let streamKey = try? RelayStreamKey(bytes: relay.streamKey), let vector = try? replica.versionVector() else { return (0, "") }
        var count: UInt64 = 0
        for (origin, sequence) in vector {
            let held = summary.relayHeld[streamKey.tag(of: origin)] ?? 0
            if sequence > held { count += sequence - held }
        }
        guard count > 0 else { return (0, "") }
        let why = summary.uploadsOverQuota ? "its storage for this household is full"
            : summary.runsTooLarge > 0 ? "a change is too large for the relay to carry"
            : summary.requestsRefused > 0 ? "it refused an upload" : "more than one sync can carry: the next sync sends the rest"
        return (Int(min(count, UInt64(Int.max))), why)
    }

    /// The keyring of `identity` from the ledger's epoch records, with the keys this laptop opened
    /// from its mailbox on `relay` that the ledger does not give yet.
    static func mergedKeyring(_ replica: Replica, identity: Identity, relay: [UInt8]) throws -> EpochKeyring {
        var keyring = try replica.relayKeyring(identity: identity)
        for key in try RelayRecord.mailboxKeys(replica, relay: relay) where keyring[key.epoch] == nil { keyring.insert(key) }
        return keyring
    }

    /// The owner's posts: the current epoch's box of each other current member that published a
    /// key for `relay`, to that key's mailbox (the relay keeps the first box of an epoch; a repost
    /// is a replay it ignores).
    static func mailboxPosts(_ replica: Replica, relay: [UInt8], owner: Identity) throws -> [RelayMailboxPost] {
        guard let current = try replica.currentRelayEpoch() else { return [] }
        var posts: [RelayMailboxPost] = []
        for published in try replica.relayMemberKeys(relay: relay) where published.member != owner.publicKey.bytes {
            guard let member = PublicKey(bytes: published.member), let box = current.record.box(for: member),
                  let recipient = RelayMemberKey(bytes: published.key) else { continue }
            posts.append(RelayMailboxPost(recipient: recipient, epoch: current.record.epoch, box: box))
        }
        return posts
    }

    /// Opens the boxes of this member's mailbox whose epoch `held` lacks, each checked against the
    /// owner's signature for this household, epoch and member (``EpochRecord/openBox(_:epoch:as:owner:household:)``),
    /// and keeps the keys in the device state. The owner is the one this laptop's ledger names,
    /// or the new owner of the relay's `statement` when that verifies under the recovery key of
    /// this laptop's own genesis for this relay and starts a later term than the ledger's owner
    /// (a recovery this laptop has not synced yet: the change carrying it is sealed under the new
    /// owner's epoch). A box that does not open or is neither's is refused (a sentence in
    /// `summary`) and nothing of it kept. Returns the keys kept.
    static func keepMailbox(_ boxes: [RelayMailboxBox], statement: RelayOwnerStatement?, replica: Replica, identity: Identity, relay: [UInt8],
                            held: EpochKeyring, summary: inout RelayMemberSummary) -> Int {
        // Epochs from 2^31 up are join requests (the owner's mailbox), not keys.
        let fresh = boxes.filter { held[$0.epoch] == nil && $0.epoch < RelayJoinRequest.slotMin }
        if fresh.isEmpty {
            // Forget the kept keys the ledger gives now (the secret stays in one place only).
            if let kept = try? RelayRecord.mailboxKeys(replica, relay: relay), !kept.isEmpty {
                try? RelayRecord.keepMailboxKeys([], in: replica, relay: relay, identity: identity)
            }
            return 0
        }
        guard let ownership = try? replica.ownership(), let owner = PublicKey(bytes: ownership.owner),
              let household = try? replica.household()?.id else { return 0 }
        let recovered = statement.flatMap { recoveredOwner($0, replica: replica, relay: relay, ownerEpoch: ownership.epoch) }
        var opened: [EpochKey] = []
        for box in fresh {
            do {
                do { opened.append(try EpochRecord.openBox(box.box, epoch: box.epoch, as: identity, owner: owner, household: household)) } catch {
                    guard let recovered else { throw error }
                    opened.append(try EpochRecord.openBox(box.box, epoch: box.epoch, as: identity, owner: recovered, household: household))
                }
            } catch {
                summary.refusals.append("relay \(PublicKey(bytes: relay)?.fingerprint ?? "?"): the mailbox's box of epoch \(box.epoch) refused: \(error); nothing of it was kept")
            }
        }
        guard !opened.isEmpty, (try? RelayRecord.keepMailboxKeys(opened, in: replica, relay: relay, identity: identity)) != nil else { return 0 }
        return opened.count
    }

    /// The new owner `statement` names, when it verifies for `relay` under the recovery key of
    /// this laptop's own genesis and starts a later term than `ownerEpoch` (the transfer epoch of
    /// the owner the ledger names); nil otherwise.
    static func recoveredOwner(_ statement: RelayOwnerStatement, replica: Replica, relay: [UInt8], ownerEpoch: UInt64) -> PublicKey? {
        guard statement.term > ownerEpoch, let relayKey = PublicKey(bytes: relay),
              let recovery = (try? replica.genesis())??.recovery, let recoveryKey = PublicKey(bytes: recovery),
              statement.verifies(relay: relayKey, recovery: recoveryKey) else { return nil }
        return statement.newOwner
    }

    /// One line for the log and `relay sync`.
    public static func line(_ r: Result) -> String {
        let s = r.summary
        let counts = "\(s.changesUploaded) changes up (\(s.envelopesUploaded) envelopes), \(s.changesApplied) changes down (\(s.envelopesReceived) envelopes)"
            + (s.changesDeferred > 0 ? ", \(s.changesDeferred) deferred" : "") + (s.installedAccessList.map { ", access list \($0) installed" } ?? "")
            + (s.envelopesRefused > 0 ? ", \(s.envelopesRefused) envelopes refused" : "")
        let refusals = (r.admitted.isEmpty ? "" : "; let in " + r.admitted.map { "member \($0.fingerprint)" }.joined(separator: ", ")
            + " through the relay") + (s.refusals.isEmpty ? "" : "; " + s.refusals.prefix(3).joined(separator: "; "))
        if let failure = r.failure { return "relay \(r.address): \(failure)" + refusals }
        return "relay \(r.address): \(counts) in \(String(format: "%.2f", r.seconds)) s" + refusals
    }
}

/// Why an adoption failed, as the sentence to show.
public enum RelayAdoptionError: Error, CustomStringConvertible {
    /// Not reached, or the connection broke.
    case unreachable(String)
    /// The relay answered with a refusal.
    case refused(String)

    public var description: String {
        switch self {
        case .unreachable(let s), .refused(let s): s
        }
    }
}

/// What this laptop keeps about each relay in its device state (settings, never synced):
/// the access list it handed last (owner) and how the last session went, with what the relay told
/// of each member (`relay.list.RELAYHEX`, `relay.last.RELAYHEX`).
public enum RelayRecord {
    /// How the last session with one relay went.
    public struct Last: Equatable, Sendable {
        /// When it was tried, and when one last finished (0: never).
        public var attemptMillis: Int64 = 0, successMillis: Int64 = 0
        /// Where it was dialled.
        public var address = ""
        /// Why the last one failed ("" when it finished), and whether the relay refused.
        public var error = "", refused = false
        /// Per member identity key (hex): when the relay last saw that member sync (ms; 0: never).
        public var members: [String: Int64] = [:]
        /// After the last session that finished: the relay's access list number, its held
        /// sequence per stream (tag hex), the changes this laptop held that it lacked and why.
        public var listNumber: UInt64 = 0, held: [String: UInt64] = [:], lacks = 0, lacksWhy = ""
        /// Per member identity key (hex): what the relay last reported it acknowledged (by origin).
        public var vectors: [String: VersionVector] = [:]
        /// The last finished session that found the relay holding less than the one before
        /// (an older or no access list, or a lower held sequence under the same list): 0 never.
        public var lostMillis: Int64 = 0

        /// An empty record.
        public init() {}
    }

    /// A day: a relay not synced with for longer is out of date.
    public static let staleMillis: Int64 = 24 * 3_600_000
    /// Most epoch keys kept from a mailbox (a mailbox holds at most 16 boxes).
    static let mailboxKeysMax = 16

    static func listSetting(_ relay: [UInt8]) -> String { "relay.list." + Hex.encode(relay) }
    static func keysSetting(_ relay: [UInt8]) -> String { "relay.keys." + Hex.encode(relay) }
    static func lastSetting(_ relay: [UInt8]) -> String { "relay.last." + Hex.encode(relay) }

    /// The access list handed to `relay` last (nil: none, or unreadable).
    public static func heldList(_ replica: Replica, relay: [UInt8]) throws -> SignedRelayAccessList? {
        guard let hex = try replica.device.setting(listSetting(relay)), let bytes = Hex.decode(hex) else { return nil }
        return try? SignedRelayAccessList.decode(bytes)
    }

    /// Keeps `list` as the one handed to `relay`.
    public static func keep(_ list: SignedRelayAccessList, in replica: Replica, relay: [UInt8]) throws {
        try replica.device.setSetting(listSetting(relay), Hex.encode(list.encoded))
    }

    /// Records `result` (best effort): times, error, and the members the relay reported, mapped
    /// from their relay keys to identity keys through the ledger.
    static func record(_ result: RelayDriver.Result, in replica: Replica, now: Int64) {
        var last = (try? self.last(replica, relay: result.relay)) ?? Last()
        last.attemptMillis = now
        last.address = result.address
        last.error = result.failure ?? ""
        last.refused = result.refused
        if result.succeeded {
            let byKey = Dictionary(((try? replica.relayMemberKeys(relay: result.relay)) ?? []).map { ($0.key, $0.member) }, uniquingKeysWith: { a, _ in a })
            for report in result.summary.members {
                guard let member = byKey[report.status.key.bytes] else { continue }
                last.members[Hex.encode(member)] = report.status.lastSyncMilliseconds ?? 0
                if let vector = result.memberVectors[report.status.key.bytes] { last.vectors[Hex.encode(member)] = vector }
            }
            let summary = result.summary
            if last.successMillis > 0 && lost(since: last, welcomeList: summary.relayAccessList ?? 0, welcomeHeld: summary.relayHeldAtWelcome) {
                last.lostMillis = now
            }
            last.successMillis = now
            last.listNumber = summary.installedAccessList ?? summary.relayAccessList ?? 0
            last.held = Dictionary(summary.relayHeld.map { (Hex.encode($0.key.bytes), $0.value) }, uniquingKeysWith: max)
            last.lacks = result.relayLacks
            last.lacksWhy = result.lacksWhy
        }
        try? replica.device.setSetting(lastSetting(result.relay), encode(last))
    }

    /// Whether the relay, at a session's welcome, held less than `previous` (the last finished
    /// session) left it holding: no access list or an older one (wiped, or restored from an old
    /// copy), or under the same list a lower held sequence of a stream. A newer list may lower the
    /// held sequences lawfully (a new member has acknowledged nothing), so it is not a loss.
    static func lost(since previous: Last, welcomeList: UInt64, welcomeHeld: [RelayStreamTag: UInt64]) -> Bool {
        if welcomeList < previous.listNumber { return true }
        guard welcomeList == previous.listNumber else { return false }
        let now = Dictionary(welcomeHeld.map { (Hex.encode($0.key.bytes), $0.value) }, uniquingKeysWith: max)
        return previous.held.contains { tag, sequence in (now[tag] ?? 0) < sequence }
    }

    /// Whether this laptop holds changes (by `vector`) above what the relay held when its last
    /// finished session with `relay` ended: what a session would upload now. False before any.
    public static func behind(_ replica: Replica, relay: GrantedRelay, vector: VersionVector) -> Bool {
        guard let last = try? last(replica, relay: relay.key), last.successMillis > 0,
              let streamKey = try? RelayStreamKey(bytes: relay.streamKey) else { return false }
        return vector.contains { origin, sequence in sequence > last.held[Hex.encode(streamKey.tag(of: origin).bytes)] ?? 0 }
    }

    /// Why the relay is out of date as this laptop last saw it (one sentence for a parent), or nil:
    /// after the last session that finished it still lacked changes this laptop holds, or that
    /// session found it had lost changes it held (wiped, or restored from an old copy), or that
    /// session is more than a day old. Nil before any session finished (the reach says why).
    public static func outOfDate(_ last: Last, now: Int64) -> String? {
        guard last.successMillis > 0 else { return nil }
        let lost = last.lostMillis == last.successMillis
        if last.lacks > 0 {
            return "The relay lacks \(last.lacks) \(last.lacks == 1 ? "change" : "changes") this laptop holds"
                + (last.lacksWhy.isEmpty ? "" : ": \(last.lacksWhy)") + (lost ? " (it had lost what it held: wiped, or restored from an old copy)" : "") + "."
        }
        if lost {
            return "The relay had lost changes it held (wiped, or restored from an old copy); this laptop sent back what it holds, and the other laptops send the rest when they next sync with it."
        }
        if now - last.successMillis > staleMillis {
            return "This laptop last synced with the relay more than a day ago, so the relay may lack what was written here since."
        }
        return nil
    }

    /// Per member identity key: what the relays last reported it acknowledged (the greatest of
    /// the granted relays' reports, origin by origin).
    public static func memberVectors(_ replica: Replica) throws -> [[UInt8]: VersionVector] {
        var vectors: [[UInt8]: VersionVector] = [:]
        for relay in try replica.relays() {
            for (member, vector) in try last(replica, relay: relay.key)?.vectors ?? [:] {
                guard let key = Hex.decode(member) else { continue }
                vectors[key, default: [:]].merge(vector, uniquingKeysWith: max)
            }
        }
        return vectors
    }

    /// The epoch keys this laptop opened from its mailbox on `relay` and keeps until the ledger
    /// gives them (device state `relay.keys.RELAYHEX`, never synced: "epoch keyhex" lines).
    public static func mailboxKeys(_ replica: Replica, relay: [UInt8]) throws -> [EpochKey] {
        guard let text = try replica.device.setting(keysSetting(relay)) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 2, let epoch = UInt32(parts[0]), let bytes = Hex.decode(String(parts[1])) else { return nil }
            return try? EpochKey(epoch: epoch, bytes: bytes)
        }
    }

    /// Adds `keys` to those kept for `relay`, dropping the epochs the ledger's records give
    /// `identity` now and all but the ``mailboxKeysMax`` newest; writes nothing when that changes nothing.
    static func keepMailboxKeys(_ keys: [EpochKey], in replica: Replica, relay: [UInt8], identity: Identity) throws {
        let ledger = try replica.relayKeyring(identity: identity)
        var byEpoch: [UInt32: EpochKey] = [:]
        for key in try mailboxKeys(replica, relay: relay) + keys where ledger[key.epoch] == nil { byEpoch[key.epoch] = key }
        let kept = byEpoch.keys.sorted(by: >).prefix(mailboxKeysMax).sorted().map { "\($0) \(Hex.encode(byEpoch[$0]!.bytes))" }
        let text = kept.joined(separator: "\n")
        // Written only when it changes: a kept key may wait several sessions for its ledger record.
        guard try replica.device.setting(keysSetting(relay)) ?? "" != text else { return }
        try replica.device.setSetting(keysSetting(relay), text)
    }

    /// The last session's record for `relay` (nil: none).
    public static func last(_ replica: Replica, relay: [UInt8]) throws -> Last? {
        try replica.device.setting(lastSetting(relay)).map(decode)
    }

    /// Lines: "attempt success refused", the address, the error, then "memberhex millis" each,
    /// "x listNumber lacks lostMillis", "w why" (when lacking), "h taghex sequence" each and
    /// "v memberhex origin:sequence,…" each.
    static func encode(_ last: Last) -> String {
        var lines = ["\(last.attemptMillis) \(last.successMillis) \(last.refused ? 1 : 0)", last.address,
                     last.error.replacingNewlines()]
        for (member, millis) in last.members.sorted(by: { $0.key < $1.key }) { lines.append("\(member) \(millis)") }
        lines.append("x \(last.listNumber) \(last.lacks) \(last.lostMillis)")
        if !last.lacksWhy.isEmpty { lines.append("w " + last.lacksWhy.replacingNewlines()) }
        for (tag, sequence) in last.held.sorted(by: { $0.key < $1.key }) { lines.append("h \(tag) \(sequence)") }
        for (member, vector) in last.vectors.sorted(by: { $0.key < $1.key }) {
            lines.append("v \(member) " + vector.sorted { $0.key < $1.key }.map { "\($0.key.rawValue):\($0.value)" }.joined(separator: ","))
        }
        return lines.joined(separator: "\n")
    }

    static func decode(_ text: String) -> Last {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var last = Last()
        let head = (lines.first ?? "").split(separator: " ")
        if head.count == 3 {
            last.attemptMillis = Int64(head[0]) ?? 0
            last.successMillis = Int64(head[1]) ?? 0
            last.refused = head[2] == "1"
        }
        if lines.count > 1 { last.address = lines[1] }
        if lines.count > 2 { last.error = lines[2] }
        for line in lines.dropFirst(3) {
            let parts = line.split(separator: " ")
            if line.hasPrefix("w ") { last.lacksWhy = String(line.dropFirst(2)); continue }
            if parts.count == 4, parts[0] == "x" {
                last.listNumber = UInt64(parts[1]) ?? 0
                last.lacks = Int(parts[2]) ?? 0
                last.lostMillis = Int64(parts[3]) ?? 0
            } else if parts.count >= 2, parts.count <= 3, parts[0] == "v" {
                var vector: VersionVector = [:]
                for entry in (parts.count == 3 ? parts[2] : "").split(separator: ",") {
                    let pair = entry.split(separator: ":")
                    if pair.count == 2, let origin = UInt64(pair[0]), let sequence = UInt64(pair[1]) { vector[ReplicaID(origin)] = sequence }
                }
                last.vectors[String(parts[1])] = vector
            } else if parts.count == 3, parts[0] == "h", let sequence = UInt64(parts[2]) {
                last.held[String(parts[1])] = sequence
            } else if parts.count == 2, let millis = Int64(parts[1]) {
                last.members[String(parts[0])] = millis
            }
        }
        return last
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        String(map { $0.isNewline ? " " : $0 })
    }
}

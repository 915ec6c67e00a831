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
        let held = try RelayRecord.heldList(replica, relay: relay)
        if let held, let list = try? RelayAccessList.decode(held.listBytes), list.quotas == quotas { return held }
        let number = max((held?.number ?? 0) + 1, UInt64(max(now, 1)))
        let signed = SignedRelayAccessList.sign(try RelayAccessList(number: number, quotas: quotas), relay: PublicKey(bytes: relay)!, owner: owner)
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
    /// missing, and on the owner's laptop (`owner`) hands the newest access list. The outcome is
    /// recorded in the device state.
    public static func sync(_ replica: Replica, identity: Identity, relay: GrantedRelay, owner: Bool, now: Int64,
                            list: SignedRelayAccessList? = nil) -> Result {
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
            relayIdentity = try RelayMemberIdentity.derive(from: identity, relay: relay.key)
            let keyring = try replica.relayKeyring(identity: identity)
            guard let epoch = keyring.newestEpoch else { return finish("this laptop holds no epoch key for the relay yet (it gets one with the owner's next membership change)") }
            let accessList = try list ?? (owner ? accessList(replica, owner: identity, relay: relay.key, now: now) : nil)
            setup = RelayMemberSetup(relay: PublicKey(bytes: relay.key)!, streamKey: try RelayStreamKey(bytes: relay.streamKey), keyring: keyring,
                                     sealEpoch: epoch, accessList: accessList)
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
        defer { stream.close() }
        let session = RelayMemberSession(replica: replica, setup: setup)
        var random = SystemRandomNumberGenerator()
        let failure = RelayServer.drive(stream, idleMillis: Daemon.peerTimeoutDefaultMillis, start: session.start(using: &random),
                                        receive: { session.receive($0, using: &random) }, closed: { session.connectionClosed() })
        result.summary = session.summary
        guard let failure else { return finish(nil) }
        if case .peer(let code, _) = failure, code == 10 { return finish("the relay refused this laptop: \(failure)", refused: true) }
        return finish("the session with the relay at \(result.address) failed: \(failure)")
    }

    /// One line for the log and `relay sync`.
    public static func line(_ r: Result) -> String {
        let s = r.summary
        let counts = "\(s.changesUploaded) changes up (\(s.envelopesUploaded) envelopes), \(s.changesApplied) changes down (\(s.envelopesReceived) envelopes)"
            + (s.changesDeferred > 0 ? ", \(s.changesDeferred) deferred" : "") + (s.installedAccessList.map { ", access list \($0) installed" } ?? "")
            + (s.envelopesRefused > 0 ? ", \(s.envelopesRefused) envelopes refused" : "")
        let refusals = s.refusals.isEmpty ? "" : "; " + s.refusals.prefix(3).joined(separator: "; ")
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

        /// An empty record.
        public init() {}
    }

    static func listSetting(_ relay: [UInt8]) -> String { "relay.list." + Hex.encode(relay) }
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
            last.successMillis = now
            let byKey = Dictionary(((try? replica.relayMemberKeys(relay: result.relay)) ?? []).map { ($0.key, $0.member) }, uniquingKeysWith: { a, _ in a })
            for report in result.summary.members {
                guard let member = byKey[report.status.key.bytes] else { continue }
                last.members[Hex.encode(member)] = report.status.lastSyncMilliseconds ?? 0
            }
        }
        try? replica.device.setSetting(lastSetting(result.relay), encode(last))
    }

    /// The last session's record for `relay` (nil: none).
    public static func last(_ replica: Replica, relay: [UInt8]) throws -> Last? {
        try replica.device.setting(lastSetting(relay)).map(decode)
    }

    /// Lines: "attempt success refused", the address, the error, then "memberhex millis" each.
    static func encode(_ last: Last) -> String {
        var lines = ["\(last.attemptMillis) \(last.successMillis) \(last.refused ? 1 : 0)", last.address,
                     last.error.replacingNewlines()]
        for (member, millis) in last.members.sorted(by: { $0.key < $1.key }) { lines.append("\(member) \(millis)") }
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
            if parts.count == 2, let millis = Int64(parts[1]) { last.members[String(parts[0])] = millis }
        }
        return last
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        String(map { $0.isNewline ? " " : $0 })
    }
}

import KidLedgerDomain

/// The state of this device that is never replicated: the peers it syncs with, the invitations
/// it has handed out, and its settings. It lives in the same store as the replica (its own
/// tables, outside the digest and the change log), so the ledger (``Replica``) never reads it and
/// syncing never sends it.
///
/// Each method is one transaction of its own.
public struct DeviceState {
    /// The store that holds the tables (the replica's).
    public let store: any KeyValueStore
    /// When peers are added and invitations expire.
    let clock: any WallClock

    /// The device state held in `store`, timed by `clock`.
    public init(store: any KeyValueStore, clock: any WallClock) {
        self.store = store
        self.clock = clock
    }

    // MARK: Peers

    /// Known peers, by address.
    public func peers() throws -> [PeerRecord] {
        try store.read { r in
            var result: [PeerRecord] = []
            try r.scan(Tables.peers) { _, value in
                result.append(try PeerRecord.decode(value))
                return true
            }
            return result
        }
    }

    /// Adds a peer; returns false when it was already known.
    @discardableResult
    public func addPeer(_ address: String) throws -> Bool {
        let now = clock.nowMillis()
        return try store.write { w in
            let key = Array(address.utf8)
            if try w.get(Tables.peers, key) != nil { return false }
            try w.put(Tables.peers, key, PeerRecord(address: address, addedAtMillis: now).encoded())
            return true
        }
    }

    /// Forgets a peer; returns false when it was not known.
    @discardableResult
    public func removePeer(_ address: String) throws -> Bool {
        try store.write { w in
            let key = Array(address.utf8)
            guard try w.get(Tables.peers, key) != nil else { return false }
            try w.delete(Tables.peers, key)
            return true
        }
    }

    /// Updates a known peer's record (durably); a peer removed meanwhile stays removed.
    public func updatePeer(_ address: String, _ change: (inout PeerRecord) -> Void) throws {
        try store.write { w in
            let key = Array(address.utf8)
            guard let raw = try w.get(Tables.peers, key) else { return }
            var record = try PeerRecord.decode(raw)
            change(&record)
            try w.put(Tables.peers, key, record.encoded())
        }
    }

    /// How long a learned address of a device is kept once the device announces another one
    /// (it may still hold both, on two interfaces), in milliseconds.
    public static let learnedAliasKeepMillis: Int64 = 120_000
    /// How long a learned address nothing announced is kept, in milliseconds (a laptop away for
    /// a week is found again by its next announcement).
    public static let learnedAddressKeepMillis: Int64 = 7 * 24 * 3_600_000

    /// Records that the device of `member` accepts peers at `address`, as `source` says (a LAN
    /// announcement, or the `hello` of a session it opened): the address's record gets the key and
    /// the time (a typed record stays typed; one learned from a session becomes one an
    /// announcement named, never the other way), or a new learned record is added. Learned
    /// addresses of the same member not named again within ``learnedAliasKeepMillis``, and any
    /// learned address not named within ``learnedAddressKeepMillis``, are forgotten: an address
    /// change replaces the old address. Returns true when the address was not known before (a
    /// peer to dial now), or was known only from a session and an announcement now names it
    /// (discovery found it: its log says so).
    @discardableResult
    public func learnAddress(_ address: String, member: [UInt8], from source: AddressSource = .announcement) throws -> Bool {
        precondition(source != .typed, "a typed address is added with addPeer")
        let now = clock.nowMillis()
        return try store.write { w in
            var stale: [[UInt8]] = []
            try w.scan(Tables.peers) { key, value in
                let p = try PeerRecord.decode(value)
                guard p.isLearned, p.address != address else { return true }
                let age = now - p.announcedAtMillis
                if age > Self.learnedAddressKeepMillis || (p.memberKey == member && age > Self.learnedAliasKeepMillis) {
                    stale.append(key)
                }
                return true
            }
            for key in stale { try w.delete(Tables.peers, key) }
            let key = Array(address.utf8)
            var record: PeerRecord
            let isNew: Bool
            if let raw = try w.get(Tables.peers, key) {
                record = try PeerRecord.decode(raw)
                isNew = false
            } else {
                record = PeerRecord(address: address, addedAtMillis: now)
                record.learnedFrom = source
                isNew = true
            }
            var found = isNew
            if record.learnedFrom == .session && source == .announcement {
                record.learnedFrom = .announcement
                found = true
            }
            record.memberKey = member
            record.announcedAtMillis = now
            try w.put(Tables.peers, key, record.encoded())
            return found
        }
    }

    // MARK: Invitations

    /// The most invitations open at once: a joiner's handshake tries each one's key
    /// (`SecureChannel.invitationsMax`).
    public static let openInvitesMax = 16
    /// The first byte of an invitation row's value (rows of version 1 held the SHA-256 of the
    /// secret, not its key, and an expiry alone: they are ignored and swept).
    static let inviteRowVersion: UInt8 = 2

    /// Records an open invitation by its key (`SecureChannel.invitationKey(secret:)`, never the
    /// secret); false, recording nothing, when ``openInvitesMax`` are open already. Expired
    /// invitations (and rows of an older version) are swept first.
    @discardableResult
    public func addInvite(key: [UInt8], expiresAtMillis: Int64) throws -> Bool {
        let now = clock.nowMillis()
        return try store.write { w in
            guard try sweepInvites(w, now: now).count < Self.openInvitesMax else { return false }
            var v = ByteWriter(capacity: 9)
            v.write(Self.inviteRowVersion)
            v.write(orderedSigned: expiresAtMillis)
            try w.put(Tables.invites, key, v.bytes)
            return true
        }
    }

    /// The keys of the open, unexpired invitations (at most ``openInvitesMax``) with their expiry.
    public func openInvites() throws -> [(key: [UInt8], expiresAtMillis: Int64)] {
        let now = clock.nowMillis()
        return try store.read { r in
            var open: [(key: [UInt8], expiresAtMillis: Int64)] = []
            try r.scan(Tables.invites) { key, value in
                if let expiry = try Self.inviteExpiry(value), expiry >= now { open.append((key, expiry)) }
                return open.count < Self.openInvitesMax
            }
            return open
        }
    }

    /// Uses up an invitation: true when `key` names an open, unexpired one (which is then
    /// deleted, so a code works once); false otherwise. Expired invitations are swept.
    public func consumeInvite(key: [UInt8]) throws -> Bool {
        let now = clock.nowMillis()
        return try store.write { w in
            guard try sweepInvites(w, now: now).contains(key) else { return false }
            try w.delete(Tables.invites, key)
            // Its short code goes with it.
            for (slot, row) in try sweepShortInvites(w, now: now) where row.invitationKey == key {
                try w.delete(Tables.shortInvites, [slot])
            }
            return true
        }
    }

    // MARK: Short codes

    /// How many handshakes one short code may start (each counts before its code is checked);
    /// after the last that fails, the short code is burned (the long code stays open).
    public static let shortCodeTries = 5
    static let shortRowVersion: UInt8 = 1

    /// Gives the open invitation `invitationKey` a short code in the lowest free slot (0...15):
    /// `password` gives the code's password for a slot; the row keeps it, the invitation's long
    /// `code` (handed over to the joiner who proves the short one) and ``shortCodeTries`` tries.
    /// Nil, recording nothing, when every slot is taken. Expired rows are swept first.
    public func addShortInvite(invitationKey: [UInt8], code: String, expiresAtMillis: Int64,
                               password: (UInt8) -> [UInt8]) throws -> UInt8? {
        let now = clock.nowMillis()
        return try store.write { w in
            let taken = Set(try sweepShortInvites(w, now: now).map(\.slot))
            guard let slot = (0..<UInt8(Self.openInvitesMax)).first(where: { !taken.contains($0) }) else { return nil }
            let row = ShortInviteRow(expiresAtMillis: expiresAtMillis, triesLeft: UInt8(Self.shortCodeTries),
                                     password: password(slot), invitationKey: invitationKey, code: code)
            try w.put(Tables.shortInvites, [slot], row.encoded())
            return slot
        }
    }

    /// The open, unexpired short invitations' slots, passwords and expiry (for their announcements).
    public func openShortInvites() throws -> [(slot: UInt8, password: [UInt8], expiresAtMillis: Int64)] {
        let now = clock.nowMillis()
        return try store.read { r in
            var open: [(slot: UInt8, password: [UInt8], expiresAtMillis: Int64)] = []
            try r.scan(Tables.shortInvites) { key, value in
                if key.count == 1, let row = try ShortInviteRow(value), row.expiresAtMillis >= now, row.triesLeft > 0 {
                    open.append((key[0], row.password, row.expiresAtMillis))
                }
                return open.count < Self.openInvitesMax
            }
            return open
        }
    }

    /// Counts one try against the short invitation in `slot`: its password and the tries left
    /// after this one, or nil (counting nothing) when none is open there or no try is left.
    public func takeShortTry(slot: UInt8) throws -> (password: [UInt8], triesLeft: Int)? {
        let now = clock.nowMillis()
        return try store.write { w in
            guard var row = try w.get(Tables.shortInvites, [slot]).flatMap(ShortInviteRow.init), row.expiresAtMillis >= now,
                  row.triesLeft > 0 else { return nil }
            row.triesLeft -= 1
            try w.put(Tables.shortInvites, [slot], row.encoded())
            return (row.password, Int(row.triesLeft))
        }
    }

    /// The long code of the short invitation in `slot` and its tries left, or nil.
    public func shortInvite(slot: UInt8) throws -> (code: String, triesLeft: Int)? {
        let now = clock.nowMillis()
        return try store.read { r in
            guard let row = try r.get(Tables.shortInvites, [slot]).flatMap(ShortInviteRow.init), row.expiresAtMillis >= now else { return nil }
            return (row.code, Int(row.triesLeft))
        }
    }

    /// Deletes the short invitation in `slot` (handed over, or burned); the long code stays open.
    public func removeShortInvite(slot: UInt8) throws {
        try store.write { w in try w.delete(Tables.shortInvites, [slot]) }
    }

    /// Deletes expired short invitations and unreadable rows; returns the rows left.
    private func sweepShortInvites(_ w: any KeyValueWriter, now: Int64) throws -> [(slot: UInt8, row: ShortInviteRow)] {
        var stale: [[UInt8]] = [], open: [(slot: UInt8, row: ShortInviteRow)] = []
        try w.scan(Tables.shortInvites) { key, value in
            if key.count == 1, let row = try ShortInviteRow(value), row.expiresAtMillis >= now { open.append((key[0], row)) } else { stale.append(key) }
            return true
        }
        for key in stale { try w.delete(Tables.shortInvites, key) }
        return open
    }

    /// Deletes expired invitations and rows of an older version; returns the keys left open.
    private func sweepInvites(_ w: any KeyValueWriter, now: Int64) throws -> [[UInt8]] {
        var stale: [[UInt8]] = [], open: [[UInt8]] = []
        try w.scan(Tables.invites) { key, value in
            if let expiry = try Self.inviteExpiry(value), expiry >= now { open.append(key) } else { stale.append(key) }
            return true
        }
        for key in stale { try w.delete(Tables.invites, key) }
        return open
    }

    /// The expiry of an invitation row of this version, or nil for a row of an older version (swept).
    /// Throws ``LedgerError/corrupted(_:)`` for a row of this version that does not decode.
    static func inviteExpiry(_ value: [UInt8]) throws -> Int64? {
        guard value.first == inviteRowVersion else { return nil }
        var r = ByteReader(Array(value.dropFirst()))
        do {
            let expiry = try r.readOrderedSigned()
            try r.expectEnd()
            return expiry
        } catch {
            throw LedgerError.corrupted("invitation row: \(error)")
        }
    }

    // MARK: Sessions other laptops open

    /// The settings that count the completed sessions other laptops opened to this device (all
    /// members together; kept since before ``InboundRecord``s) and hold the last one's time, Unix
    /// milliseconds: ``inboundTotals()``.
    public static let inboundSessionsSetting = "inboundSessions", lastInboundSetting = "lastInboundMillis"

    /// Records a completed session that the laptop of `member` opened to this device from `host`,
    /// timed by this device's clock, in one write transaction: the totals (``inboundTotals()``)
    /// count it, and the member's ``InboundRecord`` keeps its first session's time, counts this
    /// one and takes the host, the time and `outcome`. Sessions that end at once each count: each
    /// reads and writes inside its own write transaction, which the store serializes. Returns the
    /// record stored.
    @discardableResult
    public func recordInbound(member: [UInt8], from host: String, _ outcome: SyncOutcome) throws -> InboundRecord {
        let now = clock.nowMillis()
        return try store.write { w in
            let sessions = Int(try Self.setting(Self.inboundSessionsSetting, w) ?? "0") ?? 0
            try Self.put(Self.inboundSessionsSetting, String(sessions + 1), w)
            try Self.put(Self.lastInboundSetting, String(now), w)
            var record = try w.get(Tables.inbound, member).map { try InboundRecord.decode(key: member, $0) }
                ?? InboundRecord(memberKey: member, host: host, firstMillis: now)
            record.host = host
            record.lastMillis = now
            record.sessions += 1
            record.last = outcome
            try w.put(Tables.inbound, member, record.encoded())
            return record
        }
    }

    /// The members whose laptops completed a session opened to this device, by member key.
    public func inbound() throws -> [InboundRecord] {
        try store.read { r in
            var result: [InboundRecord] = []
            try r.scan(Tables.inbound) { key, value in
                result.append(try InboundRecord.decode(key: key, value))
                return true
            }
            return result
        }
    }

    /// How many sessions other laptops opened to this device completed, and when the last one did
    /// (Unix milliseconds, 0: never).
    public func inboundTotals() throws -> (sessions: Int, lastMillis: Int64) {
        try store.read { r in
            (Int(try Self.setting(Self.inboundSessionsSetting, r) ?? "0") ?? 0, Int64(try Self.setting(Self.lastInboundSetting, r) ?? "0") ?? 0)
        }
    }

    // MARK: Settings

    /// A device-local setting, or nil.
    public func setting(_ name: String) throws -> String? {
        try store.read { r in try Self.setting(name, r) }
    }

    /// Sets (or, with nil, removes) a device-local setting.
    public func setSetting(_ name: String, _ value: String?) throws {
        try store.write { w in try Self.put(name, value, w) }
    }

    /// ``setting(_:)`` in a transaction.
    private static func setting(_ name: String, _ r: any KeyValueReader) throws -> String? {
        try r.get(Tables.settings, Array(name.utf8)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// ``setSetting(_:_:)`` in a write transaction.
    private static func put(_ name: String, _ value: String?, _ w: any KeyValueWriter) throws {
        if let value { try w.put(Tables.settings, Array(name.utf8), Array(value.utf8)) } else { try w.delete(Tables.settings, Array(name.utf8)) }
    }
}

extension Replica {
    /// This device's own state (peers, invitations, settings), in the replica's store and timed
    /// by its clock.
    public var device: DeviceState {
        DeviceState(store: store, clock: clock)
    }
}

extension Tables {
    /// Known peers: address (UTF-8) → ``PeerRecord``. Local to the device.
    public static let peers = Table("peers")
    /// Open invitations: the invitation key (32, `SecureChannel.invitationKey(secret:)`) → version
    /// u8 (2) | expiry millis. Local to the device.
    public static let invites = Table("invites")
    /// Open short codes: slot u8 → ``ShortInviteRow`` (version u8 (1) | expiry millis | tries left
    /// u8 | password 32 | invitation key 32 | the long code, UTF-8). Local to the device.
    public static let shortInvites = Table("shortInvites")
    /// Device-local settings (for example where this device's daemon listens): name → UTF-8 value.
    public static let settings = Table("settings")
    /// Members whose laptops completed sessions opened to this device: member key (32) →
    /// ``InboundRecord`` (version u8 (1) | host | first and last session millis | sessions | the
    /// last session's ``SyncOutcome``). Local to the device.
    public static let inbound = Table("inbound")
}

/// How a device learned a peer's address (``PeerRecord/learnedFrom``); the raw value is stored.
public enum AddressSource: UInt8, Sendable {
    /// Typed: `peer add`, `sync HOST:PORT`, the addresses of an invitation `join` used.
    case typed = 0
    /// Named by a LAN announcement of the device's member (discovery).
    case announcement = 1
    /// Named by the `hello` of a session the device opened to this one (its daemon's port at the
    /// address the connection came from).
    case session = 2

    /// The name `peers --json` shows (`learnedFrom`).
    public var name: String {
        switch self {
        case .typed: "typed"
        case .announcement: "announcement"
        case .session: "session"
        }
    }
}

/// What this device knows about one peer it syncs with (local to this device, not replicated).
public struct PeerRecord: Equatable, Sendable {
    /// "host:port" as the user gave it.
    public var address: String
    /// When it was added, Unix milliseconds.
    public var addedAtMillis: Int64
    /// The last attempt to sync with it.
    public var lastAttemptMillis: Int64 = 0
    /// The last successful sync.
    public var lastSuccessMillis: Int64 = 0
    /// Why the last attempt failed (empty when it succeeded).
    public var lastError = ""
    /// The peer's replica id, once known.
    public var peerReplica: ReplicaID?
    /// The peer's receipt: the vector it acknowledged holding, after its durable commit, at the
    /// end of the last successful sync.
    public var receipt: VersionVector = [:]
    /// Children whose checks agreed at the end of the last successful sync.
    public var childrenAgreeing = 0
    /// Children whose checks differed then.
    public var childrenDiffering: [RecordID] = []
    /// The member key (32 bytes) of the device last met at this address (from a session or an
    /// announcement); empty while unknown.
    public var memberKey: [UInt8] = []
    /// How this device came to know the address: typed (`peer add`, `sync HOST:PORT`, `join`),
    /// from a LAN announcement, or from the `hello` of a session the device at it opened. A learned
    /// one is forgotten when its device is heard of elsewhere (``DeviceState/learnAddress(_:member:from:)``);
    /// a typed one stays until `peer remove`.
    public var learnedFrom: AddressSource = .typed
    /// When an announcement or a session last named this address, Unix milliseconds (0: never).
    public var announcedAtMillis: Int64 = 0

    /// What the last successful sync established: the peer's replica, receipt and checks.
    public var outcome: SyncOutcome {
        get { SyncOutcome(peerReplica: peerReplica, receipt: receipt, childrenAgreeing: childrenAgreeing, childrenDiffering: childrenDiffering) }
        set {
            peerReplica = newValue.peerReplica
            receipt = newValue.receipt
            childrenAgreeing = newValue.childrenAgreeing
            childrenDiffering = newValue.childrenDiffering
        }
    }

    /// Whether the address was learned (an announcement or a session), not typed.
    public var isLearned: Bool { learnedFrom != .typed }
    /// Whether a LAN announcement named this address (discovery found it); setting it makes the
    /// record one learned from an announcement (true) or a typed one (false).
    public var discovered: Bool {
        get { learnedFrom == .announcement }
        set { learnedFrom = newValue ? .announcement : .typed }
    }

    /// A new record.
    public init(address: String, addedAtMillis: Int64) {
        self.address = address
        self.addedAtMillis = addedAtMillis
    }

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 96)
        w.write(string: address)
        w.write(zigzag: addedAtMillis)
        w.write(zigzag: lastAttemptMillis)
        w.write(zigzag: lastSuccessMillis)
        w.write(string: lastError)
        outcome.encode(into: &w)
        // Added with LAN discovery (records written before end here).
        w.write(varint: UInt64(memberKey.count))
        w.write(raw: memberKey)
        w.write(learnedFrom.rawValue)
        w.write(zigzag: announcedAtMillis)
        return w.bytes
    }

    static func decode(_ raw: [UInt8]) throws -> PeerRecord {
        var r = ByteReader(raw)
        do {
            var p = PeerRecord(address: try r.readString(maxBytes: 300, "address"), addedAtMillis: try r.readZigzag())
            p.lastAttemptMillis = try r.readZigzag()
            p.lastSuccessMillis = try r.readZigzag()
            p.lastError = try r.readString(maxBytes: 2_000, "error")
            p.outcome = try SyncOutcome.decode(&r)
            if !r.isAtEnd {
                let keyCount = try r.readVarint()
                guard keyCount == 0 || keyCount == 32 else { throw DecodeError.invalid("member key size") }
                p.memberKey = try r.readRaw(count: Int(keyCount))
                let source = try r.readByte()
                // Older versions wrote 1 for any learned address; a value this version does not know is a learned one.
                p.learnedFrom = AddressSource(rawValue: source) ?? .session
                p.announcedAtMillis = try r.readZigzag()
            }
            try r.expectEnd()
            return p
        } catch {
            throw LedgerError.corrupted("peer record: \(error)")
        }
    }
}

/// What a completed session established about its peer: its replica, its receipt and how the
/// children's checks compared. ``PeerRecord`` keeps it for a peer this device syncs with,
/// ``InboundRecord`` for a member whose laptop syncs with this device; both encode it alike.
public struct SyncOutcome: Equatable, Sendable {
    /// The peer's replica id.
    public var peerReplica: ReplicaID?
    /// The peer's receipt: the vector it acknowledged holding, after its durable commit, at the
    /// end of the session.
    public var receipt: VersionVector
    /// Children whose checks agreed at the end.
    public var childrenAgreeing: Int
    /// Children whose checks differed then.
    public var childrenDiffering: [RecordID]

    /// An outcome.
    public init(peerReplica: ReplicaID? = nil, receipt: VersionVector = [:], childrenAgreeing: Int = 0, childrenDiffering: [RecordID] = []) {
        self.peerReplica = peerReplica
        self.receipt = receipt
        self.childrenAgreeing = childrenAgreeing
        self.childrenDiffering = childrenDiffering
    }

    func encode(into w: inout ByteWriter) {
        w.write(bigEndian: peerReplica?.rawValue ?? 0)
        w.write(varint: UInt64(receipt.count))
        for (origin, sequence) in receipt.sorted(by: { $0.key < $1.key }) {
            w.write(bigEndian: origin.rawValue)
            w.write(varint: sequence)
        }
        w.write(varint: UInt64(childrenAgreeing))
        w.write(varint: UInt64(childrenDiffering.count))
        for child in childrenDiffering { w.write(id: child) }
    }

    static func decode(_ r: inout ByteReader) throws -> SyncOutcome {
        var outcome = SyncOutcome()
        let replica = try r.readBigEndianUInt64()
        outcome.peerReplica = replica == 0 ? nil : ReplicaID(replica)
        let n = try r.readVarint()
        guard n <= 100_000 else { throw DecodeError.invalid("receipt size") }
        for _ in 0..<n { outcome.receipt[ReplicaID(try r.readBigEndianUInt64())] = try r.readVarint() }
        outcome.childrenAgreeing = Int(clamping: try r.readVarint())
        let d = try r.readVarint()
        guard d <= 100_000 else { throw DecodeError.invalid("children count") }
        for _ in 0..<d { outcome.childrenDiffering.append(try r.readID()) }
        return outcome
    }
}

/// A member whose laptop completed sessions opened to this device (local to this device, not
/// replicated): where it came from, when, and what its last session established. `status` shows a
/// member this device has no address of as a laptop that dials in.
public struct InboundRecord: Equatable, Sendable {
    /// The member's key (32 bytes).
    public var memberKey: [UInt8]
    /// The address (host, no port) its last session came from.
    public var host: String
    /// When its first session recorded here completed, Unix milliseconds.
    public var firstMillis: Int64
    /// When its last session completed.
    public var lastMillis: Int64
    /// How many of its sessions completed.
    public var sessions = 0
    /// What its last session established.
    public var last = SyncOutcome()

    static let rowVersion: UInt8 = 1

    /// A record of no session yet.
    public init(memberKey: [UInt8], host: String, firstMillis: Int64) {
        self.memberKey = memberKey
        self.host = host
        self.firstMillis = firstMillis
        self.lastMillis = firstMillis
    }

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 96)
        w.write(Self.rowVersion)
        w.write(string: host)
        w.write(zigzag: firstMillis)
        w.write(zigzag: lastMillis)
        w.write(varint: UInt64(sessions))
        last.encode(into: &w)
        return w.bytes
    }

    static func decode(key: [UInt8], _ raw: [UInt8]) throws -> InboundRecord {
        var r = ByteReader(raw)
        do {
            guard try r.readByte("version") == rowVersion else { throw DecodeError.invalid("version") }
            var record = InboundRecord(memberKey: key, host: try r.readString(maxBytes: 300, "host"), firstMillis: try r.readZigzag())
            record.lastMillis = try r.readZigzag()
            record.sessions = Int(clamping: try r.readVarint())
            record.last = try SyncOutcome.decode(&r)
            try r.expectEnd()
            return record
        } catch {
            throw LedgerError.corrupted("inbound session record: \(error)")
        }
    }
}

/// One open short code (``Tables/shortInvites``).
struct ShortInviteRow {
    var expiresAtMillis: Int64
    var triesLeft: UInt8
    var password: [UInt8]
    var invitationKey: [UInt8]
    var code: String

    init(expiresAtMillis: Int64, triesLeft: UInt8, password: [UInt8], invitationKey: [UInt8], code: String) {
        self.expiresAtMillis = expiresAtMillis
        self.triesLeft = triesLeft
        self.password = password
        self.invitationKey = invitationKey
        self.code = code
    }

    /// A stored row; nil for a row of another version (swept). Throws
    /// ``LedgerError/corrupted(_:)`` for a row of this version that does not decode.
    init?(_ value: [UInt8]) throws {
        guard value.first == DeviceState.shortRowVersion else { return nil }
        var r = ByteReader(Array(value.dropFirst()))
        do {
            let expiry = try r.readOrderedSigned(), tries = try r.readByte()
            let password = try r.readRaw(count: 32), key = try r.readRaw(count: 32)
            guard !r.isAtEnd else { throw DecodeError.invalid("no long code") }
            self.init(expiresAtMillis: expiry, triesLeft: tries, password: password, invitationKey: key,
                      code: String(decoding: value[(1 + 8 + 1 + 64)...], as: UTF8.self))
        } catch {
            throw LedgerError.corrupted("short invitation row: \(error)")
        }
    }

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 80 + code.utf8.count)
        w.write(DeviceState.shortRowVersion)
        w.write(orderedSigned: expiresAtMillis)
        w.write(triesLeft)
        w.write(raw: password)
        w.write(raw: invitationKey)
        w.write(raw: Array(code.utf8))
        return w.bytes
    }
}

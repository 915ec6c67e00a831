import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica
import KidLedgerLMDB
import KidLedgerSecurity

/// The simulation's one notion of time, shared by every replica's clock. Unchecked Sendable (a
/// ``WallClock`` is Sendable): only the simulator's thread reads and moves it (checked in debug
/// builds at every clock reading).
final class SimTime: @unchecked Sendable {
    let thread = ThreadCheck()
    /// Virtual Unix milliseconds (starts at a fixed date so times look real).
    var millis: Int64 = 1_800_000_000_000
}

/// A replica's wall clock: the simulation's time plus this replica's skew.
struct SkewedClock: WallClock {
    let time: SimTime
    let skew: Int64
    func nowMillis() -> Int64 {
        time.thread.check()
        return time.millis + skew
    }
}

/// One simulated device: its durable store, its running replica (nil while crashed), and an
/// optional stale copy of its files to restore from (lazy: most copies are never restored).
final class SimNode {
    let index: Int
    var store: any KeyValueStore
    var replica: Replica?
    var staleCopy: MemoryStore.LazyCopy?
    var skew: Int64
    var incarnation: UInt64 = 0
    let lmdbDirectory: String?
    /// The account this device is a member as (granted at genesis; the owner's for replica 0).
    let member: Identity
    /// The run's signature verifier (shared by its replicas: ``CachingVerifier``).
    let verifier: any SignatureVerifier
    /// What the runs of the seed share (its replicas' prepared changes, the claims they sign:
    /// ``SeedShare``), set before boot.
    var share: SeedShare?
    /// The account the device is switched to now: `member`, or another one while frozen.
    var identity: Identity
    /// Whether the device is switched to another account: it makes no local changes and does not
    /// sync, but keeps its store (and the changes it has not sent yet).
    var isFrozen: Bool { identity.publicKey != member.publicKey }

    /// How many children the running replica holds (archived ones included): the length of
    /// what ``pickableChild(at:)`` picks from, from the children table's entry count.
    func childCount() throws -> Int {
        guard let replica else { return 0 }
        return try replica.store.read { try $0.count(Tables.children) }
    }

    /// The member keys the replica lists as revoked (``revokedKeys()``), and the stamp of what
    /// they were read from.
    private var revokedCache: (stamp: StoreStamp, revoked: Set<[UInt8]>)?
    /// The tables ``Replica/members()`` reads.
    private static let memberTables = [Tables.households, Tables.grants, Tables.revocations, Tables.claims, Tables.transfers]
    /// The hash chain at the head of every origin (``heads()``), and the stamp of what it was
    /// read from (the vector and chains tables).
    private var headsCache: (stamp: StoreStamp, heads: [ReplicaID: [UInt8]])?
    /// The stamp (of the settings table) and member key at which the device settings held no
    /// placed revocation of that member (``holdsPlacedRevocation(of:)``).
    private var noPlacementCache: (stamp: StoreStamp, key: [UInt8])?
    /// The stamp of the whole store and the UTC day at which ``hasDueAllowances(now:)`` was last
    /// answered, and the answer.
    private var dueCache: (stamp: StoreStamp, day: Int64, zone: any ZoneRules, due: Bool)?
    /// The last ``pickableChild(at:)`` list and ``versionVector()``, with the stamps they were read at.
    private var childrenCache: (stamp: StoreStamp, list: [ChildSummary])?
    private var vectorCache: (stamp: StoreStamp, vector: VersionVector)?
    /// The last ``floodingMembers()`` answer, with the stamp of the tables it read.
    private var floodingCache: (stamp: StoreStamp, members: Set<[UInt8]>)?
    /// The tables ``Replica/floodingMembers()`` reads (the claims, the bytes per member, and the
    /// ownership: the pin, the household records and the transfers).
    private static let floodingTables = [Tables.claims, Tables.memberBytes, Tables.meta, Tables.households, Tables.transfers]

    /// What the node's caches of answers read from its store are kept by: the store, and numbers
    /// that move whenever what was read may have changed. For a ``MemoryStore``, the write counts
    /// of the tables read (nil: its last write stamp); for an LMDB environment, its last committed
    /// transaction, whatever was read (every commit moves it).
    struct StoreStamp {
        let store: AnyObject
        let numbers: [UInt64]

        func same(as other: StoreStamp?) -> Bool { other.map { store === $0.store && numbers == $0.numbers } ?? false }
    }

    /// The stamp of `tables` (nil: of the whole store) in ``store`` now; nil for a store of
    /// another kind (nothing is cached for it).
    private func stamp(_ tables: [Table]?) -> StoreStamp? {
        if let memory = store as? MemoryStore {
            return StoreStamp(store: memory, numbers: tables?.map { memory.writeCount($0) } ?? [memory.lastStamp])
        }
        if let lmdb = store as? LMDBEnvironment {
            return StoreStamp(store: lmdb, numbers: [UInt64(lmdb.lastCommittedTransaction)])
        }
        return nil
    }

    init(index: Int, store: any KeyValueStore, skew: Int64, lmdbDirectory: String?, identity: Identity,
         verifier: any SignatureVerifier) {
        self.index = index
        name = "r\(index)"
        self.verifier = verifier
        self.store = store
        self.skew = skew
        self.lmdbDirectory = lmdbDirectory
        self.member = identity
        self.identity = identity
    }

    /// `r` and its index, as the trace names it (built once: most trace lines name a replica).
    let name: String
    var isUp: Bool { replica != nil }

    /// Starts (or restarts) the replica from the durable store.
    func boot(time: SimTime, seed: UInt64) throws {
        incarnation += 1
        let generator = SplitMix64(seed: seed &+ UInt64(index) &* 0x1000_0001 &+ incarnation &* 0x9E37_79B9)
        replica = try Replica(store: store, clock: SkewedClock(time: time, skew: skew), random: generator,
                              verifier: verifier)
        if let share { replica?.preparer = share.preparations }
        replica?.zones = SimZones()
        updateClaimSigner()
    }

    /// Claims of new origins are signed by the account the device is switched to.
    func updateClaimSigner() {
        replica?.signer = share?.signer(for: identity) ?? identity.signer
    }

    /// The child at `index` of what `replica.children(includeArchived: true)` lists (in its
    /// order; nil past its end), as much of it as a drawn user operation uses, and how many it
    /// lists: read through `childrenWithoutTotals()`, a function of the children and registers
    /// tables alone, so it is re-read only when one was written (``StoreStamp``).
    func pickableChild(at index: Int) throws -> (child: PickableChild?, count: Int) {
        guard let replica else { return (nil, 0) }
        let stamp = stamp([Tables.children, Tables.registers])
        let list: [ChildSummary]
        if let cache = childrenCache, cache.stamp.same(as: stamp) {
            list = cache.list
        } else {
            list = try replica.childrenWithoutTotals()
            if let stamp { childrenCache = (stamp, list) }
        }
        let row = list.indices.contains(index) ? list[index] : nil
        return (row.map { PickableChild(id: $0.id, isArchived: $0.isArchived) }, list.count)
    }

    /// `replica.versionVector()` of the running replica, or empty while it is down. A function of
    /// the vector table alone, so it is re-read only when that was written (``StoreStamp``).
    func versionVector() throws -> VersionVector {
        guard let replica else { return [:] }
        let stamp = stamp([Tables.vector])
        if let cache = vectorCache, cache.stamp.same(as: stamp) { return cache.vector }
        let vector = try replica.versionVector()
        if let stamp { vectorCache = (stamp, vector) }
        return vector
    }

    /// Whether `replica.members()` lists this device's member account as revoked, or a refusal
    /// placed its revocation where it holds (``Replica/isRevokedHere(_:)``): it is then in
    /// attentionRequired (no local changes, no sync), like the CLI's laptop.
    func listsItselfRevoked() throws -> Bool {
        let key = member.publicKey.bytes
        return try revokedKeys().contains(key) || holdsPlacedRevocation(of: key)
    }

    /// The member keys `replica.members()` lists as revoked (empty while down): the keys the
    /// secure channel's authorisation refuses (the CLI's `SyncDriver.admissibleKeys`). Derived
    /// from the tables `members()` reads only, so it is re-read only when one of them was written
    /// (``StoreStamp``), or the store replaced.
    func revokedKeys() throws -> Set<[UInt8]> {
        guard let replica else { return [] }
        let stamp = stamp(Self.memberTables)
        if let cache = revokedCache, cache.stamp.same(as: stamp) { return cache.revoked }
        let revoked = Set(try replica.members().filter(\.isRevoked).map(\.key))
        if let stamp { revokedCache = (stamp, revoked) }
        return revoked
    }

    /// `replica.hasDueAllowances(now:)` (false while down). Asked again while nothing wrote to
    /// the store (``StoreStamp``) and `now` is in the same day of the household's zone, it is the
    /// last answer: the answer is a function of the store (the zone register included) and of that
    /// day alone (a period is due from 00:00 of its start day in that zone; `SimulatorQueryTests`
    /// holds the two to each other). The daemon asks at every gossip tick and every ledger command
    /// before it writes.
    func hasDueAllowances(now: Int64) throws -> Bool {
        guard let replica else { return false }
        let stamp = stamp(nil)
        if let cache = dueCache, cache.stamp.same(as: stamp) {
            if cache.day == HouseholdTime.day(ofMillis: now, in: cache.zone) { return cache.due }
        }
        let zone = try replica.householdZoneRules()
        let due = try replica.hasDueAllowances(now: now)
        if let stamp { dueCache = (stamp, HouseholdTime.day(ofMillis: now, in: zone), zone, due) }
        return due
    }

    /// `replica.holdsPlacedRevocation(of: key)`; when the device settings hold no placement
    /// (almost always), answered from the settings table's stamp.
    private func holdsPlacedRevocation(of key: [UInt8]) throws -> Bool {
        guard let replica else { return false }
        let stamp = stamp([Tables.settings])
        if let cache = noPlacementCache, cache.stamp.same(as: stamp), cache.key == key { return false }
        guard try replica.device.setting(Replica.placementSetting(key)) != nil else {
            if let stamp { noPlacementCache = (stamp, key) }
            return false
        }
        return try replica.holdsPlacedRevocation(of: key)
    }

    /// The running replica's hash chains at its version vector (nil when down or unreadable):
    /// equal on two replicas exactly when they hold the same changes. Derived from the vector and
    /// chains tables only, so it is re-read only when one was written (``StoreStamp``).
    func heads() -> [ReplicaID: [UInt8]]? {
        guard let replica else { return nil }
        let stamp = stamp([Tables.vector, Tables.chains])
        if let cache = headsCache, cache.stamp.same(as: stamp) { return cache.heads }
        guard let v = try? versionVector(), let heads = try? replica.chains(at: v) else { return nil }
        if let stamp { headsCache = (stamp, heads) }
        return heads
    }

    /// `replica.floodingMembers()` (nil while down), re-read only when a table it reads was
    /// written (``StoreStamp``).
    func floodingMembers() throws -> Set<[UInt8]>? {
        guard let replica else { return nil }
        let stamp = stamp(Self.floodingTables)
        if let cache = floodingCache, cache.stamp.same(as: stamp) { return cache.members }
        let members = try replica.floodingMembers()
        if let stamp { floodingCache = (stamp, members) }
        return members
    }

    /// Drops the running replica; only committed state survives.
    func crash() {
        replica = nil
    }
}

/// A child as a drawn user operation sees it: its id and whether it is archived.
struct PickableChild: Equatable {
    let id: RecordID
    let isArchived: Bool
}

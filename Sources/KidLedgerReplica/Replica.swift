import KidLedgerDomain

/// One replica of a household ledger: the merge rules and queries of the product, written once
/// against a ``KeyValueStore`` (LMDB in the product, the simulator's `MemoryStore` in fast simulations).
///
/// Every mutation (its records, its change-log entry, which doubles as the pending-sync entry,
/// and the local sequence number) is one write transaction. Time and randomness are injected.
public final class Replica {
    /// The store layout version this code reads and writes (older ones are migrated: ``Migrations``).
    public static var schemaVersion: UInt64 { Migrations.current }

    /// The underlying store; inside ``change(_:)``, the write transaction it holds open.
    public var store: any KeyValueStore { openChange ?? durableStore }
    let durableStore: any KeyValueStore
    /// The write transaction of the ``change(_:)`` running now, or nil.
    var openChange: OpenChange?
    /// This replica's id (stable across restarts, new after a restore from stale files).
    public internal(set) var replicaID: ReplicaID
    let clock: any WallClock
    var random: any RandomNumberGenerator
    /// Checks the signatures of membership records (libsodium in the product).
    public let verifier: any SignatureVerifier
    /// This device's member key and its signing side (set by the CLI and the simulator). In a
    /// household with an owner, a device writes only under an origin derived from this key: its
    /// first local change there takes a fresh derived replica id and carries the signed claim.
    public var signer: MemberSigner?
    /// Who computes the pure part of applying a received batch (encodings and hashes, see
    /// `PreparedChange`): the calling thread unless the CLI passes its cores.
    public var workSplitter: any WorkSplitter = SequentialWork()
    /// Who prepares each change before it is applied (``ChangePreparer``): ``PlainPreparer``
    /// unless the simulator passes one that remembers answers across its replicas.
    public var preparer: any ChangePreparer = PlainPreparer()
    /// The rules of the household's time zone by name (``ZoneDatabase``): UTC alone unless the
    /// driver passes a database (the CLI's reads the tz database; the simulator's is a table).
    public var zones: any ZoneDatabase = UTCOnlyZones()

    /// What opening this replica migrated (nil: the store was current, or new).
    public private(set) var migration: MigrationReport?

    /// Opens the replica held in `store`, initializing an empty store with a fresh replica id.
    /// A store of an older schema version is migrated first (``Migrations``: one write
    /// transaction), after `beforeMigrating` (given the store's version) returned: the CLI
    /// copies the store aside there.
    ///
    /// - Throws: ``LedgerError/schemaMismatch(found:expected:)`` when the store was written by a
    ///   newer version (or is older than any release), ``LedgerError/storeFromNewerVersion(schema:writer:)``
    ///   when it says which; store errors when it can't be read.
    public init(store: any KeyValueStore, clock: any WallClock, random: any RandomNumberGenerator,
                verifier: any SignatureVerifier = RejectingVerifier(), beforeMigrating: ((UInt64) throws -> Void)? = nil) throws {
        durableStore = store
        self.clock = clock
        self.random = random
        self.verifier = verifier
        let existing: ([UInt8]?, UInt64?) = try store.read { r in
            (try r.get(Tables.meta, Keys.schema), Bytes.u64(try r.get(Tables.meta, Keys.replica)))
        }
        if let rawSchema = existing.0 {
            guard let schema = Bytes.u64(rawSchema) else { throw LedgerError.corrupted("schema version") }
            if schema > Self.schemaVersion, let writer = try Self.storedSchema(store)?.writer {
                throw LedgerError.storeFromNewerVersion(schema: schema, writer: writer)
            }
            guard (Migrations.oldest...Self.schemaVersion).contains(schema) else {
                throw LedgerError.schemaMismatch(found: schema, expected: Self.schemaVersion)
            }
            guard let id = existing.1 else { throw LedgerError.corrupted("replica id missing") }
            replicaID = ReplicaID(id)
            if schema < Self.schemaVersion {
                try beforeMigrating?(schema)
                migration = try Self.migrate(store, now: clock.nowMillis(), verifier: verifier)
            }
            try completeGenesisPin()
        } else {
            var generator = random
            let fresh = ReplicaID(generator.next() | 1)
            self.random = generator
            replicaID = try store.write { w in
                // Another process may have initialized the store meanwhile.
                if let id = Bytes.u64(try w.get(Tables.meta, Keys.replica)) { return ReplicaID(id) }
                try w.put(Tables.meta, Keys.schema, Bytes.u64(Self.schemaVersion))
                try w.put(Tables.meta, Keys.writer, Array(KidLedgerVersion.current.utf8))
                try w.put(Tables.meta, Keys.replica, Bytes.u64(fresh.rawValue))
                try w.put(Tables.meta, Keys.digest, Digest256.zero.bytes)
                return fresh
            }
        }
    }

    /// A store written before genesis pinning (issue 39) pins the genesis it holds when it is
    /// first opened (``completeGenesisPin(replica:in:)``; docs/SECURITY.md, "One genesis"); when
    /// its log holds several, the derived state is recomputed so the others count as forged. A
    /// store opened read-only keeps deriving the pin from its stored genesis until a writer opens it.
    private func completeGenesisPin() throws {
        let needed = try store.read { r -> Bool in
            guard let pin = try Self.pinnedHousehold(r) else { return false }
            guard pin.genesis == nil && !pin.owner.isEmpty && !pin.ownerPending else { return false }
            return try r.get(Tables.households, Keys.id(pin.id)) != nil
        }
        guard needed else { return }
        let (origin, now, verifier, preparer) = (replicaID, clock.nowMillis(), verifier, preparer)
        do {
            try store.write { w in
                guard try Self.completeGenesisPin(replica: origin, in: w) else { return }
                try Self.withApplyContext(w, now: now, verifier: verifier, preparer: preparer) { try Self.rebuild(in: $0) }
            }
        } catch let error as LedgerError {
            throw error
        } catch {
            // A store that cannot be written now (opened read-only): its pin stays derived.
        }
    }

    /// Draws a random record id from the injected generator (marked as this member's, see
    /// ``entryID(_:)``).
    func newID() -> RecordID {
        entryID(RecordID.random(using: &random))
    }

    /// `id`, a fresh id of a record this device creates, marked as made by ``signer``'s key (when set).
    func entryID(_ id: RecordID) -> RecordID {
        signer.map { Membership.entryID(id, madeBy: $0.key) } ?? id
    }

    // MARK: Local changes

    /// Stamps `operations` as the next local change and applies it, in one write transaction.
    ///
    /// `build` runs inside the transaction, reading it, and returns the operations (it may
    /// validate against current state and throw, in which case nothing is written).
    @discardableResult
    func commitLocal<T>(_ build: (any KeyValueReader, HLC) throws -> ([Operation], T)) throws -> (Change, T) {
        let (changes, extra) = try commitLocalBatch { w, hlc in
            let (operations, extra) = try build(w, hlc)
            return ([operations], extra)
        }
        return (changes[0], extra)
    }

    /// `readBack`, what a local change did as read after its write, when `isApplied` holds for it.
    /// A change is written but not applied when this replica's member was revoked before it (the
    /// revocation rule rejects its own later changes too): then what it did does not read back
    /// (nil, or not as `isApplied` asks), and the caller is told the change was kept in the log.
    static func applied<T>(_ readBack: T?, where isApplied: (T) throws -> Bool = { _ in true }) throws -> T {
        guard let readBack, try isApplied(readBack) else {
            throw LedgerError.invalid("this device's membership was revoked; the change was kept but not applied")
        }
        return readBack
    }

    /// Like ``commitLocal(_:)`` for several changes (each a list of operations) in one write
    /// transaction: all are written or none. Used where one change would exceed its size limit.
    @discardableResult
    func commitLocalBatch<T>(_ build: (any KeyValueReader, HLC) throws -> ([[Operation]], T)) throws -> ([Change], T) {
        let now = clock.nowMillis()
        var generator = random
        let (changes, extra): ([Change], T) = try store.write { w in
            var hlc = try Self.lastHLC(w).tickLocal(now: now)
            var (batches, extra) = try build(w, hlc)
            // Another process (the daemon) may have moved this replica to a new id.
            var origin = try Self.currentReplicaID(w)
            if let first = batches.first, !first.isEmpty,
               let claim = try Self.claimIfNeeded(first, origin: origin, signer: signer, in: w, generator: &generator) {
                origin = claim.claim.origin
                try w.put(Tables.meta, Keys.replica, Bytes.u64(origin.rawValue))
                batches[0].insert(.claim(claim.claim), at: claim.at)
            }
            var versions: [[UInt8]] = []
            let changes = try Self.withApplyContext(w, now: now, verifier: verifier, preparer: preparer) { context in
                var sequence = try context.heldSequence(origin)
                var changes: [Change] = []
                for operations in batches where !operations.isEmpty {
                    precondition(operations.count <= Limits.operationsPerChangeMax, "change too large")
                    sequence += 1
                    let change = Change(origin: origin, sequence: sequence, hlc: hlc, operations: operations)
                    let prepared = context.preparer.prepare(change, encoded: RecordCodec.encode(change))
                    let outcome = try Self.apply(change, prepared, in: context)
                    precondition(outcome == .applied, "a fresh local change must apply")
                    changes.append(change)
                    versions.append(prepared.version)
                    hlc = hlc.tickLocal(now: now)
                }
                return changes
            }
            // After the context's flush: the claim this commit may carry is in the claims table.
            try Self.signHeads(of: changes, versions: versions, signer: signer, in: w)
            return (changes, extra)
        }
        random = generator
        if let first = changes.first { replicaID = first.origin }
        return (changes, extra)
    }

    /// This device's claim of a fresh origin derived from its key, and where it goes in `ops`
    /// (after a household creation), when the household has an owner (or `ops` creates one) and
    /// `origin` is not already this key's: every origin of an owned household is derived from
    /// its member's key, so a device takes one before its first change there (at `init`, after
    /// `join`, and after it left an id behind: a restore from stale files, another account). The
    /// nonce comes from the injected generator; an id already in the log is never taken.
    static func claimIfNeeded(_ ops: [Operation], origin: ReplicaID, signer: MemberSigner?, in r: any KeyValueReader,
                              generator: inout any RandomNumberGenerator) throws -> (claim: OriginClaim, at: Int)? {
        guard let signer, try r.get(Tables.claims, Keys.origin(origin)) != signer.key else { return nil }
        let household: RecordID, at: Int
        if let (id, _) = try owner(r) {
            (household, at) = (id, 0)
        } else if case .createHousehold(let h)? = ops.first, !h.owner.isEmpty {
            (household, at) = (h.id, 1)
        } else {
            return nil
        }
        while true {
            let nonce = generator.next()
            let fresh = Membership.origin(household: household, member: signer.key, nonce: nonce)
            if try r.get(Tables.vector, Keys.origin(fresh)) == nil { return (signer.claim(household: household, nonce: nonce), at) }
        }
    }

    static func lastHLC(_ r: any KeyValueReader) throws -> HLC {
        guard let raw = try r.get(Tables.meta, Keys.hlc) else { return .zero }
        var reader = ByteReader(raw)
        do {
            let millis = try reader.readOrderedSigned("hlc")
            let counter = try reader.readBigEndianUInt32("hlc")
            return HLC(millis: millis, counter: counter)
        } catch {
            throw LedgerError.corrupted("clock state")
        }
    }

    /// The stored form of a clock reading (what ``lastHLC(_:)`` decodes).
    static func encodeHLC(_ hlc: HLC) -> [UInt8] {
        var writer = ByteWriter(capacity: 12)
        writer.write(orderedSigned: hlc.millis)
        writer.write(bigEndian: hlc.counter)
        return writer.bytes
    }
}

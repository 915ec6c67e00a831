import CLMDB
import KidLedgerReplica
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The replica's durable ``KeyValueStore``: an LMDB environment in one directory, with one named
/// database per ``Table``.
///
/// Write transactions are committed durably (fsync) when their body returns, unless the
/// environment was opened with `durable: false`. When a write fills the memory map, the
/// transaction is aborted, the map is doubled (up to ``mapSizeBytesMax``) and the whole body runs
/// again from scratch.
///
/// - Warning: Thread and process rules.
///   - One instance may be shared by threads: `read`s run concurrently (read transactions are
///     not tied to threads), `write`s are serialized by a lock (LMDB allows one writer anyway).
///   - Several *processes* may open the same directory at once (LMDB coordinates them through
///     its lock file), but one process must not open the same directory twice while the first
///     instance is open: the second `init` throws.
///   - Never start a `write` inside a `read` or `write` body, and never call ``close()`` inside
///     either: a nested `write` throws, but a `write` inside a `read` can deadlock while growing
///     the map, and ``close()`` inside a body deadlocks. Starting a `read` inside a `write` body
///     is fine (it sees the last committed state, not the body's own changes).
///   - A `write` body may run more than once (after the map grew), so it must be re-runnable:
///     no side effects outside the transaction that it cannot repeat.
///   - The reader and writer handed to a body are valid only while it runs, on the thread it runs on.
///
/// `@unchecked Sendable`: the mutable state (`env`, `mapRange`, `guardSlot`) is read under `gate`
/// held shared and changed only under it held exclusively; `dbis` is set once, by `init`.
public final class LMDBEnvironment: KeyValueStore, @unchecked Sendable {
    /// The directory holding `data.mdb` and `lock.mdb`.
    public let directory: String

    /// The tables opened (created when missing) with the environment.
    public let tables: [Table]

    /// The largest map size that automatic growth may reach.
    public let mapSizeBytesMax: Int

    /// How many reader slots of dead processes `mdb_reader_check` cleared when the environment opened.
    public let staleReadersCleared: Int

    /// The longest key LMDB accepts (`mdb_env_get_maxkeysize`, 511 with Debian's build).
    public let maxKeySize: Int

    /// The environment; nil once closed. Read and changed only under `gate`.
    private var env: OpaquePointer?
    /// The directory's identity, claimed in ``OpenDirectories`` until ``close()``.
    private let identity: OpenDirectories.Identity
    /// The tables' database handles, set once by `init`.
    private var dbis = TableHandles()
    /// Serializes write transactions.
    private let writer = WriterMutex()
    /// Held shared by every transaction, exclusively by remapping and closing.
    private let gate = MapGate()
    /// The map's address range (start, end), set when opening and after each remap (under `gate`).
    private var mapRange: (start: UInt, end: UInt) = (0, 0)
    /// The ``MapFaultGuard`` slot of the map.
    private var guardSlot: Int?

    /// How often one `read` or `write` may start over after the map was resized or grown.
    private static let maxAttempts = 64

    /// Opens (creating when missing) the environment in `directory`.
    ///
    /// - Parameters:
    ///   - directory: created (mode 0700, with missing parents) when missing; the files in it get mode 0600.
    ///   - tables: every table the store will use; each is created when missing.
    ///   - mapSizeBytes: the initial map size. A larger size already recorded in the environment wins.
    ///   - maxReaders: reader slots of the lock table (used only by the first process to open it).
    ///   - durable: false skips fsync at commit (`MDB_NOSYNC | MDB_NOMETASYNC`): for benchmarks
    ///     and simulations only, where a crash may lose or corrupt recent data.
    ///   - mapSizeBytesMax: the limit of automatic map growth (at least `mapSizeBytes`).
    ///   - mustExist: the data file must already exist and be non-empty (a store being reopened,
    ///     not created).
    /// - Throws: ``LMDBError`` when anything fails; nothing stays open then.
    ///   ``LMDBError/damaged(_:)`` when an existing data file is truncated or its meta pages are
    ///   not LMDB's (checked with `pread` before the file is mapped; see `DataFileCheck`).
    public init(directory: String, tables: [Table], mapSizeBytes: Int = 64 << 20, maxReaders: Int = 126,
                durable: Bool = true, mapSizeBytesMax: Int = 1 << 40, mustExist: Bool = false) throws {
        guard !directory.isEmpty else { throw LMDBError.other(EINVAL, "The LMDB directory path is empty") }
        guard mapSizeBytes > 0, maxReaders > 0, maxReaders <= Int(UInt32.max) else {
            throw LMDBError.other(EINVAL, "Invalid LMDB map size \(mapSizeBytes) or reader count \(maxReaders)")
        }
        var unique: [Table] = []
        for table in tables where !unique.contains(table) {
            guard !table.name.isEmpty else { throw LMDBError.other(EINVAL, "A table name is empty") }
            unique.append(table)
        }
        self.directory = directory
        self.tables = unique
        self.mapSizeBytesMax = max(mapSizeBytesMax, mapSizeBytes)

        let identity = try DirectoryFiles.make(directory)
        try DataFileCheck.check(directory: directory, mustExist: mustExist)
        guard OpenDirectories.claim(identity) else {
            throw LMDBError.other(EBUSY, "The LMDB environment in \(directory) is already open in this process")
        }
        var env: OpaquePointer?
        do {
            try check(mdb_env_create(&env))
            guard let env else { throw LMDBError.other(ENOMEM, "mdb_env_create returned no environment") }
            if MapFaultGuard.installed { mdb_env_set_assert(env, MapFaultGuard.assertFailed) }
            try check(mdb_env_set_maxdbs(env, MDB_dbi(unique.count + 4)))
            try check(mdb_env_set_mapsize(env, mapSizeBytes))
            try check(mdb_env_set_maxreaders(env, UInt32(maxReaders)))
            let flags = UInt32(MDB_NOTLS) | (durable ? 0 : UInt32(MDB_NOSYNC | MDB_NOMETASYNC))
            try check(mdb_env_open(env, directory, flags, 0o600))
            // Adopt the size recorded by whoever grew the map last, but never less than asked for.
            try check(mdb_env_set_mapsize(env, 0))
            if Self.mapSize(env) < mapSizeBytes { try check(mdb_env_set_mapsize(env, mapSizeBytes)) }
            var dead: Int32 = 0
            try check(mdb_reader_check(env, &dead))
            staleReadersCleared = Int(dead)
            maxKeySize = Int(mdb_env_get_maxkeysize(env))
        } catch {
            if let env { mdb_env_close(env) }
            OpenDirectories.release(identity)
            throw error
        }
        self.env = env
        self.identity = identity
        guardMap(env!)
        // Fully initialized from here on: a failure below closes everything through deinit.
        // Tables are looked up first and created only when missing (a store made by an older
        // build), so opening an existing store writes nothing. In a store that must exist, the
        // first table missing means the main database is damaged: creating tables in it would
        // write over damaged pages.
        dbis = try runWrite { txn in
            var dbis = TableHandles()
            for table in unique {
                if let dbi = try txn.openTable(table, create: false) {
                    dbis.add(table, dbi)
                } else if mustExist && table == unique.first {
                    throw LMDBError.damaged("\(directory)/data.mdb has no table \"\(table.name)\": its main database is damaged")
                } else {
                    guard let dbi = try txn.openTable(table, create: true) else { throw LMDBError.badDBI }
                    dbis.add(table, dbi)
                }
            }
            return dbis
        }
    }

    deinit { close() }

    // MARK: KeyValueStore

    /// Runs `body` in a read-only snapshot; many reads may run at once, on any threads.
    public func read<T>(_ body: (any KeyValueReader) throws -> T) throws -> T {
        var attempts = 0
        while true {
            gate.lockShared()
            let txn: LMDBTransaction
            do {
                txn = try beginLocked(readOnly: true)
            } catch .mapResized where attempts < Self.maxAttempts {
                gate.unlock()
                attempts += 1
                try adoptMapSize()
                continue
            } catch {
                gate.unlock()
                throw error
            }
            defer {
                txn.abort()
                gate.unlock()
            }
            return try body(txn)
        }
    }

    /// Runs `body` in one write transaction: committed (durably unless opened with
    /// `durable: false`) when it returns, aborted when it throws.
    ///
    /// - Warning: `body` runs again from scratch when the map had to grow (or was resized by
    ///   another process), so it must be re-runnable. It must not start another `write`.
    public func write<T>(_ body: (any KeyValueWriter) throws -> T) throws -> T {
        try runWrite { try body($0) }
    }

    /// The write loop: one transaction per attempt; grows the map and starts over on
    /// `MDB_MAP_FULL`, adopts the new size and starts over on `MDB_MAP_RESIZED`.
    private func runWrite<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        let rc = writer.lock()
        if rc == EDEADLK {
            throw LMDBError.other(EDEADLK, "A write transaction was started inside another one on the same thread")
        }
        try check(rc)
        defer { writer.unlock() }
        var attempts = 0
        while true {
            attempts += 1
            let retry = attempts < Self.maxAttempts
            gate.lockShared()
            let txn: LMDBTransaction
            do {
                txn = try beginLocked(readOnly: false)
            } catch .mapResized where retry {
                gate.unlock()
                try adoptMapSize()
                continue
            } catch {
                gate.unlock()
                throw error
            }
            let result: T
            do {
                result = try body(txn)
            } catch {
                txn.abort()
                gate.unlock()
                if txn.sawMapFull && retry { try growMap(); continue }
                throw error
            }
            if txn.sawMapFull {  // The body swallowed a full map: the transaction is unusable.
                txn.abort()
                gate.unlock()
                if retry { try growMap(); continue }
                throw LMDBError.mapFull
            }
            let committed = txn.commit()  // Frees the transaction even when it fails.
            gate.unlock()
            if committed == MDB_MAP_FULL && retry { try growMap(); continue }
            try check(committed)
            return result
        }
    }

    /// Begins a transaction; the caller holds `gate` shared.
    private func beginLocked(readOnly: Bool) throws(LMDBError) -> LMDBTransaction {
        guard let env else { throw .badTxn }
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn))
        guard let txn else { throw .badTxn }
        return LMDBTransaction(txn, dbis: dbis, maxKeySize: maxKeySize, map: mapRange)
    }

    // MARK: Map size

    /// The current map size of this process's environment (0 once closed).
    public var mapSizeBytes: Int {
        gate.lockShared()
        defer { gate.unlock() }
        return env.map(Self.mapSize) ?? 0
    }

    /// Records the map's address range for value checks and for ``MapFaultGuard``. LMDB does not
    /// tell where it mapped the file (`me_mapaddr` is only set for fixed maps), so the mapping of
    /// this environment's `data.mdb` is looked up in `/proc/self/maps` by inode.
    private func guardMap(_ env: OpaquePointer) {
        MapFaultGuard.unregister(guardSlot)
        guardSlot = nil
        mapRange = (0, 0)
        guard let inode = DataFileCheck.inode(directory + "/data.mdb"),
              let range = MapFaultGuard.mapping(inode: inode, named: "/data.mdb") else { return }
        mapRange = range
        guardSlot = MapFaultGuard.register(start: range.start, count: Int(range.end - range.start))
    }

    /// The id of the last committed write transaction (LMDB's `me_last_txnid`; 0 once closed):
    /// it moves with every commit, so while it stands still nothing committed has changed.
    public var lastCommittedTransaction: Int {
        gate.lockShared()
        defer { gate.unlock() }
        return env.map { env in
            var info = MDB_envinfo()
            mdb_env_info(env, &info)
            return info.me_last_txnid
        } ?? 0
    }

    private static func mapSize(_ env: OpaquePointer) -> Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info.me_mapsize
    }

    /// Adopts the map size that another process recorded (after `MDB_MAP_RESIZED`).
    private func adoptMapSize() throws(LMDBError) {
        try remap { env throws(LMDBError) in try check(mdb_env_set_mapsize(env, 0)) }
    }

    /// Doubles the map (after `MDB_MAP_FULL`), or adopts a larger size another process recorded.
    private func growMap() throws(LMDBError) {
        try remap { env throws(LMDBError) in
            let old = Self.mapSize(env)
            try check(mdb_env_set_mapsize(env, 0))  // The size recorded in the file (may be smaller).
            if Self.mapSize(env) > old { return }
            try check(mdb_env_set_mapsize(env, old < mapSizeBytesMax ? min(old * 2, mapSizeBytesMax) : old))
            if old >= mapSizeBytesMax { throw .mapFull }
        }
    }

    /// Changes the map with no transaction of this process running (`gate` held exclusively).
    /// When remapping fails LMDB is left without a map, so the environment is closed.
    private func remap(_ change: (OpaquePointer) throws(LMDBError) -> Void) throws(LMDBError) {
        gate.lockExclusive()
        defer { gate.unlock() }
        guard let env else { throw .badTxn }
        defer { if let env = self.env { guardMap(env) } }
        do {
            try change(env)
        } catch .mapFull {
            throw .mapFull
        } catch {
            closeLocked()
            throw error
        }
    }

    // MARK: Maintenance

    /// Drops this process's resident pages of the memory map (`madvise(MADV_DONTNEED)`). The map is
    /// read-only and shared with the file (no `MDB_WRITEMAP`), so nothing is lost: the pages stay in
    /// the kernel's page cache and a later read faults them back in. A long read of the whole store
    /// (sending a million-change log to a new device) would otherwise keep every page it touched
    /// resident in the daemon: hundreds of MB for a ledger of that size (docs/PERFORMANCE.md).
    public func releaseResidentPages() {
        gate.lockShared()
        defer { gate.unlock() }
        guard env != nil, mapRange.end > mapRange.start, let start = UnsafeMutableRawPointer(bitPattern: mapRange.start) else { return }
        _ = madvise(start, Int(mapRange.end - mapRange.start), MADV_DONTNEED)
    }

    /// Flushes the data to disk (`mdb_env_sync` with force), useful after non-durable writes.
    public func sync() throws {
        gate.lockShared()
        defer { gate.unlock() }
        guard let env else { throw LMDBError.badTxn }
        try check(mdb_env_sync(env, 1))
    }

    /// Writes a consistent copy of the whole store to the open file `descriptor`
    /// (`mdb_env_copyfd2`): one read transaction's snapshot, so writers go on meanwhile. With
    /// `compact`, free pages are left out and the copy holds only the pages in use
    /// (`MDB_CP_COMPACT`). The caller syncs and closes the file.
    public func copy(to descriptor: Int32, compact: Bool = true) throws {
        gate.lockShared()
        defer { gate.unlock() }
        guard let env else { throw LMDBError.badTxn }
        try check(mdb_env_copyfd2(env, descriptor, compact ? UInt32(MDB_CP_COMPACT) : 0))
    }

    /// Reads every page LMDB can reach (free-page list, main database, every table) in one read
    /// transaction and returns the problems found (empty when none).
    ///
    /// - Throws: ``LMDBError`` when LMDB finds a damaged page itself (``LMDBError/indicatesDamage``).
    public func checkPages() throws -> [String] {
        try read { reader in
            guard let txn = reader as? LMDBTransaction, let env else { return [] }
            var info = MDB_envinfo()
            mdb_env_info(env, &info)
            return try txn.checkPages(lastPage: info.me_last_pgno)
        }
    }

    /// How many entries `table` holds and the depth of its B-tree.
    public func stat(_ table: Table) throws -> (entries: Int, depth: Int) {
        try read { reader in
            let stat = try (reader as! LMDBTransaction).stat(table)
            return (Int(stat.ms_entries), Int(stat.ms_depth))
        }
    }

    /// Closes the environment after waiting for running transactions; later calls throw
    /// ``LMDBError/badTxn``. Idempotent; also done when the instance is released.
    ///
    /// - Warning: Never call it inside a `read` or `write` body: it would wait for itself.
    public func close() {
        let rc = writer.lock()
        precondition(rc == 0, "LMDBEnvironment.close() called inside a write transaction")
        defer { writer.unlock() }
        gate.lockExclusive()
        defer { gate.unlock() }
        closeLocked()
    }

    /// Closes with `gate` held exclusively.
    private func closeLocked() {
        guard let env else { return }
        MapFaultGuard.unregister(guardSlot)
        guardSlot = nil
        mapRange = (0, 0)
        mdb_env_close(env)
        self.env = nil
        OpenDirectories.release(identity)
    }
}

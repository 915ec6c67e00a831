import KidLedgerDomain

/// The store's schema versions as numbered steps (issue 43): each ``Migration`` takes a store from
/// version `n` to `n + 1`, in place. ``Replica/init(store:clock:random:verifier:beforeMigrating:)``
/// runs every step from the store's version to ``current`` in ONE write transaction, which also
/// writes the new version: a crash half-way leaves the old store as it was (LMDB commits all or
/// nothing), and the next open migrates again from the start.
///
/// Adding a schema version is one function and one line in ``steps`` (docs/STORE.md,
/// "Schema versions and migrations"), plus a fixture home made by the release before it
/// (`Scripts/make-fixture.sh`) and its test (`MigrationFixtureTests`).
public enum Migrations {
    /// The oldest schema version a released store has: the stores of the releases before
    /// migrations (kidledger 0.1, issue 43's fixture `Tests/Fixtures/homes/schema3`).
    public static let oldest: UInt64 = 3

    /// Every step, oldest first: `steps[i]` migrates version `oldest + i` to `oldest + i + 1`.
    static let steps: [Migration] = [
        Migration(to: 4, summary: "records which kidledger wrote the store; the derived tables rebuilt from the change log",
                  run: stampWriterAndRebuild),
        Migration(to: 5, summary: "the relay table (kidledger 0.3.0's relay grants, epochs and member relay keys); kidledger 0.2.0 refuses the store from here on",
                  run: markRelayOperations),
    ]

    /// The version this build reads and writes.
    public static var current: UInt64 { oldest + UInt64(steps.count) }

    /// The steps that take a store of `version` to ``current`` (empty when it is current).
    static func steps(from version: UInt64) -> ArraySlice<Migration> {
        steps[Int(version - oldest)...]
    }

    // MARK: The steps

    /// 3 → 4: `meta/writer` (the product version of the newest kidledger that migrated or
    /// created the store, for the "written by a newer kidledger" message) and a rebuild of the
    /// derived tables.
    static func stampWriterAndRebuild(_ m: MigrationContext) throws {
        try m.store.put(Tables.meta, Keys.writer, Array(KidLedgerVersion.current.utf8))
        try m.rebuildDerivedState()
    }

    /// 4 → 5: kidledger 0.3.0's membership operations 10–13 (relay grants, epochs, member relay
    /// keys) and the derived `relay` table they fill (issue 44). A schema-4 store holds none of
    /// them (a peer at protocol 4 gets them held back), so nothing is rewritten: the new version
    /// marks that the store may hold them from now on, so that kidledger 0.2.0 (schema 4) refuses
    /// it, naming the kidledger that wrote it, instead of failing on the first record it can't read.
    static func markRelayOperations(_ m: MigrationContext) throws {}
}

/// One schema step: what it does (for the log line and the docs) and the function that does it.
struct Migration: Sendable {
    /// The version the store has after this step.
    let to: UInt64
    /// One line: what changes.
    let summary: String
    /// Rewrites the store, inside the migration's write transaction (throwing aborts the whole
    /// migration: the store stays at its old version).
    let run: @Sendable (MigrationContext) throws -> Void
}

/// What a step gets: the write transaction and what rebuilding the derived state needs.
struct MigrationContext {
    /// The migration's write transaction.
    let store: any KeyValueWriter
    /// The time of the migration (the replica's injected clock).
    let now: Int64
    let verifier: any SignatureVerifier

    /// Recomputes every derived table (records, indexes, totals, membership, the digest) from
    /// the change log, as a revocation does (``Replica/rebuild(in:)``): the step for a change to
    /// a derived table's layout or rules, which needs no data rewritten.
    func rebuildDerivedState() throws {
        try Replica.withApplyContext(store, now: now, verifier: verifier, preparer: PlainPreparer()) {
            try Replica.rebuild(in: $0)
        }
    }
}

/// What ``Replica/init(store:clock:random:verifier:beforeMigrating:)`` reports of a migration.
public struct MigrationReport: Sendable, Equatable {
    /// The version the store had.
    public var from: UInt64
    /// The version it has now (``Migrations/current``).
    public var to: UInt64
    /// Each step's summary, in order.
    public var steps: [String]
}

extension Replica {
    /// The schema version of the store in `store`, or nil for an empty store (no replica yet), and
    /// the product version that last wrote it (when it says so: from schema 4).
    public static func storedSchema(_ store: any KeyValueStore) throws -> (version: UInt64, writer: String?)? {
        try store.read { r in
            guard let raw = try r.get(Tables.meta, Keys.schema) else { return nil }
            guard let version = Bytes.u64(raw) else { throw LedgerError.corrupted("schema version") }
            let writer = try r.get(Tables.meta, Keys.writer).map { String(decoding: $0, as: UTF8.self) }
            return (version, writer)
        }
    }

    /// Migrates the store to ``Migrations/current`` when it is older, in one write transaction
    /// (see ``Migrations``); nil when it was current (or another process migrated it meanwhile).
    static func migrate(_ store: any KeyValueStore, now: Int64, verifier: any SignatureVerifier) throws -> MigrationReport? {
        try store.write { w in
            guard let version = Bytes.u64(try w.get(Tables.meta, Keys.schema)) else { throw LedgerError.corrupted("schema version") }
            guard version < Migrations.current else { return nil }
            let context = MigrationContext(store: w, now: now, verifier: verifier)
            var summaries: [String] = []
            for step in Migrations.steps(from: version) {
                try step.run(context)
                summaries.append(step.summary)
            }
            try w.put(Tables.meta, Keys.schema, Bytes.u64(Migrations.current))
            try w.put(Tables.meta, Keys.writer, Array(KidLedgerVersion.current.utf8))
            return MigrationReport(from: version, to: Migrations.current, steps: summaries)
        }
    }
}

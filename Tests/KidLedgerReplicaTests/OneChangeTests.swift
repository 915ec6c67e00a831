import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerTestSupport
import Testing
@testable import KidLedgerReplica

/// Issue 42, point 3: a local change reads what it checks (the household, the membership gate, the
/// allowance periods due) in the write transaction that then writes (``Replica/change(_:)``).
@Suite("One write transaction per change")
struct OneChangeTests {
    let h = OwnedHousehold()

    /// A laptop with two replicas on one store, as the CLI and the daemon are two processes on one
    /// LMDB environment: `cli` over `interleaved` (which runs a step of the daemon just before its
    /// next write transaction begins), `daemon` over the store itself. The owner granted the spouse.
    func laptop() throws -> (owner: Replica, daemon: Replica, cli: Replica, interleaved: InterleavingStore) {
        let owner = try h.replica(1)
        owner.signer = h.signer(h.ownerKey)
        try owner.createHousehold(name: "Home", owner: h.ownerKey, salt: h.salt) { TestVerifier.sign($0, key: h.ownerKey) }
        try owner.addChild(name: "Ava")
        try owner.commitMembership([h.grant(h.spouseKey, name: "Dad")])
        let store = MemoryStore()
        let daemon = try Replica(store: store, clock: FixedClock(millis: 1_000_000), random: SplitMix64(seed: 2), verifier: TestVerifier())
        try daemon.pinHousehold(h.id, owner: h.ownerKey)
        try deliver(from: owner, to: daemon)
        let interleaved = InterleavingStore(store)
        let cli = try Replica(store: interleaved, clock: FixedClock(millis: 1_000_000), random: SplitMix64(seed: 3), verifier: TestVerifier())
        cli.signer = h.signer(h.spouseKey)
        return (owner, daemon, cli, interleaved)
    }

    /// Batches from `from` to `to` until nothing more is admitted.
    func deliver(from: Replica, to: Replica) throws {
        for _ in 0..<100 {
            let batch = try from.batch(notCoveredBy: try to.versionVector())
            if batch.changes.isEmpty { return }
            if try to.applyRemote(batch).applied == 0 { return }
        }
        Issue.record("delivery did not finish")
    }

    /// What the CLI's gate refuses with (attentionRequired).
    struct Refused: Error {}

    /// The owner revokes the spouse, and the spouse's daemon receives it, just before the spouse's
    /// give opens its write transaction. Checked in that transaction, the give is refused and
    /// nothing is written; checked in a read before it (as `give` did before this change), the give
    /// of a member revoked meanwhile is written after the revocation.
    @Test func revocationBetweenCheckAndWriteIsSeen() throws {
        for checkedInTheWrite in [true, false] {
            let (owner, daemon, cli, interleaved) = try laptop()
            let logged = try daemon.changeLog().count
            interleaved.beforeNextWrite = {
                try owner.commitMembership([h.revoke(h.spouseKey, seen: try owner.cut(of: h.spouseKey))])
                try deliver(from: owner, to: daemon)
            }
            if checkedInTheWrite {
                #expect(throws: Refused.self) {
                    try cli.change {
                        if try cli.isRevokedHere(h.spouseKey) { throw Refused() }
                        return try cli.post("Ava", signedCents: 100, note: "", source: "give")
                    }
                }
                #expect(try daemon.changeLog().count == logged + 1)  // the revocation, and no give
            } else {
                #expect(try !cli.isRevokedHere(h.spouseKey))
                _ = try? cli.post("Ava", signedCents: 100, note: "", source: "give")
                #expect(try daemon.changeLog().count == logged + 2)  // the revocation, then the give
            }
            #expect(interleaved.beforeNextWrite == nil)
        }
    }

    /// A change's checks, its allowance payments and its write are one write transaction and no
    /// read transaction (a `give` opened about ten before issue 42).
    @Test func aChangeIsOneWriteTransaction() throws {
        let (_, _, cli, interleaved) = try laptop()
        let (reads, writes) = (interleaved.reads, interleaved.writes)
        _ = try cli.change {
            _ = try cli.household()
            _ = try cli.members()
            _ = try cli.device.setting("memberKey")
            _ = try cli.isRevokedHere(h.spouseKey)
            _ = try cli.householdTimeZone()
            _ = try cli.payDueAllowances(now: 1_000_000)
            return try cli.post("Ava", signedCents: 100, note: "", source: "give")
        }
        #expect(interleaved.reads - reads == 0)
        #expect(interleaved.writes - writes == 1)
        #expect(try cli.children().first?.balanceCents == 100)
    }

    struct Failed: Error {}

    /// A change that throws writes nothing, and neither does one in which a write threw after it
    /// had begun to write, even when the change caught that error.
    @Test func aFailedChangeWritesNothingEvenWhenItCaughtATornWrite() throws {
        let (_, _, cli, _) = try laptop()
        #expect(throws: Failed.self) {
            try cli.change {
                try cli.post("Ava", signedCents: 100, note: "", source: "give")
                throw Failed()
            }
        }
        #expect(try cli.children().first?.balanceCents == 0)
        #expect(throws: Failed.self) {
            try cli.change {
                try cli.post("Ava", signedCents: 100, note: "", source: "give")
                try? cli.store.write { w -> Void in
                    try w.put(Tables.meta, Array("torn".utf8), [1])
                    throw Failed()
                }
            }
        }
        #expect(try cli.children().first?.balanceCents == 0)
        #expect(try cli.store.read { try $0.get(Tables.meta, Array("torn".utf8)) } == nil)
        // A write that throws before it writes tears nothing: the change goes on and commits.
        try cli.change {
            try? cli.store.write { _ -> Void in throw Failed() }
            try cli.post("Ava", signedCents: 100, note: "", source: "give")
        }
        #expect(try cli.children().first?.balanceCents == 100)
    }
}

/// A store that counts its transactions and runs ``beforeNextWrite`` (once) just before its next
/// write transaction begins: another process's commit, at the one moment a race needs it.
final class InterleavingStore: KeyValueStore {
    let base: any KeyValueStore
    var beforeNextWrite: (() throws -> Void)?
    private(set) var reads = 0
    private(set) var writes = 0

    init(_ base: any KeyValueStore) { self.base = base }

    func read<T>(_ body: (any KeyValueReader) throws -> T) throws -> T {
        reads += 1
        return try base.read(body)
    }

    func write<T>(_ body: (any KeyValueWriter) throws -> T) throws -> T {
        if let step = beforeNextWrite {
            beforeNextWrite = nil
            try step()
        }
        writes += 1
        return try base.write(body)
    }
}

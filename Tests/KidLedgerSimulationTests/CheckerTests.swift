import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerSimulation

/// Each checker can fail: fed a sequence of hooks (or a final state) that breaks its property,
/// it answers with the failure the run would report.
@Suite("Checkers fail on a violation")
struct CheckerTests {
    func sync(_ from: SimNode, _ to: SimNode) throws {
        try to.replica!.applyRemote(try from.replica!.batch(notCoveredBy: try to.replica!.versionVector()))
    }

    /// Two replicas of one household, set up as a seed would be, and the final checks' view of
    /// them once `prepare` has run.
    func run(_ prepare: (Simulator, SimNode, SimNode) throws -> Void) throws -> (Simulator, FinalRun) {
        let sim = try twoReplicaSimulator(seed: 5)
        try prepare(sim, sim.nodes[0], sim.nodes[1])
        return (sim, try sim.finalRun(sim.nodes))
    }

    /// Puts a false digest in a replica's meta table: its state is no longer what its changes give.
    func corruptDigest(_ node: SimNode) throws {
        try node.replica!.store.write { try $0.put(Tables.meta, Array("digest".utf8), [UInt8](repeating: 0xAB, count: 32)) }
    }

    @Test("allowance: a payment that is not at its period's derived id")
    func allowance() throws {
        let (_, run) = try run { sim, a, _ in
            let r = a.replica!
            try r.addChild(name: "Ava")
            try r.setAllowance("Ava", amountCents: 500, every: .week, on: nil, note: "")
            #expect(try !sim.payAllowances(a).isEmpty)
            // A second "allowance" entry with a random id, as a buggy client would write it.
            try r.post("Ava", signedCents: 500, note: "", source: Allowance.source)
        }
        let failures = try AllowanceChecker().finalCheck(.replica(0), run)
        #expect(failures.count == 1 && failures[0].contains("whose id is not its period's"), "\(failures)")
        #expect(try AllowanceChecker().finalCheck(.replica(1), run).isEmpty)
    }

    @Test("convergence: replicas with different digests")
    func convergence() throws {
        let (_, run) = try run { _, a, _ in _ = try a.replica!.addChild(name: "Ava") }
        let failures = try ConvergenceChecker().finalCheck(.converged, run)
        #expect(failures.count == 1 && failures[0].hasPrefix("digests differ: r0="), "\(failures)")
        #expect(ConvergenceChecker.notQuiet(within: 5) == "did not converge within 5 ms after the faults healed")
    }

    @Test("verify: a replica whose stored digest is false")
    func verify() throws {
        let (_, run) = try run { _, a, _ in try corruptDigest(a) }
        let failures = try VerifyChecker().finalCheck(.replica(0), run)
        #expect(!failures.isEmpty && failures.allSatisfy { $0.hasPrefix("r0 verify: ") }, "\(failures)")
        #expect(try VerifyChecker().finalCheck(.replica(1), run) == [])
    }

    @Test("at most one compensation: two undos of one original, and an undo of an undo")
    func compensation() {
        let child = RecordID(high: 1, low: 1), original = RecordID(high: 2, low: 2)
        let undo = RecordID(high: 3, low: 3), again = RecordID(high: 4, low: 4)
        let held = HeldTransactions([
            LedgerTransaction(id: original, childID: child, amountCents: 5, createdAtMillis: 1, source: "give"),
            LedgerTransaction(id: undo, childID: child, amountCents: -5, createdAtMillis: 2, source: "undo", reverses: original),
            LedgerTransaction(id: again, childID: child, amountCents: -5, createdAtMillis: 3, source: "undo", reverses: original),
            LedgerTransaction(id: RecordID(high: 5, low: 5), childID: child, amountCents: 5, createdAtMillis: 4, source: "undo", reverses: undo),
        ], content: 0)
        // Transactions are named by the short id traces and timelines give them (its random tail).
        #expect(CompensationChecker.problems(held) == ["holds an undo of an undo: transaction 00000005",
                                                      "compensates transaction 00000002 2 times"])
    }

    @Test("a batch is undone whole: compensations of some but not all of a batch's held entries")
    func batchUndoneWhole() {
        let child = RecordID(high: 1, low: 1)
        let x = RecordID(high: 2, low: 2), y = RecordID(high: 3, low: 3), z = RecordID(high: 4, low: 4)
        let batch = [x, y, z].map { LedgerTransaction(id: $0, childID: child, amountCents: 5, createdAtMillis: 1, source: "give-all") }
        func undo(_ t: LedgerTransaction) -> LedgerTransaction {
            LedgerTransaction(id: LedgerTransaction.undoID(for: t.id), childID: child, amountCents: -5, createdAtMillis: 2,
                              source: "undo", reverses: t.id)
        }
        let whole = HeldTransactions(batch + batch.map(undo), content: 0)
        #expect(CompensationChecker.problems(whole, batches: [[x, y, z], batch.map { undo($0).id }]) == [])
        let none = HeldTransactions(batch, content: 1)
        #expect(CompensationChecker.problems(none, batches: [[x, y, z]]) == [])
        let part = HeldTransactions(batch + [undo(batch[1])], content: 2)
        #expect(CompensationChecker.problems(part, batches: [[x, y, z]]) == ["compensates 1 of the 3 entries of the batch of transaction \(x.tail)"])
    }

    @Test("no lost acknowledged change: a committed change its replica does not hold")
    func acknowledgedChanges() throws {
        let (sim, run) = try run { _, _, _ in }
        let checker = AcknowledgedChangesChecker()
        let origin = sim.nodes[1].replica!.replicaID
        let never = LoggedChange(Change(origin: origin, sequence: 99, hlc: HLC(millis: 5),
                                        operations: [.setField(entity: RecordID(high: 1, low: 1), field: .childName, value: .text("Ava"))]))
        checker.committed(Carrier(node: 1, origin: origin, sequences: 99...99, changes: [never]), acknowledging: [])
        #expect(try checker.finalCheck(.ownChanges, run) == ["r1 lost its own change \(String(origin.rawValue, radix: 16)):99",
                                                             "r1 wrote under an origin not claimed for its account"])
    }

    @Test("the revocation rule: a replica holds a transaction only changes beyond the cut carried")
    func revocation() throws {
        var made = RecordID.zero
        var carried: [LoggedChange] = []
        let (sim, run) = try run { sim, a, b in
            _ = try a.replica!.addChild(name: "Ava")
            try sync(a, b)
            let before = try sim.ownSequence(b)
            made = try b.replica!.post("Ava", signedCents: 5, note: "", source: "give").transaction.id
            carried = try b.replica!.encodedChanges(of: b.replica!.replicaID, after: before).map(LoggedChange.init)
            try sync(b, a)
            try sim.revoke(1)  // having seen the post
            try sync(a, b)
        }
        let checker = RevocationChecker()
        // The hooks say the post came after the cut; both replicas hold it.
        let cut = try sim.nodes[1].replica!.heldSequence(of: sim.nodes[1].replica!.replicaID)
        checker.committed(Carrier(node: 1, origin: sim.nodes[1].replica!.replicaID, sequences: (cut + 1)...(cut + 1),
                                  changes: carried), acknowledging: [made])
        #expect(try checker.finalCheck(.membership, run) == [])
        #expect(try checker.finalCheck(.revocationRule, run) == ["r0 holds transaction \(made.tail), made by revoked r1 after the revocation"])
        #expect(run.rejected == [made])
    }

    @Test("equal membership: a replica that has not heard of a revocation")
    func membership() throws {
        let (_, run) = try run { sim, _, _ in try sim.revoke(1) }
        let failures = try RevocationChecker().finalCheck(.membership, run)
        #expect(failures.first == "r1 lists other members than r0", "\(failures)")
    }

    @Test("no partial batch: a replica shows one of a batch's two transactions")
    func batchAtomicity() throws {
        let sim = try twoReplicaSimulator(seed: 5)
        let a = sim.nodes[0]
        _ = try a.replica!.addChild(name: "Ava")
        let held = try a.replica!.post("Ava", signedCents: 5, note: "", source: "give").transaction.id
        let checker = BatchAtomicityChecker()
        checker.madeBatch([held, RecordID(high: 9, low: 9)])
        #expect(try checker.checkpoint(sim.nodes, only: [1]) == [])
        #expect(try checker.checkpoint(sim.nodes, only: nil) == ["r0 shows 1 of 2 transactions of the batch of transaction \(held.tail)"])
    }

    @Test("no partial batch: the part a replica holds as another maker's (a derived undo id) is no part of the batch; its maker's own is")
    func batchAtomicityByMaker() throws {
        let sim = try twoReplicaSimulator(seed: 5)
        let a = sim.nodes[0]
        _ = try a.replica!.addChild(name: "Ava")
        let held = try a.replica!.post("Ava", signedCents: 5, note: "", source: "give").transaction.id
        let author = try #require(try a.replica!.transactionAuthors([held, RecordID(high: 9, low: 9)]).first ?? nil)
        #expect(try a.replica!.transactionAuthors([RecordID(high: 9, low: 9)]) == [nil])
        let other = BatchAtomicityChecker()
        other.madeBatch([held, RecordID(high: 9, low: 9)], maker: ReplicaID(author.rawValue &+ 1))
        #expect(try other.checkpoint(sim.nodes, only: nil) == [], "r0 holds the shared id as another's: not the batch")
        let own = BatchAtomicityChecker()
        own.madeBatch([held, RecordID(high: 9, low: 9)], maker: author)
        #expect(try own.checkpoint(sim.nodes, only: nil) == ["r0 shows 1 of 2 transactions of the batch of transaction \(held.tail)"])
    }

    @Test("balances equal sums: a replica lacks a child the changes hold")
    func balance() throws {
        var child = RecordID.zero
        let (_, run) = try run { _, a, _ in child = try a.replica!.addChild(name: "Ava").id }
        #expect(try BalanceChecker().finalCheck(.referenceModel, run)
                    == ["r1 differs from the reference model: \(child.hex.prefix(8)) is missing, model says Ava 0"])
    }

    @Test("three-path equivalence: equal digests that a full sync from empty does not give")
    func equivalence() throws {
        let (_, run) = try run { _, a, b in
            _ = try a.replica!.addChild(name: "Ava")
            try sync(a, b)
            try corruptDigest(a)
            try corruptDigest(b)
        }
        let checker = EquivalenceChecker()
        let failures = try checker.finalCheck(.equivalence, run)
        #expect(failures.count == 1 && failures[0].hasPrefix("equivalence: a full sync from empty (from r1) gives digest"), "\(failures)")
        #expect(checker.ways == 2)
    }
}

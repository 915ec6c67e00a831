import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol
@testable import KidLedgerSimulation
import KidLedgerTestSupport

/// The checks memo answers what computing the checks afresh answers, and sessions sharing one
/// send exactly what sessions without one send.
@Suite("Checks memo")
struct ChecksMemoTests {
    /// Totals of `children` children, drawn from `rng` (few distinct values, so they repeat).
    func totals(_ rng: inout SplitMix64, children: Int) -> [RecordID: Aggregate] {
        var result: [RecordID: Aggregate] = [:]
        for i in 0..<children {
            var aggregate = Aggregate()
            aggregate.count = rng.next() % 3
            aggregate.sumCents = Int128(Int64(rng.next() % 5) - 2)
            result[RecordID(bytes: [UInt8](repeating: UInt8(i + 1), count: 16))] = aggregate
        }
        return result
    }

    @Test("kept answers equal fresh ones, through repeats and evictions")
    func answersEqualFreshOnes() {
        let memo = ChecksMemo()
        var rng = SplitMix64(seed: 7)
        var seen: [[RecordID: Aggregate]] = []
        for step in 0..<400 {
            // Half the time totals asked before (maybe evicted since), else new ones.
            let asked = !seen.isEmpty && rng.next() % 2 == 0
                ? seen[Int(rng.next() % UInt64(seen.count))]
                : totals(&rng, children: Int(rng.next() % 4))
            seen.append(asked)
            let kept = memo.checks(of: asked), fresh = ComputedChildChecks().checks(of: asked)
            #expect(kept.checks == fresh.checks, "step \(step)")
            #expect(kept.digest == fresh.digest, "step \(step)")
            #expect(kept.checks.map(\.child) == asked.keys.sorted())
        }
    }

    @Test("different totals give different digests")
    func differentTotalsDiffer() {
        let memo = ChecksMemo()
        var a: [RecordID: Aggregate] = [RecordID(bytes: [UInt8](repeating: 1, count: 16)): Aggregate()]
        let first = memo.checks(of: a).digest
        a[a.keys.first!]!.sumCents = 5
        #expect(memo.checks(of: a).digest != first)
    }

    @Test("sessions sharing a memo send what sessions without one send")
    func sessionsSendTheSame() throws {
        func run(memo: ChecksMemo?) throws -> [[Message]] {
            let a = try Fixture.replica(1), b = try Fixture.replica(2), c = try Fixture.replica(3)
            let h = try Fixture.household([a, b, c])
            var sent: [[Message]] = []
            for (round, (x, y)) in [(a, b), (b, c), (a, c), (c, b), (a, b)].enumerated() {
                try Fixture.give(x, round + 1, cents: Int64(100 * round + 1))
                let ends = [SyncSession(role: .initiator, replica: x, household: h),
                            SyncSession(role: .responder, replica: y, household: h)]
                if let memo { for end in ends { end.childChecks = memo } }
                let d = Driver.run(ends[0], ends[1])
                #expect(d.bothFinished)
                sent.append(d.sentByA)
                sent.append(d.sentByB)
            }
            return sent
        }
        let memo = ChecksMemo()
        #expect(try run(memo: memo) == run(memo: nil))
    }
}

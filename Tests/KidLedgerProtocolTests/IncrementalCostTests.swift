import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol
import KidLedgerTestSupport

/// An incremental sync costs what is missing and how many replicas there are, not the ledger's
/// size: one new change on top of a small and a large shared history moves one change and the
/// same number of bytes (up to the few bytes by which the vector's sequence numbers grow).
@Suite("Incremental sync cost")
struct IncrementalCostTests {
    func incrementalBytes(history: Int) throws -> (bytes: Int, sent: Int) {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        try Fixture.give(a, history)
        #expect(Fixture.sync(a, b, household: h).bothFinished)
        try Fixture.give(b, 1, cents: 5)
        let d = Fixture.sync(a, b, household: h)
        #expect(d.bothFinished)
        #expect(try a.digest() == b.digest())
        let s = try #require(d.summaryA)
        return (s.bytesSent + s.bytesReceived, s.changesSent + (d.summaryB?.changesSent ?? 0))
    }

    @Test func oneChangeOnTopOfAnyHistory() throws {
        let small = try incrementalBytes(history: 10)
        let large = try incrementalBytes(history: 2_000)
        #expect(small.sent == 1 && large.sent == 1)
        #expect(abs(large.bytes - small.bytes) <= 8, "\(small.bytes) vs \(large.bytes) bytes")
        #expect(large.bytes < 1_024)
    }
}

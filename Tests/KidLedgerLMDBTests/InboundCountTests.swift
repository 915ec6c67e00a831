import Foundation
import Testing
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTestSupport

/// The daemon records each completed session another laptop opened (`DeviceState.recordInbound`)
/// from the session's own thread: two ending at once must both count, in the totals `status`
/// shows (`inboundSessions`) and in the member's record.
@Suite("Inbound sessions counted on a real LMDB store")
struct InboundCountTests {
    static func member(_ n: Int) -> [UInt8] { [UInt8](repeating: UInt8(n), count: 32) }

    /// An LMDB store on which another session's record commits just before the first write
    /// transaction of the call under test begins: after anything that call read in a transaction
    /// of its own, the moment a count read in one transaction and written in another loses.
    final class CompetingWriterStore: KeyValueStore {
        let inner: LMDBEnvironment
        var competing: (() throws -> Void)?

        init(_ inner: LMDBEnvironment, competing: @escaping () throws -> Void) {
            self.inner = inner
            self.competing = competing
        }

        func read<T>(_ body: (any KeyValueReader) throws -> T) throws -> T { try inner.read(body) }

        func write<T>(_ body: (any KeyValueWriter) throws -> T) throws -> T {
            if let competing {
                self.competing = nil
                try competing()
            }
            return try inner.write(body)
        }
    }

    @Test("a session recorded while another one's record commits: both count")
    func competingCommitCounts() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: Tables.all, durable: false)
            let clock = FixedClock(millis: 1_000)
            let store = CompetingWriterStore(env) {
                try DeviceState(store: env, clock: clock).recordInbound(member: Self.member(1), from: "10.0.0.2", SyncOutcome())
            }
            try DeviceState(store: store, clock: clock).recordInbound(member: Self.member(1), from: "10.0.0.2", SyncOutcome())
            #expect(store.competing == nil, "the competing record ran")
            let device = DeviceState(store: env, clock: clock)
            #expect(try device.inboundTotals().sessions == 2)
            #expect(try device.inbound().map(\.sessions) == [2])
        }
    }

    @Test("sessions recorded from many threads at once: every one counts")
    func concurrentRecordsCount() throws {
        let threads = 4, each = 50
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: Tables.all, durable: false)
            let failures = Failures()
            DispatchQueue.concurrentPerform(iterations: threads) { worker in
                // Like the daemon: each session's thread has its own device state over the shared store.
                let device = DeviceState(store: env, clock: FixedClock(millis: Int64(1_000 + worker)))
                for n in 0..<each {
                    // Two threads per member: a member's record is contended too.
                    let outcome = SyncOutcome(receipt: [ReplicaID(UInt64(worker + 1)): UInt64(n + 1)])
                    do { try device.recordInbound(member: Self.member(worker % 2), from: "10.0.0.\(worker)", outcome) } catch {
                        failures.add("\(error)")
                    }
                }
            }
            #expect(failures.all.isEmpty)
            let device = DeviceState(store: env, clock: FixedClock(millis: 0))
            #expect(try device.inboundTotals().sessions == threads * each)
            #expect(try device.inbound().map(\.sessions) == [threads / 2 * each, threads / 2 * each])
        }
    }
}

import Synchronization
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerDaemon

/// The CLI's two-thread splitter: every item produced once, consumed in order only after it was
/// produced, and nothing produced after it returns, also when a consumer throws.
@Suite("Threaded work splitter")
struct ThreadedWorkTests {
    /// How often each item was produced and discarded, and whether it was consumed before its
    /// discard.
    final class Log: Sendable {
        let produced: Mutex<[Int]>
        let discarded: Mutex<[Int]>
        let consumed: Mutex<[Bool]>
        let discardedBeforeConsumed = Mutex(0)
        init(_ count: Int) {
            produced = Mutex([Int](repeating: 0, count: count))
            discarded = Mutex([Int](repeating: 0, count: count))
            consumed = Mutex([Bool](repeating: false, count: count))
        }
        func note(_ i: Int) { produced.withLock { $0[i] += 1 } }
        func times(_ i: Int) -> Int { produced.withLock { $0[i] } }
        func consume(_ i: Int) { consumed.withLock { $0[i] = true } }
        func discard(_ i: Int) {
            if !consumed.withLock({ $0[i] }) { discardedBeforeConsumed.withLock { $0 += 1 } }
            discarded.withLock { $0[i] += 1 }
        }
        var total: Int { produced.withLock { $0.reduce(0, +) } }
        var most: Int { produced.withLock { $0.max() ?? 0 } }
        /// Whether every produced item was discarded exactly once.
        var discardsMatch: Bool { produced.withLock { p in discarded.withLock { $0 == p } } }
    }

    struct Stop: Error {}

    @Test("each item produced once and consumed in order after it", arguments: [0, 1, 63, 64, 65, 1_000, 20_000])
    func order(count: Int) throws {
        let log = Log(count)
        var consumed: [Int] = []
        try ThreadedWork(parallel: true).pipeline(count, produce: { i in log.note(i) }, consume: { i in
            #expect(log.times(i) == 1, "item \(i) consumed before it was produced")
            log.consume(i)
            consumed.append(i)
        }, discard: { i in log.discard(i) })
        #expect(consumed == Array(0..<count))
        #expect(log.total == count)
        #expect(log.most <= 1)
        #expect(log.discardsMatch)
        #expect(log.discardedBeforeConsumed.withLock { $0 } == 0)
    }

    @Test("a throwing consumer stops the producer, and nothing is produced after the call returns")
    func stopsOnThrow() throws {
        let count = 50_000
        let log = Log(count)
        #expect(throws: Stop.self) {
            try ThreadedWork(parallel: true).pipeline(count, produce: { i in log.note(i) }, consume: { i in
                if i == 100 { throw Stop() }
                log.consume(i)
            }, discard: { i in log.discard(i) })
        }
        let atReturn = log.total
        #expect(atReturn >= 101)
        #expect(log.most <= 1)
        // The producer had finished (or stopped) before the call returned.
        for _ in 0..<1_000 { _ = log.most }
        #expect(log.total == atReturn)
        // Everything produced was discarded before the call returned, also what was never consumed.
        #expect(log.discardsMatch)
    }
}

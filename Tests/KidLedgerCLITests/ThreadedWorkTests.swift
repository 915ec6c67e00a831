import Synchronization
import Testing
@testable import KidLedgerCLI

/// The CLI's two-thread splitter: every item produced once, consumed in order only after it was
/// produced, and nothing produced after it returns, also when a consumer throws.
@Suite("Threaded work splitter")
struct ThreadedWorkTests {
    /// How often each item was produced.
    final class Log: Sendable {
        let produced: Mutex<[Int]>
        init(_ count: Int) { produced = Mutex([Int](repeating: 0, count: count)) }
        func note(_ i: Int) { produced.withLock { $0[i] += 1 } }
        func times(_ i: Int) -> Int { produced.withLock { $0[i] } }
        var total: Int { produced.withLock { $0.reduce(0, +) } }
        var most: Int { produced.withLock { $0.max() ?? 0 } }
    }

    struct Stop: Error {}

    @Test("each item produced once and consumed in order after it", arguments: [0, 1, 63, 64, 65, 1_000, 20_000])
    func order(count: Int) throws {
        let log = Log(count)
        var consumed: [Int] = []
        try ThreadedWork(parallel: true).pipeline(count, produce: { i in log.note(i) }, consume: { i in
            #expect(log.times(i) == 1, "item \(i) consumed before it was produced")
            consumed.append(i)
        })
        #expect(consumed == Array(0..<count))
        #expect(log.total == count)
        #expect(log.most <= 1)
    }

    @Test("a throwing consumer stops the producer, and nothing is produced after the call returns")
    func stopsOnThrow() throws {
        let count = 50_000
        let log = Log(count)
        #expect(throws: Stop.self) {
            try ThreadedWork(parallel: true).pipeline(count, produce: { i in log.note(i) }, consume: { i in
                if i == 100 { throw Stop() }
            })
        }
        let atReturn = log.total
        #expect(atReturn >= 101)
        #expect(log.most <= 1)
        // The producer had finished (or stopped) before the call returned.
        for _ in 0..<1_000 { _ = log.most }
        #expect(log.total == atReturn)
    }
}

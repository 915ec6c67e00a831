import Foundation
import KidLedgerDomain
import KidLedgerTransport
import Synchronization
import Testing
import KidLedgerTestSupport

@Suite struct BackoffTests {
    @Test func ceilingDoublesAndCaps() {
        var backoff = Backoff(baseMillis: 500, capMillis: 60_000)
        var rng = SplitMix64(seed: 7)
        var ceilings: [Int64] = []
        for _ in 0..<12 {
            ceilings.append(backoff.ceilingMillis)
            _ = backoff.nextDelayMillis(using: &rng)
        }
        #expect(ceilings == [500, 1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000, 60_000, 60_000, 60_000])
        for _ in 0..<200 { _ = backoff.nextDelayMillis(using: &rng) }
        #expect(backoff.ceilingMillis == 60_000)
        backoff.reset()
        #expect(backoff.attempt == 0 && backoff.ceilingMillis == 500)
    }

    @Test func jitterStaysWithinBoundsAndSpreads() {
        var rng = SplitMix64(seed: 42)
        for attempt in 0..<10 {
            var samples: [Int64] = []
            for _ in 0..<200 {
                var backoff = Backoff(baseMillis: 100, capMillis: 10_000)
                for _ in 0..<attempt { _ = backoff.nextDelayMillis(using: &rng) }
                let ceiling = backoff.ceilingMillis
                let delay = backoff.nextDelayMillis(using: &rng)
                #expect(delay >= 0 && delay <= ceiling)
                samples.append(delay)
            }
            let ceiling = min(Int64(100) << Int64(attempt), 10_000)
            // Full jitter: the samples cover the range, not one point.
            #expect(samples.min()! < ceiling / 4 && samples.max()! > ceiling * 3 / 4)
        }
    }

    @Test func degenerateParametersAreClamped() {
        var rng = SplitMix64(seed: 1)
        var backoff = Backoff(baseMillis: 0, capMillis: -5)
        #expect(backoff.baseMillis == 1 && backoff.capMillis == 1)
        for _ in 0..<100 { #expect((0...1).contains(backoff.nextDelayMillis(using: &rng))) }
        var huge = Backoff(baseMillis: Int64.max / 2, capMillis: Int64.max)
        for _ in 0..<70 { #expect(huge.nextDelayMillis(using: &rng) >= 0) }
        #expect(huge.ceilingMillis == Int64.max)
    }
}

@Suite struct ConnectionLimiterTests {
    @Test func refusesBeyondMaximum() {
        let limiter = ConnectionLimiter(maximum: 3)
        #expect(limiter.tryAcquire() && limiter.tryAcquire() && limiter.tryAcquire())
        #expect(!limiter.tryAcquire())
        #expect(limiter.active == 3)
        limiter.release()
        #expect(limiter.tryAcquire())
        #expect(!limiter.tryAcquire())
        for _ in 0..<5 { limiter.release() }
        #expect(limiter.active == 0)
    }

    @Test func countsCorrectlyAcrossThreads() {
        let limiter = ConnectionLimiter(maximum: 5)
        let granted = Background<Int> {
            let total = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                var mine = 0
                for _ in 0..<1000 {
                    if limiter.tryAcquire() {
                        mine += 1
                        #expect(limiter.active <= 5)
                        limiter.release()
                    }
                }
                total.add(mine, ordering: .relaxed)
            }
            return total.load(ordering: .relaxed)
        }.wait()
        #expect(granted != nil && granted! > 0)
        #expect(limiter.active == 0)
    }
}

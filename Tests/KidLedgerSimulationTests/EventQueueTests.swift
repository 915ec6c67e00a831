import KidLedgerDomain
import Testing
@testable import KidLedgerSimulation

/// The queue pops events by (time, insertion order), whatever the interleaving of schedules and pops.
@Suite struct EventQueueTests {
    @Test func popsInTimeThenInsertionOrder() {
        var rng = SplitMix64(seed: 3)
        var queue = EventQueue<[Int]>()
        var reference: [(time: Int64, order: Int, event: [Int])] = []
        var order = 0
        for _ in 0..<5_000 {
            if Int.random(in: 0..<3, using: &rng) > 0 {
                let time = Int64.random(in: 0..<50, using: &rng)
                let event = [order, Int(time)]
                queue.schedule(at: time, event)
                reference.append((time, order, event))
                order += 1
            } else {
                let popped = queue.pop()
                guard let i = reference.indices.min(by: { (reference[$0].time, reference[$0].order) < (reference[$1].time, reference[$1].order) }) else {
                    #expect(popped == nil)
                    continue
                }
                let want = reference.remove(at: i)
                #expect(popped?.time == want.time)
                #expect(popped?.event == want.event)
            }
            #expect(queue.count == reference.count)
        }
        while let popped = queue.pop() {
            let i = reference.indices.min { (reference[$0].time, reference[$0].order) < (reference[$1].time, reference[$1].order) }!
            let want = reference.remove(at: i)
            #expect(popped.time == want.time && popped.event == want.event)
        }
        #expect(reference.isEmpty && queue.isEmpty)
    }
}

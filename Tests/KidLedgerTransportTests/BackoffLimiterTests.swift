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
    static func limiter(_ total: Int, unadmitted: Int, perAddress: Int) -> ConnectionLimiter {
        ConnectionLimiter(.init(connectionsMax: total, unadmittedMax: unadmitted, perAddressMax: perAddress))
    }

    @Test func refusesBeyondMaximum() throws {
        let limiter = Self.limiter(3, unadmitted: 3, perAddress: 3)
        var slots = try (0..<3).map { i in try limiter.tryAcquire(address: "10.0.0.\(i)").get() }
        slots.forEach(limiter.admit)
        #expect(limiter.tryAcquire(address: "10.0.0.9") == .failure(.full(3)))
        #expect(limiter.active == 3)
        limiter.release(slots.removeFirst())
        slots.append(try limiter.tryAcquire(address: "10.0.0.9").get())
        #expect(limiter.tryAcquire(address: "10.0.0.9") == .failure(.full(3)))
        slots.forEach(limiter.release)
        #expect(limiter.active == 0 && limiter.unadmitted == 0)
    }

    @Test func oneAddressGetsAtMostItsShare() throws {
        let limiter = Self.limiter(16, unadmitted: 8, perAddress: 4)
        let held = try (0..<4).map { _ in try limiter.tryAcquire(address: "192.168.1.66").get() }
        let refusal = ConnectionLimiter.Refusal.address("192.168.1.66", 4)
        #expect(limiter.tryAcquire(address: "192.168.1.66") == .failure(refusal))
        #expect(refusal.reason == "busy: too many connections from 192.168.1.66 (4 at most); try again later")
        // Admitted or not, they count against their address; another address is served.
        held.forEach(limiter.admit)
        #expect(limiter.tryAcquire(address: "192.168.1.66") == .failure(refusal))
        let other = try limiter.tryAcquire(address: "192.168.1.20").get()
        limiter.release(held[0])
        let again = try limiter.tryAcquire(address: "192.168.1.66").get()
        for slot in held.dropFirst() + [other, again] { limiter.release(slot) }
        #expect(limiter.active == 0)
    }

    @Test func strangersCannotTakeTheSlotsOfAdmittedMembers() throws {
        let limiter = Self.limiter(6, unadmitted: 3, perAddress: 2)
        // Strangers from two addresses hold 3 unadmitted slots: a third address is refused for now
        // (it would also start unadmitted)...
        let strangers = try ["10.0.0.1", "10.0.0.1", "10.0.0.2"].map { try limiter.tryAcquire(address: $0).get() }
        #expect(limiter.tryAcquire(address: "10.0.0.3") == .failure(.unadmittedFull(3)))
        // ...but a member admitted before keeps its slot, and once one stranger is gone, members
        // come in and, admitted, use the rest: the strangers never reach them.
        limiter.release(strangers[2])
        var members: [ConnectionLimiter.Slot] = []
        for i in 0..<4 {
            let member = try limiter.tryAcquire(address: "10.0.1.\(i)").get()
            limiter.admit(member)
            members.append(member)
        }
        #expect(limiter.unadmitted == 2 && limiter.active == 6)
        #expect(limiter.tryAcquire(address: "10.0.0.2") == .failure(.full(6)))
        for slot in strangers.prefix(2) + members { limiter.release(slot) }
        #expect(limiter.active == 0 && limiter.unadmitted == 0)
    }

    @Test func aNewConnectionTakesThePlaceOfTheOldestStrangerFromTheBusiestAddress() throws {
        let limiter = Self.limiter(5, unadmitted: 3, perAddress: 2)
        let closed = Mutex<[String]>([])
        func acquire(_ address: String, _ name: String) throws -> ConnectionLimiter.Slot {
            try limiter.tryAcquire(address: address, evict: { closed.withLock { $0.append(name) } }).get()
        }
        let a1 = try acquire("10.0.0.1", "a1"), a2 = try acquire("10.0.0.1", "a2"), b = try acquire("10.0.0.2", "b")
        // Full: a member from a third address takes the place of the oldest from the address
        // holding the most (10.0.0.1, two).
        let member = try acquire("10.0.1.1", "member")
        #expect(closed.withLock { $0 } == ["a1"])
        #expect(limiter.wasEvicted(a1) && !limiter.wasEvicted(a2))
        #expect(limiter.unadmitted == 3 && limiter.active == 3)
        limiter.admit(member)
        // Admitted, the member left the share not admitted: the next one fits without closing any.
        let c = try acquire("10.0.0.3", "c")
        #expect(closed.withLock { $0 } == ["a1"])
        // Full again, each address holding one: the oldest goes (a2), never the admitted member.
        let d = try acquire("10.0.0.4", "d")
        #expect(closed.withLock { $0 } == ["a1", "a2"])
        // Released by their holders later: counted once.
        limiter.release(a1)
        limiter.release(a2)
        #expect(limiter.unadmitted == 3 && limiter.active == 4)
        // A slot taken without an action that closes it is never evicted.
        let plain = try limiter.tryAcquire(address: "10.0.0.5").get()
        let e = try acquire("10.0.0.6", "e")
        #expect(closed.withLock { $0 } == ["a1", "a2", "b", "c"])
        #expect(!limiter.wasEvicted(plain) && limiter.active == 4)
        for slot in [b, c, member, d, plain, e] { limiter.release(slot) }
        #expect(limiter.active == 0 && limiter.unadmitted == 0)
    }

    @Test func countsCorrectlyAcrossThreads() {
        let limiter = Self.limiter(5, unadmitted: 3, perAddress: 4)
        let granted = Background<Int> {
            let total = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 8) { thread in
                var mine = 0
                for i in 0..<1000 {
                    if case .success(let slot) = limiter.tryAcquire(address: "10.0.0.\(thread % 2)") {
                        mine += 1
                        #expect(limiter.active <= 5 && limiter.unadmitted <= 3)
                        if i % 2 == 0 { limiter.admit(slot) }
                        limiter.release(slot)
                    }
                }
                total.add(mine, ordering: .relaxed)
            }
            return total.load(ordering: .relaxed)
        }.wait()
        #expect(granted != nil && granted! > 0)
        #expect(limiter.active == 0 && limiter.unadmitted == 0)
    }
}

import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB

/// The simulation's one notion of time, shared by every replica's clock.
final class SimTime: @unchecked Sendable {
    /// Virtual Unix milliseconds (starts at a fixed date so times look real).
    var millis: Int64 = 1_800_000_000_000
}

/// A replica's wall clock: the simulation's time plus this replica's skew.
struct SkewedClock: WallClock {
    let time: SimTime
    let skew: Int64
    func nowMillis() -> Int64 { time.millis + skew }
}

/// One simulated device: its durable store, its running replica (nil while crashed), and an
/// optional stale copy of its files to restore from.
final class SimNode {
    let index: Int
    var store: any KeyValueStore
    var replica: Replica?
    var staleCopy: MemoryStore?
    var skew: Int64
    var incarnation: UInt64 = 0
    let lmdbDirectory: String?

    init(index: Int, store: any KeyValueStore, skew: Int64, lmdbDirectory: String?) {
        self.index = index
        self.store = store
        self.skew = skew
        self.lmdbDirectory = lmdbDirectory
    }

    var name: String { "r\(index)" }
    var isUp: Bool { replica != nil }

    /// Starts (or restarts) the replica from the durable store.
    func boot(time: SimTime, seed: UInt64) throws {
        incarnation += 1
        let generator = SplitMix64(seed: seed &+ UInt64(index) &* 0x1000_0001 &+ incarnation &* 0x9E37_79B9)
        replica = try Replica(store: store, clock: SkewedClock(time: time, skew: skew), random: generator)
    }

    /// Drops the running replica; only committed state survives.
    func crash() {
        replica = nil
    }
}

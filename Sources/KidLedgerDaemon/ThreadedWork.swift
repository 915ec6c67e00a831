import Glibc
import KidLedgerReplica
import Synchronization

/// The CLI's ``WorkSplitter``: while the calling thread applies a received batch change by
/// change, one more thread prepares the changes ahead of it (their encodings and hashes, which
/// depend on the change alone). The result is the same as on one thread; only the wall time
/// changes. On a one-processor machine, or for a small batch, everything stays on the calling
/// thread.
public struct ThreadedWork: WorkSplitter {
    /// Whether a second thread is worth it.
    let parallel: Bool

    /// A second thread when the machine has more than one online processor.
    public static func forThisMachine() -> ThreadedWork {
        ThreadedWork(parallel: sysconf(Int32(_SC_NPROCESSORS_ONLN)) > 1)
    }

    /// Below this many items the hand-off costs more than it saves.
    static let itemsMin = 64

    private final class Progress: Sendable {
        /// How many items are produced (0..<produced).
        let produced = Atomic<Int>(0)
        /// How many items are consumed.
        let consumed = Atomic<Int>(0)
        /// Set by the caller when it consumes no more: produce nothing more, discard the rest.
        let stop = Atomic<Bool>(false)
    }

    /// The producer's work, handed to its thread.
    private final class Job: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    public func pipeline(_ count: Int, produce: @escaping @Sendable (Int) -> Void, consume: (Int) throws -> Void,
                  discard: @escaping @Sendable (Int) -> Void) throws {
        guard parallel, count >= Self.itemsMin else {
            return try SequentialWork().pipeline(count, produce: produce, consume: consume, discard: discard)
        }
        let progress = Progress()
        // A thread of its own, not a Dispatch worker: the caller may itself be one (Swift
        // concurrency, a test), and a full pool spinning on producers queued behind it would never
        // let them run. The producer also discards, so what it allocated is freed by its own
        // thread: freeing into another thread's malloc arena takes that arena's lock, and the two
        // threads then spend their time waking each other.
        let job = Unmanaged.passRetained(Job {
            var produced = 0
            while produced < count && !progress.stop.load(ordering: .relaxed) {
                produce(produced)
                produced += 1
                progress.produced.store(produced, ordering: .releasing)
            }
            var discarded = 0
            while discarded < produced {
                let stopped = progress.stop.load(ordering: .acquiring)
                let limit = stopped ? produced : min(produced, progress.consumed.load(ordering: .acquiring))
                while discarded < limit {
                    discard(discarded)
                    discarded += 1
                }
                if discarded < produced { usleep(50) }
            }
        })
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { context in
            Unmanaged<Job>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, job.toOpaque())
        guard started == 0 else {
            job.release()
            return try SequentialWork().pipeline(count, produce: produce, consume: consume, discard: discard)
        }
        defer {
            progress.stop.store(true, ordering: .releasing)
            pthread_join(thread, nil)
        }
        for i in 0..<count {
            // The producer is usually ahead (the two sides cost about the same per item, and
            // the producer starts first); wait for it when it is not, yielding the processor.
            var spins = 0
            while progress.produced.load(ordering: .acquiring) <= i {
                spins += 1
                if spins > 100 { sched_yield() }
            }
            try consume(i)
            progress.consumed.store(i + 1, ordering: .releasing)
        }
    }
}

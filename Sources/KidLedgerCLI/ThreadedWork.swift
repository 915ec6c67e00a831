import Glibc
import KidLedgerReplica
import Synchronization

/// The CLI's ``WorkSplitter``: while the calling thread applies a received batch change by
/// change, one more thread prepares the changes ahead of it (their encodings and hashes, which
/// depend on the change alone). The result is the same as on one thread; only the wall time
/// changes. On a one-processor machine, or for a small batch, everything stays on the calling
/// thread.
struct ThreadedWork: WorkSplitter {
    /// Whether a second thread is worth it.
    let parallel: Bool

    /// A second thread when the machine has more than one online processor.
    static func forThisMachine() -> ThreadedWork {
        ThreadedWork(parallel: sysconf(Int32(_SC_NPROCESSORS_ONLN)) > 1)
    }

    /// Below this many items the hand-off costs more than it saves.
    static let itemsMin = 64

    private final class Progress: Sendable {
        /// How many items are produced (0..<produced).
        let produced = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
    }

    /// The producer's work, handed to its thread.
    private final class Job: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    func pipeline(_ count: Int, produce: @escaping @Sendable (Int) -> Void, consume: (Int) throws -> Void) throws {
        guard parallel, count >= Self.itemsMin else {
            return try SequentialWork().pipeline(count, produce: produce, consume: consume)
        }
        let progress = Progress()
        // A thread of its own, not a Dispatch worker: the caller may itself be one (the daemon's
        // sessions, Swift concurrency), and a full worker pool spinning on producers queued behind
        // it would never let them run.
        let job = Unmanaged.passRetained(Job {
            for i in 0..<count {
                if progress.stop.load(ordering: .relaxed) { break }
                produce(i)
                progress.produced.store(i + 1, ordering: .releasing)
            }
        })
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { context in
            Unmanaged<Job>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, job.toOpaque())
        guard started == 0 else {
            job.release()
            return try SequentialWork().pipeline(count, produce: produce, consume: consume)
        }
        defer {
            progress.stop.store(true, ordering: .relaxed)
            pthread_join(thread, nil)
        }
        for i in 0..<count {
            // The producer is normally far ahead (producing costs a third of consuming); wait
            // for it only at the start, yielding the processor while it is not ready.
            var spins = 0
            while progress.produced.load(ordering: .acquiring) <= i {
                spins += 1
                if spins > 100 { sched_yield() }
            }
            try consume(i)
        }
    }
}

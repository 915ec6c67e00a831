import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica
import KidLedgerLMDB

extension Simulator {
    /// The replica stops (only committed state survives) and its connections drop; a drawn crash
    /// schedules its restart, a scripted one waits for `restart`.
    func crash(_ node: SimNode, scheduleRestart: Bool = true) {
        node.crash()
        count("crash")
        log("\(node.name) crash")
        record(node.index, .crash)
        diagram?.mark(.crash, node.index, at: time.millis - startMillis)
        for id in connections.keys.sorted() where connections[id]!.ends.contains(node.index) {
            drop(connection: id, reason: "\(node.name) crashed")
        }
        if scheduleRestart { queue.schedule(at: time.millis + jitter(1_000), .restart(node.index)) }
    }

    /// Restarts a crashed replica from its files; from its stale copy when `stale` says so (nil:
    /// as the seed draws). Returns whether it came back from the stale copy.
    @discardableResult
    func restart(_ node: SimNode, stale: Bool? = nil) throws -> Bool {
        guard !node.isUp else { return false }
        var restored = false
        if let copy = node.staleCopy, stale ?? chance(parameters.staleRestorePerMille) {
            // Built once: the losses are read from a clone of it, and the node comes back on it.
            let restoredFiles = copy.materialize()
            try restoring(node, restoredFiles)
            node.store = restoredFiles
            count("staleRestore")
            log("\(node.name) restored from a stale copy of its files")
            restored = true
        } else if node.lmdbDirectory != nil {
            try reopenLMDB(node)
        }
        try node.boot(time: time, seed: parameters.seed)
        log("\(node.name) restart")
        record(node.index, restored ? .restartStale : .restart)
        diagram?.mark(restored ? .staleRestart : .restart, node.index, at: time.millis - startMillis)
        return restored
    }

    /// Closes a replica's LMDB environment and opens its files again.
    func reopenLMDB(_ node: SimNode) throws {
        guard let directory = node.lmdbDirectory else { return }
        (node.store as? LMDBEnvironment)?.close()
        node.store = try LMDBEnvironment(directory: directory, tables: Tables.all, mapSizeBytes: 8 << 20, durable: false)
    }

    /// Tells the checkers that `node` comes back on `stale`: they read its current files, the
    /// stale copy (a clone of it) and every other replica's files but those of replicas that know
    /// they are revoked (everyone who holds the revocation refuses them, so what only they hold
    /// may never come back: membership seed 96).
    func restoring(_ node: SimNode, _ stale: MemoryStore) throws {
        func reader(_ store: any KeyValueStore) throws -> Replica {
            try Replica(store: store, clock: FixedClock(millis: 0), random: SplitMix64(seed: 0))
        }
        var others: [Replica] = []
        // A replica revoked where some replica holds its revocation is refused (stopped): what
        // only it holds never comes back, even before it has learned it (hostile seed 759).
        let stopped = stoppedNodes
        for other in nodes where other.index != node.index && !stopped.contains(other.index) {
            let replica = try reader(other.store)  // read even while the node is down
            let key = other.member.publicKey.bytes
            if try !replica.members().contains(where: { $0.key == key && $0.isRevoked }) { others.append(replica) }
        }
        let restore = StaleRestore(node: node.index, current: try reader(node.store), stale: try reader(stale.clone()),
                                   others: others)
        for checker in checkers.all { try checker.restoring(restore) }
    }
}

#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB
import KidLedgerUI
import Synchronization
import KidLedgerDaemon

/// The store the page's commands run on, which a daemon started in an empty home does not have
/// yet (issue 41): `serve` serves the page at once, the page starts or joins a household (`init`,
/// `join`, run in this process), and the daemon then opens the new store, shares it with the page
/// and starts syncing, without a restart.
///
/// One process may open an LMDB store only once. Until the household exists, every page command
/// runs alone, under ``setup``, and opens (and closes) what it needs itself; the command that
/// made the household is followed, under the same lock, by ``adopt(_:)``, which opens the store
/// for good. A command that finds ``setup`` taken (a join still looking for the inviting laptop)
/// is answered at once with exit 75 ("busy"), so the page's polls never pile up behind it.
final class PageStore: Sendable {
    private let environment = Mutex<LMDBEnvironment?>(nil)
    private let setup = Mutex<Void>(())

    /// What a page command is told while another one starts or joins the household.
    static let busy = "this laptop is busy starting or joining a household; try again in a moment"

    init(_ environment: LMDBEnvironment? = nil) {
        self.environment.withLock { $0 = environment }
    }

    /// The store, once this home holds a household.
    var shared: LMDBEnvironment? { environment.withLock { $0 } }

    /// Opens the home's store and keeps it when it holds a household (nil otherwise, nothing
    /// kept open). Call under ``setup`` (``adoptNow(_:)``) or before the page serves.
    @discardableResult
    func adopt(_ ctx: Context) -> LMDBEnvironment? {
        if let open = shared { return open }
        guard FileSystem.exists(ctx.storePath + "/data.mdb"),
              let replica = try? ctx.openReplica(), (try? replica.household()) ?? nil != nil,
              let store = replica.store as? LMDBEnvironment else { return nil }
        environment.withLock { $0 = store }
        return store
    }

    /// ``adopt(_:)`` between page commands (the daemon's wait for a household started elsewhere,
    /// e.g. `kidledger init` in a terminal); nil while a page command runs.
    func adoptNow(_ ctx: Context) -> LMDBEnvironment? {
        setup.withLockIfAvailable { _ in adopt(ctx) } ?? nil
    }

    /// Runs one page command: on the shared store once there is one; before, alone (or "busy").
    func run(_ ctx: Context, _ command: (LMDBEnvironment?) -> CommandOutcome) -> CommandOutcome {
        if let store = shared { return command(store) }
        let outcome = setup.withLockIfAvailable { _ -> CommandOutcome in
            if let store = shared { return command(store) }
            let outcome = command(nil)
            adopt(ctx)
            return outcome
        }
        return outcome ?? CommandOutcome(exitCode: ExitCode.temporaryFailure.rawValue, json: "", error: Self.busy)
    }
}

enum PageSetup {
    /// The daemon in an empty home: waits (polling every 200 ms) until the page or another
    /// process made a household here, and returns its store; nil when the daemon is stopped first.
    static func waitForHousehold(_ ctx: Context, store: PageStore) -> LMDBEnvironment? {
        while !Daemon.stopRequested {
            if let environment = store.adoptNow(ctx) { return environment }
            usleep(200_000)
        }
        return nil
    }
}

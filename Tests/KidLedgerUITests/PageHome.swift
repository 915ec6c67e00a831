import KidLedgerCLITestSupport
import KidLedgerDaemon
@testable import KidLedgerCLI
@testable import KidLedgerUI

/// A real home for the page's tests: a ``TestLedger`` whose runs are the user "mom"'s and read the
/// system clock, as the page's own commands do; its directory is removed when it is released.
final class PageHome {
    let ledger = TestLedger(prefix: "kidledger-ui", environment: ["USER": "mom"], clock: SystemClock())
    /// The store `serve` shares with the page once a household is started there (``appSharingStore()``).
    let store = PageStore()
    var home: String { ledger.home }
    /// What every command of this home gets, the page's too.
    var environment: [String: String] { ledger.environment }
    /// A command's context as the page's runner makes it (JSON output).
    var context: Context { Context(home: home, json: true, console: BufferConsole(), clock: SystemClock(), environment: environment) }

    /// Runs `kidledger WORDS` in process (``TestLedger/run(_:)-(String...)``).
    @discardableResult
    func run(_ words: String...) -> Outcome { ledger.run(words) }

    /// The page's app on this home's store, as `kidledger ui` runs it next to a household.
    func app(port: UInt16 = 4718) throws -> UIApp {
        let token = try TokenFile.loadOrCreate(home: home)
        let home = home
        let gate = UIGate(key: token, port: port, clock: SystemClock()) { try TokenFile.rotate(home: home) }
        return UIApp(gate: gate, run: PageCommands.runner(home: home, environment: environment, store: nil))
    }

    /// The page's app as `serve` makes it on a home that may have no household yet: its commands
    /// run through ``store``, shared once the household is started or joined.
    func appSharingStore() throws -> UIApp {
        try FileSystem.makeDirectory(home)
        let token = try TokenFile.loadOrCreate(home: home)
        let home = home
        return UIApp(gate: UIGate(key: token, port: 4718, clock: SystemClock()) { try TokenFile.rotate(home: home) },
                     run: PageCommands.runner(context, store: store))
    }

    deinit { ledger.remove() }
}

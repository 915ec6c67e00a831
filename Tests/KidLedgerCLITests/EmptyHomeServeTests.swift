import Foundation
import Testing
@testable import KidLedgerCLI
import KidLedgerUI
#if canImport(Glibc)
import Glibc
#endif
@testable import KidLedgerDaemon
import KidLedgerCLITestSupport
import KidLedgerTestSupport

/// `serve` in a home without a household (issue 41): it serves the page at once (where the page
/// starts or joins one), says so, and starts syncing as soon as a household is here (also one
/// made by `kidledger init` in a terminal meanwhile), without a restart.
@Suite(.serialized) struct EmptyHomeServeTests {
    @Test func servesThePageThenSyncsOnceThereIsAHousehold() throws {
        let l = TestLedger()
        defer { l.remove() }
        let group = ProcessGroup()
        defer { group.stopAll() }
        let daemon = group.add(try BackgroundProcess(l, ["serve", "--listen", "127.0.0.1:0", "--ui", "127.0.0.1:0", "--no-discovery"]))
        #expect(eventually(timeout: 30, interval: 0.2) { daemon.stderr.contains("no household here yet: start one or join one on the page") }, "\(daemon.stderr)")
        #expect(!daemon.hasExited)
        // `ui` finds the page before there is a household (the daemon's lock file names it).
        let ui = l.run("ui", "--json")
        #expect(ui.code == 0, "\(ui)")
        #expect(ui.stdout.contains("\"household\":null") && ui.stdout.contains("\"serving\":true"), "\(ui)")
        // So does `open` (the applications menu's launcher): a one-time address of the start page.
        let opened = l.run("open", "--no-browser", "--json")
        #expect(opened.code == 0 && opened.stdout.contains("?code=") && opened.stdout.contains("\"opened\":false"), "\(opened)")
        // A second daemon on this home is still refused.
        let second = l.run("serve", "--listen", "127.0.0.1:0", "--ui", "127.0.0.1:0")
        #expect(second.code == 75, "\(second)")
        // A household made in a terminal: the daemon syncs it, without a restart.
        l.ok("init", "The Millers")
        #expect(eventually(timeout: 30, interval: 0.2) { daemon.stderr.contains("serving \"The Millers\" on 127.0.0.1:") }, "\(daemon.stderr)")
        let ready = l.run("ui", "--json")
        #expect(ready.stdout.contains("\"name\":\"The Millers\"") && ready.stdout.contains("\"serving\":true"), "\(ready)")
        daemon.send(SIGTERM)
        #expect(daemon.wait(timeout: 15))
    }

    @Test func withoutThePageAnEmptyHomeIsStillRefused() {
        let l = TestLedger()
        defer { l.remove() }
        let outcome = l.run("serve", "--listen", "127.0.0.1:0", "--ui", "off")
        #expect(outcome.code == 65 && outcome.stderr.contains("no household here yet"), "\(outcome)")
    }

    /// docs/ERRORS.md, "Not in the table": the page of an empty home can't be served (exit 69).
    @Test func pageThatCannotBeServedIsSaid() throws {
        let l = TestLedger()
        defer { l.remove() }
        let port = try refusingPort()  // bound, not listening: binding it fails
        defer { close(port.fd) }
        let outcome = l.run("serve", "--listen", "127.0.0.1:0", "--ui", "127.0.0.1:\(port.port)", "--no-discovery")
        #expect(outcome.code == 69, "\(outcome)")
        #expect(outcome.stderr.contains("kidledger: no household here yet, and the page that starts or joins one could not be served on 127.0.0.1:\(port.port)"), "\(outcome)")
    }

    /// docs/ERRORS.md, "Not in the table": a page command while another one starts or joins the
    /// household is told to wait (exit 75), and runs nothing.
    @Test func pageCommandWhileAnotherStartsTheHouseholdIsBusy() {
        let l = TestLedger()
        defer { l.remove() }
        let store = PageStore()
        let ctx = Context(home: l.home, json: true, console: BufferConsole(), clock: SystemClock())
        var ranInside = false
        let outer = store.run(ctx) { _ in
            let inner = store.run(ctx) { _ in
                ranInside = true
                return CommandOutcome(exitCode: 0, json: "")
            }
            #expect(inner.exitCode == 75 && inner.error == "this laptop is busy starting or joining a household; try again in a moment", "\(inner)")
            return CommandOutcome(exitCode: 0, json: "")
        }
        #expect(outer.exitCode == 0 && !ranInside)
    }
}

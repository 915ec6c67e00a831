import Foundation
import Synchronization
import KidLedgerDomain
import KidLedgerTestSupport
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerUI
@testable import KidLedgerDaemon

/// The page's household routes (issue 41) over a real home that starts empty, with the runner
/// `serve` gives the page there (``PageStore``): the household is started on the page, the store is
/// then shared, and the non-interactive forms of the CLI's interactive commands answer the page.
@Suite struct HouseholdPageTests {
    let page = PageCommandTests()

    func json(_ r: HTTPResponse) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])
    }

    @Test func startTheHouseholdOnThePageThenShareItsStore() throws {
        let h = PageHome()
        let app = try h.appSharingStore()
        // No household: the state says so, the account says why, nothing is made on disk yet.
        #expect(page.get(app, "/api/state").status == 400)
        let account = try json(page.get(app, "/api/account"))["result"] as? [String: Any]
        #expect(account?["household"] as? Bool == false)
        #expect(!FileManager.default.fileExists(atPath: h.home + "/ledger/data.mdb"))
        #expect(h.store.shared == nil)
        // A missing field is the page's refusal; nothing started.
        #expect(page.post(app, "/api/household/start", "name=The+Millers").status == 400)
        #expect(h.store.shared == nil)

        let started = page.post(app, "/api/household/start", "name=The+Millers&yourName=Mom")
        #expect(started.status == 200, "\(page.body(started))")
        let result = try #require(try json(started)["result"] as? [String: Any])
        let secret = try #require(result["recoverySecret"] as? String)
        #expect(secret.split(separator: "-").count == 14)
        // The command that made the household is followed by the store being shared.
        #expect(h.store.shared != nil)
        let state = try json(page.get(app, "/api/state"))
        #expect(((state["page"] as? [String: Any])?["household"] as? [String: Any])?["name"] as? String == "The Millers")
        #expect((state["account"] as? [String: Any])?["household"] as? Bool == true)
        let members = (state["members"] as? [String: Any])?["members"] as? [[String: Any]]
        #expect(members?.map { $0["name"] as? String } == ["Mom"])
        // A second start is refused with the CLI's message; the household stays.
        let again = page.post(app, "/api/household/start", "name=Other&yourName=Mom")
        #expect(again.status == 400 && page.body(again).contains("already"), "\(page.body(again))")

        // Rename yourself.
        #expect(page.post(app, "/api/member/rename", "name=Mama").status == 200)
        let renamed = try json(page.get(app, "/api/state"))
        #expect(((renamed["members"] as? [String: Any])?["members"] as? [[String: Any]])?.first?["name"] as? String == "Mama")
        // The household's limit for asking first (`household limit`, replicated): $1,000 by
        // default, then what the settings panel saves; "never" is 0; a bad amount is refused at
        // the field with the CLI's message and changes nothing; the old route sets it too.
        #expect(page.body(page.get(app, "/api/state")).contains("\"confirmAboveCents\":100000"))
        #expect(page.post(app, "/api/household/limit", "amount=250").status == 200)
        #expect(page.body(page.get(app, "/api/state")).contains("\"confirmAboveCents\":25000"))
        let badLimit = page.post(app, "/api/household/limit", "amount=lots")
        #expect(badLimit.status == 400 && page.body(badLimit).contains("\\\"lots\\\" is not an amount"), "\(page.body(badLimit))")
        #expect(page.body(page.get(app, "/api/state")).contains("\"confirmAboveCents\":25000"))
        #expect(page.post(app, "/api/household/limit", "amount=never").status == 200)
        #expect(page.body(page.get(app, "/api/state")).contains("\"confirmAboveCents\":0"))
        #expect(page.post(app, "/api/quick/limit", "amount=1500").status == 200)
        #expect(page.body(page.get(app, "/api/state")).contains("\"confirmAboveCents\":150000"))
        #expect(page.body(page.get(app, "/")).contains("id=\"limit-form\""))
        // Invite needs a running daemon here: the CLI's refusal, as a usage error.
        let invite = page.post(app, "/api/invite", "")
        #expect(invite.status == 400 && page.body(invite).contains("no daemon runs for this home"), "\(page.body(invite))")
        // Revoke without a terminal: the page's form passes --yes (the owner can't be revoked).
        let owner = page.post(app, "/api/member/revoke", "member=Mama")
        #expect(owner.status == 400 && page.body(owner).contains("is the household's owner"), "\(page.body(owner))")
        let nobody = page.post(app, "/api/member/revoke", "member=Grandpa")
        #expect(nobody.status == 400, "\(page.body(nobody))")
        // Recover without a prompt: a wrong secret is refused, nothing changes.
        let wrong = page.post(app, "/api/recover", "secret=AAAA-BBBB")
        #expect(wrong.status == 400 && page.body(wrong).contains("not a recovery secret"), "\(page.body(wrong))")
    }

    @Test func undoMineUnmergeAndMergeAnyTwoChildren() throws {
        let h = PageHome()
        let app = try h.appSharingStore()
        #expect(page.post(app, "/api/household/start", "name=The+Millers&yourName=Mom").status == 200)
        #expect(page.post(app, "/api/child/add", "name=Ava").status == 200)
        #expect(page.post(app, "/api/child/add", "name=Ben").status == 200)
        #expect(page.post(app, "/api/give", "child=Ava&amount=2").status == 200)
        // Children of different names are merged, then unmerged, on the page.
        let merged = page.post(app, "/api/child/merge", "from=Ben&into=Ava")
        #expect(merged.status == 200, "\(page.body(merged))")
        let unmerged = page.post(app, "/api/child/unmerge", "child=Ben")
        #expect(unmerged.status == 200 && page.body(unmerged).contains("counts on its own again"), "\(page.body(unmerged))")
        // Undo my last change: the give (a merge is no transaction).
        let undone = page.post(app, "/api/undo-mine", "")
        #expect(undone.status == 200, "\(page.body(undone))")
        let original = try #require(try json(undone)["result"] as? [String: Any])["original"] as? [String: Any]
        #expect(original?["amountCents"] as? Int == 200)
    }

    @Test func commandsWaitForASetupInProgress() {
        // While a page command starts or joins the household, another is told to try again (75),
        // not queued behind it.
        let h = PageHome()
        let inner = Mutex<CommandOutcome?>(nil)
        let outer = h.store.run(h.context) { _ in
            inner.withLock { $0 = h.store.run(h.context) { _ in CommandOutcome(exitCode: 0, json: "") } }
            return CommandOutcome(exitCode: 0, json: "")
        }
        #expect(outer.exitCode == 0)
        #expect(inner.withLock { $0 }?.exitCode == 75)
        #expect(inner.withLock { $0 }?.error == PageStore.busy)
    }
}

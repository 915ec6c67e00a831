import Testing
@testable import KidLedgerCLI
import KidLedgerUI

/// The page renders the state `status --json` computed (issue 41, point 3): every state
/// ``StatusReport/SyncState`` can take has its words and its pill colour, and the page computes
/// no state of its own.
@Suite("The page's sync pill")
struct PagePillTests {
    @Test func everyStateHasItsWordsAndColour() {
        let words: [StatusReport.SyncState: String] = [.synced: "synced", .pending: "changes pending", .offline: "offline",
                                                       .alone: "only on this laptop", .attentionRequired: "attention required",
                                                       .relayed: "synced through the relay"]
        for state in StatusReport.SyncState.allCases {
            let word = words[state] ?? "?"
            #expect(PageAssets.script.contains("\(state.rawValue): \"\(word)\""), "\(state)")
            #expect(PageAssets.style.contains(".pill.\(state.rawValue){"), "\(state)")
        }
        // The pill's class and words are status's state as it is.
        #expect(PageAssets.script.contains(#"setText($("sync"), s ? words[s.state] || s.state : "");"#))
        #expect(PageAssets.script.contains(#"$("sync-pill").className = "pill " + (s ? s.state : "");"#))
    }
}

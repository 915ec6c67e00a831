import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI

/// `undo` says whose entry it reverses (issue 20, point 8: people have names).
@Suite("undo names the author of what it reverses")
struct UndoAuthorTests {
    @Test func undoNamesTheAuthor() throws {
        let l = TestLedger()
        defer { l.remove() }
        _ = l.ok("init", "Smiths", "--name", "Mom")
        _ = l.ok("child", "add", "Ava")
        _ = l.ok("give", "Ava", "1.25")
        let undone = try #require(checkJSON(l, "undo") as? [String: Any])
        let author = try #require(undone["originalAuthor"] as? [String: Any], "\(undone)")
        #expect(author["name"] as? String == "Mom" && (author["fingerprint"] as? String)?.isEmpty == false, "\(author)")
        _ = l.ok("give", "Ava", "0.50")
        #expect(l.ok("undo").contains("made by Mom ("))
    }
}

import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI

/// `kidledger conflicts`: the journal of concurrent edits that lost (filled by sync; here empty)
/// and the count of same-id transaction conflicts.
@Suite("Conflicts command")
struct ConflictsCommandTests {
    @Test func emptyJournal() throws {
        try withLedger { l in
            l.ok("init", "The Smiths")
            l.ok("child", "add", "Ben")
            l.ok("child", "rename", "Ben", "Benjamin")
            #expect(l.ok("conflicts") == "No concurrent edits lost.\n")
            #expect(l.ok("conflicts", "benjamin") == "No concurrent edits lost.\n")
            let json = l.ok("--json", "conflicts")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            #expect((object["fieldConflicts"] as? [Any])?.isEmpty == true)
            #expect(object["transactionConflicts"] as? Int == 0)
            let unknown = l.run("conflicts", "Zed")
            #expect(unknown.code == 65)
        }
    }
}

import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI

/// Inputs the fuzzers (Scripts/fuzz.sh, docs/FUZZING.md) found, kept as ordinary tests.
@Suite("Fuzzer findings")
struct FuzzRegressionTests {
    /// csv target: a file naming a child only by a `childId` the ledger does not hold created a child
    /// with a random id, so importing the same file again created a second child ("Child 00000000"
    /// twice). The created child now takes the file's id; the second import changes nothing.
    @Test func reimportingRowsWithAnUnknownChildIdCreatesNoSecondChild() throws {
        try withLedger { l in
            l.ok("init", "Home")
            l.ok("child", "add", "Ava")
            let csv = "childId,amountCents,createdAt\n00000000-0000-4000-8000-000000000001,7,2026-11-18T11:00:00Z\n"
                + "00000000-0000-4000-8000-000000000001,-2,2026-11-18T11:00:01Z\n"
            try csv.write(toFile: l.file("in.csv"), atomically: true, encoding: .utf8)
            l.ok("import", "--csv", l.file("in.csv"))
            let once = l.state()
            #expect(once.contains("\"name\":\"Child 00000000\"") && once.contains("\"id\":\"00000000-0000-4000-8000-000000000001\""), "\(once)")
            l.ok("import", "--csv", l.file("in.csv"))
            #expect(l.state() == once, "the second import changed the ledger")
            // Exporting and importing again adds nothing either.
            l.ok("export", "--csv", l.file("out.csv"))
            l.ok("import", "--csv", l.file("out.csv"))
            #expect(l.state() == once)
            #expect(l.ok("verify").hasPrefix("ok: "))
        }
    }
}

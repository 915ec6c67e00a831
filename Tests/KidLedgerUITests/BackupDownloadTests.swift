import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerUI

/// The page's "Download a backup" (issue 43): `GET /api/backup` answers with a backup file that
/// `restore` brings back, and leaves no file behind.
@Suite struct BackupDownloadTests {
    @Test func downloadRestores() throws {
        let t = PageCommandTests()
        let h = t.family()
        #expect(h.run("give", "Ava", "1.25").code == 0)
        let app = try h.app()
        let before = try FileManager.default.contentsOfDirectory(atPath: "/tmp").filter { $0.hasPrefix("kidledger-page-backup-\(getpid())-") }
        let response = t.get(app, "/api/backup")
        #expect(response.status == 200)
        #expect(response.headers.contains { $0.0 == "Content-Disposition" && $0.1.hasPrefix("attachment;") })
        #expect(Array(response.body.prefix(8)) == Array("KLBACKUP".utf8))
        let after = try FileManager.default.contentsOfDirectory(atPath: "/tmp").filter { $0.hasPrefix("kidledger-page-backup-\(getpid())-") }
        #expect(after == before, "the temporary backup file is removed")
        // The downloaded file restores into a new home with the same ledger.
        let file = h.ledger.file("downloaded.klbackup")
        try Data(response.body).write(to: URL(fileURLWithPath: file))
        let other = PageHome()
        let restore = other.run("restore", file)
        #expect(restore.code == 0, "\(restore)")
        #expect(other.run("digest").stdout == h.run("digest").stdout)
        #expect(t.post(app, "/api/backup", "").status == 405)
        #expect(t.body(t.get(app, "/")).contains("href=\"/api/backup\""))
    }
}

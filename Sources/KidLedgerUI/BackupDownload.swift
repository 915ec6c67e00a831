#if canImport(Glibc)
import Glibc
#endif
import KidLedgerSystem

/// The page's "Download a backup" (`GET /api/backup`): runs `kidledger backup FILE` into a fresh
/// private file in the temporary folder, answers with its bytes as an attachment, and removes it.
extension UIApp {
    func backupDownload() -> HTTPResponse {
        var random = SystemRandomNumberGenerator()
        let path = "/tmp/kidledger-page-backup-\(getpid())-\(random.next() & 0xFFFF_FFFF).klbackup"
        defer { unlink(path) }
        let outcome = run(["backup", "--", path])
        guard outcome.exitCode == 0 else { return answer(outcome) }
        guard let bytes = Self.readFile(path) else {
            return .json(500, UIApp.errorJSON("the backup was written but could not be read back", exitCode: 70))
        }
        let name = "kidledger-backup.klbackup"
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream"), ("Cache-Control", "no-store"),
                                                   ("Content-Disposition", "attachment; filename=\"\(name)\"")], body: bytes)
    }

    /// The bytes of the file `path`; nil when it can't be read.
    static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = retryWhileInterrupted { buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) } }
            guard n >= 0 else { return nil }
            if n == 0 { return bytes }
            bytes.append(contentsOf: buffer[0..<n])
        }
    }
}

import Testing
import Foundation
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTestSupport

/// `releaseResidentPages` lets go of the map pages a long read touched, and loses nothing.
@Suite("LMDBEnvironment resident pages")
struct ResidentPagesTests {
    /// The resident size (kB) of this process's mappings of `file`, from /proc/self/smaps.
    static func residentKB(of file: String) throws -> Int {
        let smaps = try procFile("/proc/self/smaps")
        var inFile = false, total = 0
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), first.first?.isHexDigit == true, fields.count >= 5 {
                inFile = fields.count >= 6 && fields[5...].joined(separator: " ") == file
            } else if inFile, fields.first == "Rss:", fields.count >= 2, let kb = Int(fields[1]) {
                total += kb
            }
        }
        return total
    }

    /// A /proc file read to its end (its size reads as 0, so read in chunks until EOF).
    static func procFile(_ path: String) throws -> String {
        let handle = try #require(FileHandle(forReadingAtPath: path))
        defer { try? handle.close() }
        return String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
    }

    @Test func pagesTouchedByAReadAreReleasedAndTheDataStays() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            let value = [UInt8](repeating: 0xA5, count: 2_000)
            try env.write { w throws in
                for i in 0..<8_000 { try w.put(tableA, Array("k\(100_000 + i)".utf8), value) }  // about 16 MB
            }
            let file = dir.path + "/data.mdb"
            var sum = 0
            try env.read { r throws in try r.scan(tableA) { _, v in sum += v.count; return true } }
            let touched = try Self.residentKB(of: file)
            #expect(sum == 8_000 * 2_000)
            #expect(touched > 10_000, "a full read makes most of the map resident: \(touched) kB")
            env.releaseResidentPages()
            let released = try Self.residentKB(of: file)
            #expect(released < 1_000, "after the release: \(released) kB (before: \(touched) kB)")
            // Nothing is lost: the data reads back as it was.
            var again = 0
            try env.read { r throws in try r.scan(tableA) { _, v in again += v == value ? v.count : 0; return true } }
            #expect(again == sum)
            #expect(try env.read { r throws in try r.count(tableA) } == 8_000)
        }
    }
}

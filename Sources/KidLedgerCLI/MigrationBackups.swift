#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerLMDB

/// The copy of a store taken before it is migrated to a newer schema version (issue 43):
/// `HOME/migration-backups/schema-N-YYYYMMDD-HHMMSS.mdb`, a compact LMDB data file (`mdb_env_copyfd2`)
/// that `mdb_copy`, or a kidledger of that version, opens as the store was. The newest
/// ``kept`` stay; older ones are removed after a new one is written.
enum MigrationBackups {
    /// The folder, inside the home.
    static func folder(home: String) -> String { home + "/migration-backups" }
    /// How many copies stay.
    static let kept = 3

    /// Copies `environment` (of schema version `schema`) into the folder: to a temporary name,
    /// synced, then renamed, so a copy under its final name is whole. A migration killed after it
    /// takes another one at the next open.
    static func save(_ environment: LMDBEnvironment, schema: UInt64, home: String, now: Int64) throws {
        let folder = folder(home: home)
        try FileSystem.makeDirectory(folder)
        let name = "schema-\(schema)-\(Timestamp.compact(millis: now)).mdb"
        // What a process killed while copying left (its pid is gone) is removed.
        for leftover in try FileSystem.names(in: folder) where leftover.hasPrefix(".partial-") {
            let pid = leftover.dropFirst(".partial-".count).prefix { $0.isNumber }
            if let pid = Int32(pid), kill(pid, 0) != 0 && errno == ESRCH { unlink(folder + "/" + leftover) }
        }
        let temporary = folder + "/.partial-\(getpid())-" + name
        unlink(temporary)
        defer { unlink(temporary) }
        try FileSystem.withNewFile(temporary) { try environment.copy(to: $0, compact: true) }
        try FileSystem.move(temporary, to: folder + "/" + name)
        let copies = try FileSystem.names(in: folder).filter { $0.hasPrefix("schema-") && $0.hasSuffix(".mdb") }
        // Names sort by time within a version; older versions first.
        let ordered = copies.sorted { ($0.split(separator: "-")[1].count, $0) < ($1.split(separator: "-")[1].count, $1) }
        for old in ordered.dropLast(kept) { unlink(folder + "/" + old) }
    }
}

extension Timestamp {
    /// `20261207-024621` (UTC, to the second): a file name's time, in an order that sorts by time.
    static func compact(millis: Int64) -> String {
        let iso = Array(iso8601(millis: millis).utf8)  // 2026-12-07T02:46:21.123Z
        guard iso.count >= 19 else { return String(millis) }
        let digits = iso[0..<19].filter { $0 >= 0x30 && $0 <= 0x39 }
        return String(decoding: digits[0..<8], as: UTF8.self) + "-" + String(decoding: digits[8...], as: UTF8.self)
    }
}

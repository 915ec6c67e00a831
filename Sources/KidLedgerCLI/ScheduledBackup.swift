#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica

/// The daemon's daily backup (`kidledger backup schedule FOLDER --keep N`; docs/SYNC.md,
/// "Backups"): one device setting, read by the daemon's loop, which writes
/// `FOLDER/kidledger-backup-YYYYMMDD-HHMMSS.klbackup` once a day and removes the oldest of those
/// files beyond the newest N. What happened last is kept in the settings for `backup schedule` and `status`.
enum ScheduledBackup {
    static let folderSetting = "backupFolder"
    static let keepSetting = "backupKeep"
    static let lastSetting = "backupLastMillis"
    static let errorSetting = "backupLastError"
    static let keepDefault = 7
    static let keepMax = 1_000
    /// A day: how often a backup is written.
    static let intervalMillis: Int64 = 86_400_000
    /// After a failure, how long until the next try.
    static let retryMillis: Int64 = 3_600_000
    static let filePrefix = "kidledger-backup-"
    static let fileSuffix = ".klbackup"

    /// The setting and the last run.
    struct Setting: Equatable {
        /// Where backups go; nil: off.
        var folder: String?
        var keep: Int
        /// The last attempt (0: never), and why it failed (empty: it succeeded).
        var lastMillis: Int64
        var lastError: String
    }

    static func setting(_ replica: Replica) throws -> Setting {
        let folder = try replica.device.setting(folderSetting).flatMap { $0.isEmpty ? nil : $0 }
        return Setting(folder: folder, keep: try replica.device.setting(keepSetting).flatMap { Int($0) } ?? keepDefault,
                       lastMillis: try replica.device.setting(lastSetting).flatMap { Int64($0) } ?? 0,
                       lastError: try replica.device.setting(errorSetting) ?? "")
    }

    static func json(_ s: Setting) -> JSON {
        .object([("folder", s.folder.map(JSON.string) ?? .null), ("keep", .int(Int64(s.keep))),
                 ("lastAttemptMillis", s.lastMillis == 0 ? .null : .int(s.lastMillis)),
                 ("lastError", s.lastError.isEmpty ? .null : .string(s.lastError))])
    }

    /// One line for `backup schedule` and `status`.
    static func describe(_ s: Setting, time: LocalTime) -> String {
        guard let folder = s.folder else { return "Scheduled backups: off (`kidledger backup schedule FOLDER --keep N` turns them on)." }
        var text = "Scheduled backups: every day into \(folder), keeping the newest \(s.keep)"
        if s.lastMillis == 0 {
            text += "; none written yet (the daemon writes them)."
        } else if s.lastError.isEmpty {
            text += "; the last at \(time.stamped(s.lastMillis))."
        } else {
            text += "; the last attempt at \(time.stamped(s.lastMillis)) failed: \(s.lastError)"
        }
        return text
    }

    /// Writes a backup when one is due (a day after the last success, an hour after a failure),
    /// then removes the oldest beyond `keep`. Failures are logged and kept in the settings, never thrown.
    static func runIfDue(home: String, _ replica: Replica, now: Int64, log: (String) -> Void) {
        guard let s = try? setting(replica), let folder = s.folder else { return }
        let wait = s.lastError.isEmpty ? intervalMillis : retryMillis
        guard s.lastMillis == 0 || now - s.lastMillis >= wait || now < s.lastMillis else { return }
        let path = folder + "/" + filePrefix + Timestamp.compact(millis: now) + fileSuffix
        var failure = ""
        do {
            try FileSystem.makeDirectory(folder)
            let bytes = try Backup.write(home: home, replica, to: path)
            log("scheduled backup written: \(path) (\(Backup.size(bytes)))")
            let ours = try FileSystem.names(in: folder).filter { $0.hasPrefix(filePrefix) && $0.hasSuffix(fileSuffix) }
            for old in ours.sorted().dropLast(s.keep) where unlink(folder + "/" + old) == 0 {
                log("scheduled backup removed (keeping the newest \(s.keep)): \(folder)/\(old)")
            }
        } catch {
            failure = "\(error)"
            log("scheduled backup failed: \(failure)")
        }
        try? replica.device.setSetting(lastSetting, String(now))
        try? replica.device.setSetting(errorSetting, failure)
    }
}

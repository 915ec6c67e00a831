#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB
import KidLedgerDaemon

/// `backup FILE`, `backup schedule`, `restore FILE` (issue 43; docs/SYNC.md, "Backups").
enum BackupCommands {
    static let all: [CLI.Command] = [backup, schedule, restore]

    static let backup = CLI.Command(spec: CommandSpec(
        name: "backup", synopsis: "FILE", summary: "write a copy of the whole home (ledger and this laptop's keys) to FILE",
        details: """
        A consistent, compact copy taken while the daemon runs: the ledger store (every child, transaction,
        allowance, merge and member, and this laptop's peers, settings and quick amounts) and this laptop's keys,
        in one file only you can read (mode 0600). `kidledger restore FILE` brings it back, into an empty home
        or on a new laptop. Keep it private: it holds this laptop's keys.
        `kidledger backup schedule FOLDER --keep N` has the daemon write one every day.
        """,
        arguments: 1...1)) { ctx, args in
        let replica = try ctx.openReplica()
        let household = try LedgerCommands.requireHousehold(replica)
        let path = args.positionals[0]
        let bytes = try Backup.write(home: ctx.home, replica, to: path)
        ctx.say("Backed up \"\(household.name)\" to \(path) (\(Backup.size(bytes))). Bring it back with `kidledger restore \(path)`; it holds this laptop's keys, so keep it private.")
        ctx.emit(.object([("file", .string(path)), ("bytes", .int(Int64(bytes))), ("household", .string(household.name))]))
    }

    static let schedule = CLI.Command(spec: CommandSpec(
        name: "backup schedule", synopsis: "[FOLDER [--keep N] | --off]", summary: "have the daemon write a backup every day into FOLDER",
        details: """
        The daemon (`kidledger serve`, the service) writes kidledger-backup-YYYYMMDD-HHMMSS.klbackup into FOLDER
        once a day and keeps the newest N (default 7), removing older ones it wrote. Without arguments: shows the
        setting and the last scheduled backup. --off stops it (the files stay).
        """,
        valueOptions: ["keep"], flagOptions: ["off"], arguments: 0...1)) { ctx, args in
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        if args.has("off") {
            guard args.positionals.isEmpty, args.values["keep"] == nil else { throw CLIError.usage("--off takes no FOLDER or --keep") }
            try replica.device.setSetting(ScheduledBackup.folderSetting, "")
            ctx.say("Scheduled backups are off (the files already written stay).")
            ctx.emit(ScheduledBackup.json(try ScheduledBackup.setting(replica)))
            return
        }
        if let folder = args.positionals.first {
            var keep = ScheduledBackup.keepDefault
            if let raw = args.values["keep"] {
                guard let n = Int(raw), (1...ScheduledBackup.keepMax).contains(n) else {
                    throw CLIError.usage("--keep takes 1 to \(ScheduledBackup.keepMax), got \"\(raw)\"")
                }
                keep = n
            }
            guard folder.hasPrefix("/") else { throw CLIError.usage("FOLDER must be an absolute path (the daemon runs elsewhere), got \"\(folder)\"") }
            try FileSystem.makeDirectory(folder)
            try replica.device.setSetting(ScheduledBackup.folderSetting, folder)
            try replica.device.setSetting(ScheduledBackup.keepSetting, String(keep))
            ctx.say("The daemon writes a backup into \(folder) every day and keeps the newest \(keep).")
            if DaemonLock.holder(home: ctx.home) == nil {
                ctx.say("No daemon runs for this home now: start it (`kidledger service install`, or `kidledger serve`).")
            }
        } else if args.values["keep"] != nil {
            throw CLIError.usage("--keep needs a FOLDER: kidledger backup schedule FOLDER --keep N")
        }
        let setting = try ScheduledBackup.setting(replica)
        ctx.emit(ScheduledBackup.json(setting))
        if args.positionals.isEmpty { ctx.say(ScheduledBackup.describe(setting, time: ctx.time)) }
    }

    static let restore = CLI.Command(spec: CommandSpec(
        name: "restore", synopsis: "FILE [--replace]", summary: "bring back a backup into an empty home (or a new laptop)",
        details: """
        Checks the whole file first (its checksum), then restores the ledger and this laptop's keys. The restored
        ledger continues under a new replica id, so nothing it writes reuses a number the laptop used after the
        backup was taken; `kidledger sync` (or the daemon) then catches up from the other laptops.
        A home that already holds a ledger or keys is refused unless --replace is given: they are then moved
        aside into HOME/before-restore-TIME first, not deleted. Stop the home's daemon first.
        """,
        flagOptions: ["replace"], arguments: 1...1)) { ctx, args in
        let restored = try Backup.restore(ctx, from: args.positionals[0], replace: args.has("replace"))
        ctx.say(restored.message)
        ctx.emit(restored.json)
    }
}

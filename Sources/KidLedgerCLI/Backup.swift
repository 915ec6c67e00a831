#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB
import KidLedgerSystem
import KidLedgerDaemon

/// Writing and restoring backup files (``BackupArchive``), for `backup`, `restore`, the daemon's
/// scheduled backups and the page's "Download a backup".
enum Backup {
    /// Writes a backup of `home` (whose open replica is `replica`) to `path`: a compact
    /// copy of the store (one read snapshot: the daemon and other commands go on writing), the
    /// account file and the key files. Written to a temporary file beside `path`, synced, then
    /// renamed over it: `path` is a whole backup or what it was. Returns its size in bytes.
    @discardableResult
    static func write(home: String, _ replica: Replica, to path: String) throws -> Int {
        guard let environment = replica.store as? LMDBEnvironment else { throw CLIError("the ledger store is not an LMDB store", code: .software) }
        var st = stat()
        if stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR {
            throw CLIError("\(path) is a folder: give a file name, for example \(path.hasSuffix("/") ? path : path + "/")kidledger.klbackup", code: .usage)
        }
        let suffix = "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let storeCopy = path + ".store-" + suffix, partial = path + ".partial-" + suffix
        defer { unlink(storeCopy); unlink(partial) }
        try FileSystem.withNewFile(storeCopy) { try environment.copy(to: $0, compact: true) }
        var files: [(path: String, source: String)] = [("ledger/data.mdb", storeCopy)]
        if FileSystem.exists(home + "/account") { files.append(("account", home + "/account")) }
        for name in try FileSystem.names(in: home + "/identities") where name.hasSuffix(".key") {
            files.append(("identities/" + name, home + "/identities/" + name))
        }
        try FileSystem.withNewFile(partial) { try BackupArchive.write(files, to: $0) }
        guard rename(partial, path) == 0 else {
            throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))", code: .ioError)
        }
        guard stat(path, &st) == 0 else { return 0 }
        return Int(st.st_size)
    }

    /// "1.2 MB".
    static func size(_ bytes: Int) -> String {
        if bytes < 10_000 { return "\(bytes) bytes" }
        if bytes < 10_000_000 { return "\((bytes + 500) / 1_000) kB" }
        return "\((bytes + 500_000) / 1_000_000) MB"
    }

    /// What `restore` did.
    struct Restored {
        var message: String
        var json: JSON
    }

    /// The home-relative paths a backup may hold.
    static func isRestorable(_ path: String) -> Bool {
        if path == "ledger/data.mdb" || path == "account" { return true }
        let parts = path.split(separator: "/")
        return parts.count == 2 && parts[0] == "identities" && parts[1].hasSuffix(".key")
    }

    /// `restore FILE`: checks the file whole, unpacks it into HOME/restore.staging, opens the
    /// ledger there (an older schema is migrated), moves it to a fresh replica id and verifies it;
    /// only then sets aside what the home held (with `replace`) and moves the restored files in,
    /// the ledger last. An interrupted restore leaves the staging folder, which the next one removes.
    static func restore(_ ctx: Context, from path: String, replace: Bool) throws -> Restored {
        if let holder = DaemonLock.holder(home: ctx.home) {
            throw CLIError("the daemon runs for this home (\(holder.description)): stop it first, then restore", code: .temporaryFailure)
        }
        let home = ctx.home
        let keys = try FileSystem.names(in: home + "/identities").filter { $0.hasSuffix(".key") }
        let occupied = FileSystem.exists(ctx.storePath + "/data.mdb") || !keys.isEmpty
        if occupied && !replace {
            throw CLIError("this home (\(home)) already holds a ledger or keys: restore into an empty home (--home DIR), or pass --replace to move them aside into \(home)/before-restore-TIME first", code: .dataError)
        }
        // The whole file is checked before anything is written.
        var hasLedger = false
        try BackupArchive.read(path) { name, _, _ in
            guard isRestorable(name) else { throw BackupArchive.invalid(path, "it holds \"\(TextEscaping.terminal(name))\", which no kidledger backup holds") }
            if name == "ledger/data.mdb" { hasLedger = true }
        }
        guard hasLedger else { throw BackupArchive.invalid(path, "it holds no ledger") }
        try FileSystem.makeDirectory(home)
        let staging = home + "/restore.staging"
        try FileSystem.removeHomeTree(staging)
        try FileSystem.makeDirectory(staging + "/ledger")
        try FileSystem.makeDirectory(staging + "/identities")
        try BackupArchive.read(path) { name, _, copy in
            try FileSystem.withNewFile(staging + "/" + name) { try copy($0) }
        }
        // Open the restored ledger: migrated when older, checked, then moved to a fresh replica id.
        let replica = try ctx.openReplica(at: staging + "/ledger", creating: false)
        let household = try LedgerCommands.requireHousehold(replica)
        let before = replica.replicaID
        try replica.continueUnderFreshReplicaID()
        let report = try replica.verify()
        if !report.problems.isEmpty {
            throw BackupArchive.invalid(path, "its ledger fails verification: \(report.problems.prefix(3).joined(separator: "; "))")
        }
        let children = try replica.children(includeArchived: false).count
        (replica.store as? LMDBEnvironment)?.close()
        var aside: String?
        if occupied {
            let folder = home + "/before-restore-" + Timestamp.compact(millis: ctx.clock.nowMillis())
            try FileSystem.makeDirectory(folder)
            for name in ["ledger", "identities", "account"] where FileSystem.exists(home + "/" + name) {
                try FileSystem.move(home + "/" + name, to: folder + "/" + name)
            }
            aside = folder
        }
        try FileSystem.makeDirectory(home + "/identities")
        for name in try FileSystem.names(in: staging + "/identities") {
            try FileSystem.move(staging + "/identities/" + name, to: home + "/identities/" + name)
        }
        if FileSystem.exists(staging + "/account") { try FileSystem.move(staging + "/account", to: home + "/account") }
        try FileSystem.move(staging + "/ledger", to: ctx.storePath)
        try FileSystem.removeHomeTree(staging)
        var message = "Restored \"\(household.name)\" (\(Render.plural(children, "child", "children"))) from \(path)."
        if let aside { message += " What the home held before is in \(aside)." }
        message += " This laptop continues under a new replica id; `kidledger sync` (or the daemon) catches up from the other laptops."
        return Restored(message: message, json: .object([
            ("file", .string(path)), ("household", .string(household.name)), ("children", .int(Int64(children))),
            ("previousReplicaId", .string(before.description)), ("replicaId", .string(replica.replicaID.description)),
            ("setAside", aside.map(JSON.string) ?? .null),
        ]))
    }
}

extension FileSystem {
    /// Creates `path` (mode 0600; it must not exist), runs `body` on its descriptor, then syncs
    /// and closes it.
    static func withNewFile(_ path: String, _ body: (Int32) throws -> Void) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))", code: .ioError) }
        var closed = false
        defer { if !closed { close(fd) } }
        try body(fd)
        guard fsync(fd) == 0 else { throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))", code: .ioError) }
        closed = true
        guard close(fd) == 0 else { throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))", code: .ioError) }
    }

    /// Writes all of `bytes` to `fd`.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var done = 0
        while done < bytes.count {
            let n = retryWhileInterrupted { bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, bytes.count - done) } }
            guard n > 0 else { throw CLIError("cannot write: \(String(cString: strerror(errno)))", code: .ioError) }
            done += n
        }
    }

    /// The names in the folder `path` (none when it does not exist).
    static func names(in path: String) throws -> [String] {
        guard exists(path) else { return [] }
        guard let dir = opendir(path) else { throw CLIError("cannot open \(path): \(String(cString: strerror(errno)))", code: .ioError) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// Renames `source` to `destination`.
    static func move(_ source: String, to destination: String) throws {
        guard rename(source, destination) == 0 else {
            throw CLIError("cannot move \(source) to \(destination): \(String(cString: strerror(errno)))", code: .ioError)
        }
    }

    /// Removes `path` and what it holds (plain files and folders of them, as a restore's staging
    /// folder holds); a missing path is fine.
    static func removeHomeTree(_ path: String) throws {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            for name in try names(in: path) { try removeHomeTree(path + "/" + name) }
            guard rmdir(path) == 0 else { throw CLIError("cannot remove \(path): \(String(cString: strerror(errno)))", code: .ioError) }
        } else if unlink(path) != 0 {
            throw CLIError("cannot remove \(path): \(String(cString: strerror(errno)))", code: .ioError)
        }
    }
}

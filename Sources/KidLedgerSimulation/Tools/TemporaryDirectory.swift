#if canImport(Glibc)
import Glibc
#endif

/// Temporary directories for LMDB-backed simulation runs, under `$TMPDIR` (default `/tmp`). The
/// names are random, which affects nothing the simulation traces.
enum TemporaryDirectory {
    /// A new empty directory (mode 0700) under ``base()``.
    static func make() -> String { make(preferring: base()) }

    /// A new empty directory under `preferred`, or under `/tmp` when none can be made there (a
    /// `$TMPDIR` that does not exist, say).
    static func make(preferring preferred: String) -> String {
        var failures: [String] = []
        for dir in preferred == "/tmp" ? [preferred] : [preferred, "/tmp"] {
            var template = Array(((dir == "/" ? "" : dir) + "/kidledger-sim.XXXXXX").utf8CString)
            if let path = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) {
                return String(cString: path)
            }
            failures.append("\(dir): \(String(cString: strerror(errno)))")
        }
        fatalError("cannot make a temporary directory for LMDB replicas (\(failures.joined(separator: "; ")))")
    }

    /// The directory new ones go in: `$TMPDIR` when set.
    static func base() -> String {
        base(tmpdir: getenv("TMPDIR").map { String(cString: $0) })
    }

    /// `tmpdir` without trailing slashes when it names a directory path, else `/tmp`.
    static func base(tmpdir: String?) -> String {
        guard var dir = tmpdir, !dir.isEmpty else { return "/tmp" }
        while dir.count > 1 && dir.hasSuffix("/") { dir.removeLast() }
        return dir
    }

    /// Deletes `path` and everything in it (best effort).
    static func remove(_ path: String) {
        for name in names(in: path) {
            let child = path + "/" + name
            var st = stat()
            if lstat(child, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { remove(child) } else { unlink(child) }
        }
        rmdir(path)
    }

    /// The names in directory `path` without "." and "..", in the order the system lists them
    /// (none when it can't be read).
    static func names(in path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}

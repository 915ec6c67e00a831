#if canImport(Glibc)
import Glibc
#endif

/// Temporary directories for LMDB-backed simulation runs (the names are random, which affects
/// nothing the simulation traces).
enum TemporaryDirectory {
    static func make() -> String {
        var template = Array("/tmp/kidledger-sim.XXXXXX".utf8CString)
        let path = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(path != nil, "mkdtemp failed")
        return String(cString: path!)
    }

    static func remove(_ path: String) {
        guard let dir = opendir(path) else { return }
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            if name == "." || name == ".." { continue }
            let child = path + "/" + name
            var st = stat()
            if lstat(child, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { remove(child) } else { unlink(child) }
        }
        closedir(dir)
        rmdir(path)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The environment's directory on disk.
enum DirectoryFiles {
    /// Creates `path` (and missing parents) with mode 0700 unless it exists; returns its identity.
    static func make(_ path: String) throws(LMDBError) -> OpenDirectories.Identity {
        var info = stat()
        if stat(path, &info) == 0 {
            guard info.st_mode & 0o170000 == 0o040000 else {
                throw .other(ENOTDIR, "\(path) exists and is not a directory")
            }
            return OpenDirectories.Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        }
        guard errno == ENOENT else { throw directoryError(errno, path) }
        var parent = path
        while parent.count > 1, parent.hasSuffix("/") { parent.removeLast() }
        if let slash = parent.lastIndex(of: "/") {
            parent = String(parent[..<slash])
            if !parent.isEmpty { _ = try make(parent) }
        }
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw directoryError(errno, path) }
        guard stat(path, &info) == 0 else { throw directoryError(errno, path) }
        return OpenDirectories.Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    private static func directoryError(_ code: Int32, _ path: String) -> LMDBError {
        switch LMDBError(code: code) {
        case .other(let code, let message): .other(code, "\(message): \(path)")
        case let error: error
        }
    }
}

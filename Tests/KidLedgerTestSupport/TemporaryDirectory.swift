import Foundation

/// A fresh directory under /tmp (`mkdtemp`), removed with everything in it by ``remove()``.
public struct TemporaryDirectory: Sendable {
    /// The directory's path.
    public let path: String

    /// Creates `/tmp/PREFIX-XXXXXX`.
    public init(prefix: String = "kidledger") {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: \(String(cString: strerror(errno)))")
        path = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    /// A path inside the directory.
    public func sub(_ name: String) -> String { path + "/" + name }

    /// Removes the directory and everything in it.
    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs `body` with a fresh temporary directory and removes it afterwards.
public func withTemporaryDirectory<T>(prefix: String = "kidledger", _ body: (TemporaryDirectory) throws -> T) rethrows -> T {
    let directory = TemporaryDirectory(prefix: prefix)
    defer { directory.remove() }
    return try body(directory)
}

import Foundation
import KidLedgerLMDB
import KidLedgerReplica


/// A fresh directory under /tmp, removed by ``remove()``.
struct TemporaryDirectory {
    let path: String

    init() {
        var template = Array("/tmp/kidledger-lmdb-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    /// A path inside the directory.
    func sub(_ name: String) -> String { path + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs `body` with a fresh temporary directory and removes it afterwards.
func withTemporaryDirectory<T>(_ body: (TemporaryDirectory) throws -> T) rethrows -> T {
    let directory = TemporaryDirectory()
    defer { directory.remove() }
    return try body(directory)
}


let tableA = Table("a")
let tableB = Table("b")

/// All entries of `table` in forward order.
func entries(_ store: any KeyValueStore, _ table: Table) throws -> [[UInt8]: [UInt8]] {
    try store.read { reader in
        var all: [[UInt8]: [UInt8]] = [:]
        try reader.scan(table) { key, value in
            all[key] = value
            return true
        }
        return all
    }
}

/// Bytes from a string.
func b(_ string: String) -> [UInt8] { Array(string.utf8) }

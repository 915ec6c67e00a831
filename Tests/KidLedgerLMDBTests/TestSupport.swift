import Foundation
import KidLedgerLMDB
import KidLedgerReplica


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

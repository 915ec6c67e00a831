import Testing
import Foundation
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTestSupport

@Suite("LMDBEnvironment basics")
struct BasicsTests {
    struct Boom: Error {}

    @Test func putGetDeleteCount() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA, tableB])
            try env.write { w throws in
                try w.put(tableA, b("k1"), b("v1"))
                try w.put(tableA, b("k2"), b("v2"))
                try w.put(tableA, b("k1"), b("v1'"))  // replaces
                try w.put(tableB, b("k1"), [])       // empty value
                #expect(try w.get(tableA, b("k1")) == b("v1'"))  // sees its own writes
            }
            try env.read { r throws in
                #expect(try r.get(tableA, b("k1")) == b("v1'"))
                #expect(try r.get(tableA, b("k2")) == b("v2"))
                #expect(try r.get(tableA, b("k3")) == nil)
                #expect(try r.get(tableA, []) == nil)
                #expect(try r.get(tableB, b("k1")) == [])
                #expect(try r.count(tableA) == 2)
                #expect(try r.count(tableB) == 1)
            }
            try env.write { w throws in
                try w.delete(tableA, b("k1"))
                try w.delete(tableA, b("missing"))  // not an error
                try w.delete(tableA, [])            // not an error either
            }
            try env.read { r throws in
                #expect(try r.get(tableA, b("k1")) == nil)
                #expect(try r.count(tableA) == 1)
            }
            #expect(try env.stat(tableA).entries == 1)
            #expect(try env.stat(tableA).depth == 1)
        }
    }

    @Test func throwingBodyLeavesNothing() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            try env.write { try $0.put(tableA, b("kept"), b("1")) }
            #expect(throws: Boom.self) {
                try env.write { w throws in
                    try w.put(tableA, b("new"), b("2"))
                    try w.delete(tableA, b("kept"))
                    throw Boom()
                }
            }
            #expect(try entries(env, tableA) == [b("kept"): b("1")])
            // The store is still usable afterwards.
            try env.write { try $0.put(tableA, b("after"), b("3")) }
            #expect(try entries(env, tableA).count == 2)
        }
    }

    @Test func commitOnReturnPassesTheResult() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            let result = try env.write { w -> Int in
                try w.put(tableA, b("x"), b("y"))
                return 42
            }
            #expect(result == 42)
            #expect(try env.read { try $0.get(tableA, b("x")) } == b("y"))
        }
    }

    @Test func keySizes() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            #expect(env.maxKeySize == 511)
            let longest = [UInt8](repeating: 7, count: env.maxKeySize)
            let tooLong = [UInt8](repeating: 7, count: env.maxKeySize + 1)
            try env.write { w throws in
                #expect(throws: LMDBError.badValueSize) { try w.put(tableA, tooLong, b("v")) }
                #expect(throws: LMDBError.badValueSize) { try w.put(tableA, [], b("v")) }
                // The transaction stays usable after a rejected key.
                try w.put(tableA, longest, b("v"))
            }
            try env.read { r throws in
                #expect(try r.get(tableA, longest) == b("v"))
                #expect(try r.get(tableA, tooLong) == nil)
            }
            try env.write { try $0.delete(tableA, tooLong) }
            #expect(try env.read { try $0.count(tableA) } == 1)
        }
    }

    @Test func undeclaredTableIsRejected() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            #expect(throws: LMDBError.badDBI) { try env.read { try $0.get(Table("nope"), b("k")) } }
            #expect(throws: LMDBError.badDBI) { try env.write { try $0.put(Table("nope"), b("k"), b("v")) } }
        }
    }

    @Test func escapedTransactionIsDead() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            let escaped = try env.write { w -> any KeyValueWriter in
                try w.put(tableA, b("k"), b("v"))
                return w
            }
            #expect(throws: LMDBError.badTxn) { try escaped.put(tableA, b("k2"), b("v")) }
            #expect(throws: LMDBError.badTxn) { try escaped.get(tableA, b("k")) }
            let reader = try env.read { $0 }
            #expect(throws: LMDBError.badTxn) { try reader.count(tableA) }
        }
    }

    @Test func writingInAReadTransactionIsDenied() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            #expect(throws: LMDBError.permissionDenied) {
                try env.read { try ($0 as! any KeyValueWriter).put(tableA, b("k"), b("v")) }
            }
        }
    }

    @Test func nestedWriteThrowsInsteadOfHanging() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            let error = #expect(throws: LMDBError.self) {
                try env.write { _ in try env.write { try $0.put(tableA, b("k"), b("v")) } }
            }
            #expect(error?.code == EDEADLK)
            // A read inside a write is fine and sees the last committed state.
            try env.write { w throws in
                try w.put(tableA, b("k"), b("v"))
                #expect(try env.read { try $0.get(tableA, b("k")) } == nil)
            }
            #expect(try env.read { try $0.get(tableA, b("k")) } == b("v"))
        }
    }

    @Test func closeIsIdempotentAndLaterCallsThrow() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            env.close()
            env.close()
            #expect(env.mapSizeBytes == 0)
            #expect(throws: LMDBError.badTxn) { try env.read { try $0.count(tableA) } }
            #expect(throws: LMDBError.badTxn) { try env.write { try $0.put(tableA, b("k"), b("v")) } }
            #expect(throws: LMDBError.badTxn) { try env.sync() }
        }
    }

    @Test func errorsDescribeThemselves() {
        #expect(LMDBError(code: -30792) == .mapFull)
        #expect(LMDBError(code: 28) == .noSpace)
        #expect(LMDBError(code: 13) == .permissionDenied)
        #expect(LMDBError.mapFull.code == -30792)
        #expect(LMDBError.mapFull.description.contains("MDB_MAP_FULL"))
        #expect(LMDBError.corrupted.description.contains("MDB_CORRUPTED"))
        #expect(LMDBError(code: 22) == .other(22, "Invalid argument"))
        #expect(LMDBError(code: 22).description.contains("Invalid argument"))
        #expect(LMDBError.badValueSize.cName == "MDB_BAD_VALSIZE")
    }
}

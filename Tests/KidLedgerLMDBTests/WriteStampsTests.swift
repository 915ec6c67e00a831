import Testing
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTestSupport

/// ``LMDBEnvironment/writeStamps(_:)``: equal stamps must mean the tables were not written in
/// between, whoever wrote them; any doubt changes them.
@Suite("LMDBEnvironment write stamps")
struct WriteStampsTests {
    @Test func followCommitsThroughThisObjectPerTable() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA, tableB])
            let first = try env.writeStamps([tableA, tableB])
            #expect(try env.writeStamps([tableA, tableB]) == first)  // nothing committed in between
            try env.write { try $0.put(tableA, b("k"), b("1")) }
            let afterA = try env.writeStamps([tableA, tableB])
            #expect(afterA != first)
            #expect(try env.writeStamps([tableB]) == env.writeStamps([tableB]))
            // A commit that writes only B leaves A's stamps as they were, and changes B's.
            let aBefore = try env.writeStamps([tableA]), bBefore = try env.writeStamps([tableB])
            try env.write { try $0.put(tableB, b("k"), b("1")) }
            #expect(try env.writeStamps([tableA]) == aBefore)
            #expect(try env.writeStamps([tableB]) != bBefore)
            // A delete counts; deleting a missing key writes nothing, and neither does a read-only
            // write body.
            let a1 = try env.writeStamps([tableA])
            try env.write { try $0.delete(tableA, b("missing")) }
            try env.write { _ = try $0.get(tableA, b("k")) }
            #expect(try env.writeStamps([tableA]) == a1)
            try env.write { try $0.delete(tableA, b("k")) }
            #expect(try env.writeStamps([tableA]) != a1)
            #expect(try env.read { try $0.count(tableA) } == 0)
        }
    }

    @Test func aWriteTransactionReadingItsOwnWritesAndAnAbortedOne() throws {
        struct Stop: Error {}
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            let before = try env.writeStamps([tableA])
            // An aborted write changes nothing: the stamps may stay, and the data did stay.
            #expect(throws: Stop.self) {
                try env.write { w in
                    try w.put(tableA, b("gone"), b("1"))
                    #expect(try w.get(tableA, b("gone")) == b("1"))  // its own write, inside
                    throw Stop()
                }
            }
            #expect(try env.writeStamps([tableA]) == before)
            #expect(try env.read { try $0.get(tableA, b("gone")) } == nil)
            // Stamps read inside a write body describe the last commit, not the body's writes;
            // the commit then changes them.
            let inside = try env.write { w in
                try w.put(tableA, b("kept"), b("1"))
                return try env.writeStamps([tableA])
            }
            #expect(inside == before)
            #expect(try env.writeStamps([tableA]) != before)
        }
    }

    @Test(.enabled(if: ChildProcess.available))
    func aCommitByAnotherProcessChangesEveryStamp() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA, tableB])
            try env.write { try $0.put(tableB, b("mine"), b("1")) }
            let a = try env.writeStamps([tableA]), both = try env.writeStamps([tableB, tableA])
            // Another process writes table a: this object did not see the commit.
            let child = try ChildProcess.start(["write", dir.path, String(64 << 20), "3"])
            #expect(child.process.terminationStatus == 0)
            #expect(try env.writeStamps([tableA]) != a)
            #expect(try env.writeStamps([tableB, tableA]) != both)
            // Known again from here on.
            let again = try env.writeStamps([tableA])
            #expect(try env.writeStamps([tableA]) == again)
            // Another process commits, then this object: the commit here does not hide the other.
            let child2 = try ChildProcess.start(["write", dir.path, String(64 << 20), "5"])
            #expect(child2.process.terminationStatus == 0)
            try env.write { try $0.put(tableB, b("mine-again"), b("2")) }
            #expect(try env.writeStamps([tableA]) != again)
            #expect(try env.read { try $0.count(tableA) } == 5)
        }
    }
}

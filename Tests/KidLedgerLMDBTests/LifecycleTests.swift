import Foundation
import Synchronization
import Testing
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTestSupport

@Suite("LMDBEnvironment opening, durability and map growth")
struct LifecycleTests {
    @Test func dataSurvivesCloseAndReopen() throws {
        try withTemporaryDirectory { dir throws in
            do {
                let env = try LMDBEnvironment(directory: dir.path, tables: [tableA, tableB])
                try env.write { w in
                    try w.put(tableA, b("alice"), b("12.50"))
                    try w.put(tableB, b("bob"), b("3"))
                }
                env.close()
            }
            let reopened = try LMDBEnvironment(directory: dir.path, tables: [tableA, tableB])
            #expect(try entries(reopened, tableA) == [b("alice"): b("12.50")])
            #expect(try entries(reopened, tableB) == [b("bob"): b("3")])
        }
    }

    @Test func droppingTheLastReferenceClosesIt() throws {
        try withTemporaryDirectory { dir throws in
            var env: LMDBEnvironment? = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            try env?.write { try $0.put(tableA, b("k"), b("v")) }
            env = nil  // deinit closes; opening again in this process is then allowed
            let reopened = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            #expect(try reopened.read { try $0.get(tableA, b("k")) } == b("v"))
        }
    }

    @Test func createsMissingDirectoriesPrivately() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir.sub("nested/home/")
            let env = try LMDBEnvironment(directory: path, tables: [tableA])
            #expect(env.staleReadersCleared == 0)
            var info = stat()
            #expect(stat(path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o700)
            #expect(stat(path + "data.mdb", &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600)
        }
    }

    @Test func aRegularFileIsNotADirectory() throws {
        try withTemporaryDirectory { dir throws in
            let file = dir.sub("plain-file")
            #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
            let error = #expect(throws: LMDBError.self) {
                _ = try LMDBEnvironment(directory: file, tables: [tableA])
            }
            #expect(error?.code == ENOTDIR)
            #expect(error?.description.contains(file) == true)
            // A path below a regular file cannot be created either.
            let below = #expect(throws: LMDBError.self) {
                _ = try LMDBEnvironment(directory: file + "/sub", tables: [tableA])
            }
            #expect(below?.code == ENOTDIR)
        }
    }

    @Test func aDirectoryWithoutLMDBFilesThatAreGarbageIsRejected() throws {
        try withTemporaryDirectory { dir throws in
            let garbage = Data(repeating: 0xAB, count: 64 * 1024)
            #expect(FileManager.default.createFile(atPath: dir.sub("data.mdb"), contents: garbage))
            #expect(throws: LMDBError.invalid) {
                _ = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            }
        }
    }

    @Test func openingTheSameDirectoryTwiceInOneProcessThrows() throws {
        try withTemporaryDirectory { dir throws in
            let first = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            let error = #expect(throws: LMDBError.self) {
                _ = try LMDBEnvironment(directory: dir.path + "/", tables: [tableA])
            }
            #expect(error?.code == EBUSY)
            // The failed attempt did not disturb the first instance.
            try first.write { try $0.put(tableA, b("k"), b("v")) }
            first.close()
            let second = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            #expect(try second.read { try $0.get(tableA, b("k")) } == b("v"))
        }
    }

    @Test func invalidArgumentsThrow() throws {
        try withTemporaryDirectory { dir throws in
            #expect(throws: LMDBError.self) { _ = try LMDBEnvironment(directory: "", tables: [tableA]) }
            #expect(throws: LMDBError.self) { _ = try LMDBEnvironment(directory: dir.path, tables: [Table("")]) }
            #expect(throws: LMDBError.self) {
                _ = try LMDBEnvironment(directory: dir.path, tables: [tableA], mapSizeBytes: 0)
            }
            // Still openable afterwards: failed opens leave nothing behind.
            _ = try LMDBEnvironment(directory: dir.path, tables: [tableA, tableA])
        }
    }

    @Test func theMapGrowsAndTheBodyRunsAgain() throws {
        try withTemporaryDirectory { dir throws in
            let small = 256 << 10
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA], mapSizeBytes: small)
            #expect(env.mapSizeBytes == small)
            let value = [UInt8](repeating: 0x5A, count: 1000)
            var runs = 0
            try env.write { w in
                runs += 1
                for i in 0..<4000 {  // about 4 MiB in one transaction
                    try w.put(tableA, Array("key-\(i)".utf8), value)
                }
            }
            #expect(runs > 1)
            let grown = env.mapSizeBytes
            #expect(grown >= 4 << 20)
            #expect(try env.read { try $0.count(tableA) } == 4000)
            env.close()

            // The grown size is recorded in the environment and adopted on reopen.
            let reopened = try LMDBEnvironment(directory: dir.path, tables: [tableA], mapSizeBytes: small)
            #expect(reopened.mapSizeBytes == grown)
            #expect(try reopened.read { try $0.count(tableA) } == 4000)
            #expect(try reopened.read { try $0.get(tableA, b("key-3999")) } == value)
        }
    }

    @Test func aBodyThatSwallowsMapFullStillGrows() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA], mapSizeBytes: 256 << 10)
            var failures = 0
            try env.write { w in
                for i in 0..<2000 {
                    do {
                        try w.put(tableA, Array("key-\(i)".utf8), [UInt8](repeating: 1, count: 1000))
                    } catch {
                        failures += 1
                        return  // swallow it and "succeed"
                    }
                }
            }
            #expect(failures > 0)
            #expect(try env.read { try $0.count(tableA) } == 2000)
        }
    }

    @Test func growthStopsAtTheMaximum() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA], mapSizeBytes: 256 << 10,
                                          mapSizeBytesMax: 1 << 20)
            try env.write { try $0.put(tableA, b("before"), b("1")) }
            #expect(throws: LMDBError.mapFull) {
                try env.write { w in
                    for i in 0..<4000 { try w.put(tableA, Array("key-\(i)".utf8), [UInt8](repeating: 2, count: 1000)) }
                }
            }
            #expect(env.mapSizeBytes == 1 << 20)
            #expect(try entries(env, tableA) == [b("before"): b("1")])
        }
    }

    @Test func nonDurableWritesAndSync() throws {
        try withTemporaryDirectory { dir throws in
            do {
                let env = try LMDBEnvironment(directory: dir.path, tables: [tableA], durable: false)
                for i in 0..<50 { try env.write { try $0.put(tableA, [UInt8(i) + 1], [UInt8(i)]) } }
                try env.sync()
                env.close()
            }
            let reopened = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            #expect(try reopened.read { try $0.count(tableA) } == 50)
        }
    }

    @Test func concurrentReadsWhileTheMapGrows() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA], mapSizeBytes: 256 << 10)
            try env.write { try $0.put(tableA, b("anchor"), b("a")) }
            let failures = Failures()
            DispatchQueue.concurrentPerform(iterations: 8) { worker in
                do {
                    for round in 0..<40 {
                        if worker < 2 {
                            try env.write { w in
                                for i in 0..<50 {
                                    try w.put(tableA, Array("w\(worker)-\(round)-\(i)".utf8), [UInt8](repeating: 3, count: 500))
                                }
                            }
                        } else {
                            let seen = try env.read { r in
                                var n = 0
                                try r.scan(tableA, prefix: b("w")) { _, value in
                                    if value.count != 500 { failures.add("bad value") }
                                    n += 1
                                    return true
                                }
                                if try r.get(tableA, b("anchor")) != b("a") { failures.add("anchor lost") }
                                return n
                            }
                            if seen % 50 != 0 { failures.add("torn snapshot: \(seen)") }
                        }
                    }
                } catch {
                    failures.add("\(error)")
                }
            }
            #expect(failures.all.isEmpty)
            #expect(try env.read { try $0.count(tableA) } == 1 + 2 * 40 * 50)
            #expect(env.mapSizeBytes > 256 << 10)
        }
    }
}

/// Failures collected from several threads.
final class Failures: Sendable {
    private let list = Mutex<[String]>([])

    func add(_ failure: String) { list.withLock { $0.append(failure) } }

    var all: [String] { list.withLock { $0 } }
}

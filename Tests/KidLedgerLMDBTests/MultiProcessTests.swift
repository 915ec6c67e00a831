import Foundation
import Testing
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTestSupport

/// Another process on the same environment: a small Python script driving Debian's liblmdb
/// through ctypes (the same library this package links), so these tests need no helper binary.
enum ChildProcess {
    static let python = "/usr/bin/python3"

    /// Whether the child can run here.
    static var available: Bool {
        FileManager.default.isExecutableFile(atPath: python) && dlopen("liblmdb.so.0", RTLD_NOW) != nil
    }

    /// `write PATH MAPSIZE COUNT`: writes COUNT 1000-byte values into table "a" in one transaction.
    /// `hold PATH`: keeps the environment open until its standard input closes.
    /// `stale PATH`: starts a read transaction and waits to be killed, leaving its reader slot behind.
    static let script = """
    import ctypes, sys
    lib = ctypes.CDLL("liblmdb.so.0")
    class Val(ctypes.Structure):
        _fields_ = [("mv_size", ctypes.c_size_t), ("mv_data", ctypes.c_void_p)]
    def ok(rc):
        if rc != 0:
            sys.stderr.write("lmdb error %d\\n" % rc); sys.exit(1)
    mode, path = sys.argv[1], sys.argv[2].encode()
    env = ctypes.c_void_p()
    ok(lib.mdb_env_create(ctypes.byref(env)))
    ok(lib.mdb_env_set_maxdbs(env, 8))
    if mode == "write":
        ok(lib.mdb_env_set_mapsize(env, ctypes.c_size_t(int(sys.argv[3]))))
    ok(lib.mdb_env_open(env, path, 0x200000, 0o600))
    txn = ctypes.c_void_p()
    if mode == "write":
        ok(lib.mdb_txn_begin(env, None, 0, ctypes.byref(txn)))
        dbi = ctypes.c_uint()
        ok(lib.mdb_dbi_open(txn, b"a", 0x40000, ctypes.byref(dbi)))
        value = ctypes.create_string_buffer(b"c" * 1000, 1000)
        for i in range(int(sys.argv[4])):
            key = ctypes.create_string_buffer(b"child-%d" % i)
            k = Val(len(key.value), ctypes.cast(key, ctypes.c_void_p))
            v = Val(1000, ctypes.cast(value, ctypes.c_void_p))
            ok(lib.mdb_put(txn, dbi, ctypes.byref(k), ctypes.byref(v), 0))
        ok(lib.mdb_txn_commit(txn))
    elif mode == "hold":
        print("ready", flush=True)
        sys.stdin.read()
    elif mode == "stale":
        ok(lib.mdb_txn_begin(env, None, 0x20000, ctypes.byref(txn)))
        print("ready", flush=True)
        sys.stdin.read()
    lib.mdb_env_close(env)
    """

    /// Starts the child; returns once it printed "ready" (or exited, for `write`).
    static func start(_ arguments: [String]) throws -> (process: Process, input: Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-c", script] + arguments
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        if arguments.first == "write" {
            process.waitUntilExit()
        } else {
            var seen = ""
            while !seen.contains("ready") {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                seen += String(decoding: chunk, as: UTF8.self)
            }
        }
        return (process, input)
    }
}

@Suite("LMDBEnvironment shared with other processes", .enabled(if: ChildProcess.available))
struct MultiProcessTests {
    @Test func adoptsAMapGrownByAnotherProcess() throws {
        try withTemporaryDirectory { dir throws in
            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA], mapSizeBytes: 256 << 10)
            try env.write { try $0.put(tableA, b("mine"), b("1")) }

            // Another process grows the map to 16 MiB and fills it beyond this process's 256 KiB.
            let child = try ChildProcess.start(["write", dir.path, String(16 << 20), "4000"])
            #expect(child.process.terminationStatus == 0)

            // The next transaction here meets MDB_MAP_RESIZED and adopts the new size.
            #expect(try env.read { try $0.count(tableA) } == 4001)
            #expect(env.mapSizeBytes == 16 << 20)
            try env.write { try $0.put(tableA, b("mine-again"), b("2")) }
            #expect(try env.read { try $0.get(tableA, b("child-3999")) }?.count == 1000)
            #expect(try env.read { try $0.get(tableA, b("mine-again")) } == b("2"))
        }
    }

    @Test func clearsTheReaderSlotOfADeadProcess() throws {
        try withTemporaryDirectory { dir throws in
            // Create the environment, then keep it open elsewhere so its lock table survives.
            do { _ = try LMDBEnvironment(directory: dir.path, tables: [tableA]) }
            let holder = try ChildProcess.start(["hold", dir.path])
            defer {
                try? holder.input.fileHandleForWriting.close()
                holder.process.waitUntilExit()
            }
            let stale = try ChildProcess.start(["stale", dir.path])
            kill(stale.process.processIdentifier, SIGKILL)
            stale.process.waitUntilExit()

            let env = try LMDBEnvironment(directory: dir.path, tables: [tableA])
            #expect(env.staleReadersCleared == 1)
            try env.write { try $0.put(tableA, b("k"), b("v")) }
            #expect(try env.read { try $0.get(tableA, b("k")) } == b("v"))
        }
    }
}

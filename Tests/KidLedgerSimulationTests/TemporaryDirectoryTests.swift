import Glibc
import Testing
@testable import KidLedgerSimulation

/// Where LMDB-backed runs keep their scratch files: under `$TMPDIR`, else `/tmp`.
@Suite("Temporary directories")
struct TemporaryDirectoryTests {
    @Test("the base is $TMPDIR without trailing slashes, and /tmp when it is unset or empty")
    func base() {
        #expect(TemporaryDirectory.base(tmpdir: nil) == "/tmp")
        #expect(TemporaryDirectory.base(tmpdir: "") == "/tmp")
        #expect(TemporaryDirectory.base(tmpdir: "/dev/shm") == "/dev/shm")
        #expect(TemporaryDirectory.base(tmpdir: "/var/tmp//") == "/var/tmp")
        #expect(TemporaryDirectory.base(tmpdir: "/") == "/")
    }

    @Test("a made directory is new, empty and private, and remove deletes it with what it holds")
    func makeAndRemove() throws {
        let base = TemporaryDirectory.make()
        defer { TemporaryDirectory.remove(base) }
        let dir = TemporaryDirectory.make(preferring: base)
        #expect(dir.hasPrefix(base + "/kidledger-sim."))
        var st = stat()
        #expect(stat(dir, &st) == 0)
        #expect(st.st_mode & S_IFMT == S_IFDIR)
        #expect(st.st_mode & 0o777 == 0o700)
        #expect(entries(dir) == [])
        #expect(mkdir(dir + "/sub", 0o700) == 0)
        let fd = open(dir + "/sub/data.mdb", O_CREAT | O_WRONLY, 0o600)
        #expect(fd >= 0)
        close(fd)
        #expect(entries(dir) == ["sub"])
        TemporaryDirectory.remove(dir)
        #expect(access(dir, F_OK) != 0)
        #expect(entries(base) == [])
    }

    @Test("a preferred directory that does not exist gives way to /tmp")
    func fallsBackToTmp() {
        let missing = TemporaryDirectory.make()
        TemporaryDirectory.remove(missing)
        let dir = TemporaryDirectory.make(preferring: missing)
        defer { TemporaryDirectory.remove(dir) }
        #expect(dir.hasPrefix("/tmp/kidledger-sim."))
        #expect(access(dir, F_OK) == 0)
    }

    func entries(_ dir: String) -> [String] { TemporaryDirectory.names(in: dir).sorted() }
}

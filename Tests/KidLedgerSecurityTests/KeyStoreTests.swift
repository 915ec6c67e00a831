#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KidLedgerTestSupport
import Synchronization
import Testing
@testable import KidLedgerSecurity

func mode(_ path: String) -> mode_t {
    var info = stat()
    #expect(stat(path, &info) == 0)
    return info.st_mode & 0o7777
}

@Suite("Key store")
final class KeyStoreTests: Sendable {
    /// The directories this test made, removed when it ends (a fresh instance runs each test).
    private let made = Mutex<[TemporaryDirectory]>([])

    deinit { made.withLock { $0.forEach { $0.remove() } } }

    /// A fresh temporary directory, removed when the test ends.
    func temporaryDirectory() -> String {
        let directory = TemporaryDirectory(prefix: "kidledger-sec")
        made.withLock { $0.append(directory) }
        return directory.path
    }

    @Test func createLoadAndList() throws {
        let home = temporaryDirectory()
        let store = KeyStore(directory: home + "/identities")
        #expect(try store.accounts() == [])
        #expect(try store.load(account: "mum") == nil)
        let created = try store.create(account: "mum", seed: Seeds.bytes(32, seed: 1))
        _ = try store.create(account: "dad.laptop_2-b", seed: Seeds.bytes(32, seed: 2))
        let loaded = try #require(try store.load(account: "mum"))
        #expect(loaded.publicKey == created.publicKey)
        #expect(loaded.seed == Seeds.bytes(32, seed: 1))
        #expect(try store.accounts() == ["dad.laptop_2-b", "mum"])
        #expect(mode(home + "/identities") == 0o700)
        #expect(mode(home + "/identities/mum.key") == 0o600)
        // No temporary files are left behind.
        #expect(try store.accounts().count == 2)
    }

    @Test func createdFilesAre0600EvenWithAPermissiveUmask() throws {
        let old = umask(0)
        defer { umask(old) }
        let store = KeyStore(directory: temporaryDirectory() + "/a/b/identities")
        _ = try store.create(account: "kid", seed: Seeds.bytes(32, seed: 3))
        #expect(mode(store.directory + "/kid.key") == 0o600)
        #expect(mode(store.directory) == 0o700)
    }

    @Test func fileFormat() throws {
        let store = KeyStore(directory: temporaryDirectory())
        _ = try store.create(account: "x", seed: [UInt8](repeating: 0xAB, count: 32))
        let fd = open(store.directory + "/x.key", O_RDONLY)
        var buffer = [UInt8](repeating: 0, count: 200)
        let n = read(fd, &buffer, 200)
        close(fd)
        #expect(String(decoding: buffer[0..<n], as: UTF8.self)
            == "kidledger-identity v1\n" + String(repeating: "ab", count: 32) + "\n")
    }

    @Test func loadRefusesAKeyReadableByOthers() throws {
        let store = KeyStore(directory: temporaryDirectory())
        _ = try store.create(account: "mum", seed: Seeds.bytes(32, seed: 1))
        let path = store.directory + "/mum.key"
        #expect(chmod(path, 0o644) == 0)
        #expect(throws: SecurityError.keyFile(
            "key file \(path) is readable by others (mode 0644); run chmod 600 \(path)")) {
            try store.load(account: "mum")
        }
        #expect(chmod(path, 0o620) == 0)
        #expect(throws: SecurityError.keyFile(
            "key file \(path) is accessible by others (mode 0620); run chmod 600 \(path)")) {
            try store.load(account: "mum")
        }
        #expect(chmod(path, 0o400) == 0)
        #expect(try store.load(account: "mum") != nil)
    }

    @Test func createRefusesToOverwrite() throws {
        let store = KeyStore(directory: temporaryDirectory())
        let first = try store.create(account: "mum", seed: Seeds.bytes(32, seed: 1))
        let path = store.directory + "/mum.key"
        #expect(throws: SecurityError.keyFile("key file \(path) already exists; refusing to replace it")) {
            try store.create(account: "mum", seed: Seeds.bytes(32, seed: 2))
        }
        #expect(try store.load(account: "mum")?.publicKey == first.publicKey)
    }

    @Test func accountNamesAreValidated() throws {
        let store = KeyStore(directory: temporaryDirectory())
        for bad in ["", ".", "..", "a/b", "../x", "a b", "é", String(repeating: "a", count: 65), "x\n"] {
            #expect(throws: SecurityError.badAccountName(bad)) { try store.create(account: bad, seed: Seeds.bytes(32, seed: 1)) }
            #expect(throws: SecurityError.badAccountName(bad)) { try store.load(account: bad) }
        }
        _ = try store.create(account: String(repeating: "a", count: 64), seed: Seeds.bytes(32, seed: 1))
        #expect(SecurityError.badAccountName("a b").description.contains("1 to 64 characters"))
    }

    @Test func malformedAndSymlinkedKeyFilesAreRefused() throws {
        let store = KeyStore(directory: temporaryDirectory())
        let path = store.directory + "/bad.key"
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        _ = write(fd, "kidledger-identity v1\nnothex\n", 29)
        close(fd)
        #expect(throws: SecurityError.self) { try store.load(account: "bad") }
        _ = try store.create(account: "real", seed: Seeds.bytes(32, seed: 1))
        #expect(symlink(store.directory + "/real.key", store.directory + "/link.key") == 0)
        #expect(throws: SecurityError.self) { try store.load(account: "link") }
        #expect(throws: SecurityError.self) { try store.create(account: "bad", seed: Seeds.bytes(32, seed: 1)) }
        #expect(throws: SecurityError.badKey("an identity seed is 32 bytes, got 3")) {
            try store.create(account: "short", seed: [1, 2, 3])
        }
    }
}

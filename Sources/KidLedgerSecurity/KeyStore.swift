#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import KidLedgerDomain
import KidLedgerSystem

/// Device identities kept as one file per account in a private directory (e.g. `HOME/identities`).
///
/// File `NAME.key` holds the text `kidledger-identity v1\n` followed by the 64 lowercase hex digits
/// of the 32-byte seed and `\n`. Files are created with mode 0600 (a temporary file opened with
/// `O_CREAT|O_EXCL`, written, fsync'd, then linked into place, which fails rather than replace an
/// existing key; the directory is fsync'd after). The directory is created with mode 0700.
/// Loading refuses a key file that group or others may access, or that another user owns.
public struct KeyStore: Sendable {
    /// The first line of every key file.
    public static let header = "kidledger-identity v1"

    /// The directory holding the key files.
    public let directory: String

    /// A key store over `directory` (created on the first ``create(account:seed:)``).
    public init(directory: String) {
        self.directory = directory
    }

    /// Throws ``SecurityError/badAccountName(_:)`` unless `account` is 1 to 64 characters of
    /// A-Z, a-z, 0-9, '.', '_' and '-' (and not "." or "..").
    public static func validate(account: String) throws(SecurityError) {
        let utf8 = Array(account.utf8)
        let ok = (1...64).contains(utf8.count) && account != "." && account != ".."
            && utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                    || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
            }
        if !ok { throw .badAccountName(account) }
    }

    /// The path of `account`'s key file.
    public func path(account: String) throws(SecurityError) -> String {
        try Self.validate(account: account)
        return directory + "/" + account + ".key"
    }

    /// `account`'s identity, or nil when it has no key file. Throws ``SecurityError/keyFile(_:)`` when
    /// the file is accessible by group or others, owned by another user, not a regular file, or malformed.
    public func load(account: String) throws(SecurityError) -> Identity? {
        let path = try path(account: account)
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            let code = errno
            if code == ENOENT { return nil }
            if code == ELOOP { throw .keyFile("key file \(path) is a symbolic link; refusing to use it") }
            throw .keyFile("cannot open key file \(path): \(Self.reason(code))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .keyFile("cannot stat key file \(path): \(Self.reason(errno))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .keyFile("key file \(path) is not a regular file") }
        let mode = info.st_mode & 0o7777
        if mode & 0o077 != 0 {
            let what = mode & 0o044 != 0 ? "readable by others" : "accessible by others"
            throw .keyFile("key file \(path) is \(what) (mode \(Self.octal(mode))); run chmod 600 \(path)")
        }
        guard info.st_uid == geteuid() else {
            throw .keyFile("key file \(path) belongs to another user (uid \(info.st_uid)); refusing to use it")
        }
        var content: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        // Every pass reads at least a byte (the size check ends the loop) or reaches the end of the
        // file; each read is retried at most 1,000 times when interrupted.
        while true {
            let n = retryWhileInterrupted(maxRetries: 1_000) { read(fd, &buffer, buffer.count) }
            if n < 0 {
                throw .keyFile("cannot read key file \(path): \(Self.reason(errno))")
            }
            if n == 0 { break }
            content.append(contentsOf: buffer[0..<n])
            if content.count > 4096 { throw .keyFile("key file \(path) is too large to be a kidledger identity") }
        }
        let text = String(decoding: content, as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count == 3, lines[0] == Self.header, lines[2].isEmpty,
              let seed = Hex.decode(String(lines[1])), seed.count == Identity.seedByteCount else {
            throw .keyFile("key file \(path) is not a kidledger identity (expected \"\(Self.header)\" and 64 hex digits)")
        }
        do {
            return try Identity(seed: seed)
        } catch {
            throw .keyFile("key file \(path): \(error)")
        }
    }

    /// Creates `account`'s key file from a 32-byte `seed` and returns the identity. Never replaces an
    /// existing key: throws ``SecurityError/keyFile(_:)`` if the account already has one.
    public func create(account: String, seed: [UInt8]) throws(SecurityError) -> Identity {
        let path = try path(account: account)
        let identity = try Identity(seed: seed)
        try makeDirectory()
        var info = stat()
        if lstat(path, &info) == 0 { throw .keyFile("key file \(path) already exists; refusing to replace it") }
        let temporary = directory + "/." + account + ".key.tmp-" + Hex.encode(Sodium.randomBytes(8))
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd < 0 { throw .keyFile("cannot create \(temporary): \(Self.reason(errno))") }
        var linked = false
        defer {
            if !linked { unlink(temporary) }
        }
        do {
            defer { close(fd) }
            guard fchmod(fd, 0o600) == 0 else { throw SecurityError.keyFile("cannot chmod \(temporary): \(Self.reason(errno))") }
            let bytes = Array((Self.header + "\n" + Hex.encode(seed) + "\n").utf8)
            var written = 0
            while written < bytes.count {
                let n = retryWhileInterrupted { bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
                if n < 0 {
                    throw SecurityError.keyFile("cannot write \(temporary): \(Self.reason(errno))")
                }
                written += n
            }
            guard fsync(fd) == 0 else { throw SecurityError.keyFile("cannot fsync \(temporary): \(Self.reason(errno))") }
        }
        // link(2) is atomic and fails with EEXIST instead of replacing (unlike rename(2)).
        if link(temporary, path) != 0 {
            let code = errno
            if code == EEXIST { throw .keyFile("key file \(path) already exists; refusing to replace it") }
            throw .keyFile("cannot create key file \(path): \(Self.reason(code))")
        }
        unlink(temporary)
        linked = true
        syncDirectory()
        return identity
    }

    /// The accounts that have a key file, sorted; empty when the directory does not exist.
    public func accounts() throws(SecurityError) -> [String] {
        guard let dir = opendir(directory) else {
            if errno == ENOENT { return [] }
            throw .keyFile("cannot list key directory \(directory): \(Self.reason(errno))")
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasSuffix(".key") else { continue }
            let account = String(name.dropLast(4))
            if (try? Self.validate(account: account)) != nil { names.append(account) }
        }
        return names.sorted()
    }

    // MARK: - Private helpers

    /// Creates the directory (and missing parents) with mode 0700; tightens an existing one to 0700.
    private func makeDirectory() throws(SecurityError) {
        var info = stat()
        if stat(directory, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else { throw .keyFile("\(directory) exists and is not a directory") }
            if info.st_mode & 0o077 != 0, info.st_uid == geteuid() { _ = chmod(directory, 0o700) }
            return
        }
        var path = ""
        for component in directory.split(separator: "/", omittingEmptySubsequences: false) {
            if path.isEmpty && component.isEmpty { path = "/"; continue }
            path += (path.isEmpty || path == "/" ? "" : "/") + component
            if component.isEmpty { continue }
            if mkdir(path, 0o700) != 0 && errno != EEXIST {
                throw .keyFile("cannot create key directory \(path): \(Self.reason(errno))")
            }
        }
        guard stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw .keyFile("cannot create key directory \(directory)")
        }
    }

    private func syncDirectory() {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            _ = fsync(fd)
            close(fd)
        }
    }

    private static func reason(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    private static func octal(_ mode: mode_t) -> String {
        var digits = String(mode, radix: 8)
        while digits.count < 4 { digits = "0" + digits }
        return digits
    }
}

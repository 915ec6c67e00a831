#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerSecurity

/// The page's long-lived key: 32 random bytes (libsodium) as hex, in `HOME/ui-token`, mode 0600,
/// made once and replaced by "Sign out every browser". It never leaves the laptop's files: sign-in
/// codes, the cookie and the page's change token are derived from it (``SignIn``).
public enum TokenFile {
    /// The file's name inside the home.
    public static let fileName = "ui-token"

    /// The token in `home`, made first when missing.
    ///
    /// - Throws: ``TokenFileError`` when the file cannot be read or written, or is not a token.
    public static func loadOrCreate(home: String) throws(TokenFileError) -> String {
        let path = home + "/" + fileName
        if let existing = try read(path) { return existing }
        do {
            return try write(path, fresh())
        } catch {
            // Another process made it first: use theirs.
            if error.exists, let theirs = try read(path) { return theirs }
            throw error
        }
    }

    /// Replaces the key in `home` with a new one (written aside, then renamed over the old file)
    /// and returns it.
    public static func rotate(home: String) throws(TokenFileError) -> String {
        let path = home + "/" + fileName
        let aside = path + ".new"
        unlink(aside)
        let token = try write(aside, fresh())
        guard rename(aside, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(aside)
            throw TokenFileError(message: "cannot replace \(path): \(reason)")
        }
        return token
    }

    /// 32 random bytes as hex.
    static func fresh() -> String { Hex.encode(Sodium.randomBytes(32)) }

    /// Creates `path` (which must not exist) holding `token`, mode 0600, synced.
    static func write(_ path: String, _ token: String) throws(TokenFileError) -> String {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd < 0 {
            let code = errno
            throw TokenFileError(message: "cannot create \(path): \(String(cString: strerror(code)))", exists: code == EEXIST)
        }
        defer { close(fd) }
        let bytes = Array((token + "\n").utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count, fchmod(fd, 0o600) == 0, fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(path)
            throw TokenFileError(message: "cannot write \(path): \(reason)")
        }
        return token
    }

    /// The token in `path`, nil when the file is missing.
    static func read(_ path: String) throws(TokenFileError) -> String? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw TokenFileError(message: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & 0o077 == 0 else {
            throw TokenFileError(message: "\(path) must be readable by this user only (chmod 600 \(path))")
        }
        var buffer = [UInt8](repeating: 0, count: 128)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        let text = String(decoding: buffer.prefix(max(n, 0)), as: UTF8.self).trimmingCharacters(in: " \n")
        guard text.count == 64, text.utf8.allSatisfy({ FormDecoding.hex($0) != nil }) else {
            throw TokenFileError(message: "\(path) is not a page token; remove it and restart `kidledger serve`")
        }
        return text
    }
}

/// The token file could not be used.
public struct TokenFileError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public var message: String
    /// Whether the file to create existed already.
    var exists = false
    /// The message.
    public var description: String { message }
}

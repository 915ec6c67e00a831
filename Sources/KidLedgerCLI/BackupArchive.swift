#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerSystem

/// The backup file (`kidledger backup FILE`, docs/SYNC.md "Backups"): one file holding the
/// home's store (a compact LMDB copy) and this device's keys, readable by the user only.
///
/// Layout: magic `KLBACKUP` (8) | format u8 (1) | entries | end marker u8 (0) | SHA-256 (32)
/// of every byte before it. An entry: kind u8 (1: a file) | path length u16 | path (UTF-8,
/// relative to the home, no `..`) | size u64 | the bytes. Integers big-endian. A restore reads
/// the whole file once to check the hash before it writes anything.
enum BackupArchive {
    static let magic: [UInt8] = Array("KLBACKUP".utf8)
    static let format: UInt8 = 1
    /// The most entries a backup holds (the store, the account file, the key files).
    static let entriesMax = 1_000
    /// The longest path in one.
    static let pathBytesMax = 255

    /// Writes an archive of `files` (home-relative path, absolute source) to the open `output`.
    static func write(_ files: [(path: String, source: String)], to output: Int32) throws {
        var hasher = SHA256Hasher()
        func put(_ bytes: [UInt8]) throws {
            hasher.update(bytes)
            try FileSystem.writeAll(output, bytes)
        }
        try put(magic + [format])
        for file in files {
            let input = open(file.source, O_RDONLY | O_CLOEXEC)
            guard input >= 0 else { throw CLIError("cannot read \(file.source): \(String(cString: strerror(errno)))", code: .ioError) }
            defer { close(input) }
            var st = stat()
            guard fstat(input, &st) == 0 else { throw CLIError("cannot read \(file.source)", code: .ioError) }
            let path = Array(file.path.utf8)
            var header = ByteWriter(capacity: 16 + path.count)
            header.write(UInt8(1))
            header.write(UInt8(path.count >> 8))
            header.write(UInt8(path.count & 0xFF))
            header.write(raw: path)
            header.write(bigEndian: UInt64(st.st_size))
            try put(header.bytes)
            var left = Int(st.st_size)
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while left > 0 {
                let n = retryWhileInterrupted { buffer.withUnsafeMutableBytes { Glibc.read(input, $0.baseAddress, min($0.count, left)) } }
                guard n > 0 else { throw CLIError("cannot read \(file.source): it changed while it was copied", code: .ioError) }
                try put(Array(buffer[0..<n]))
                left -= n
            }
        }
        try put([0])
        try FileSystem.writeAll(output, hasher.finalize())
    }

    /// Why a file is not a kidledger backup (exit 65).
    static func invalid(_ path: String, _ why: String) -> CLIError {
        CLIError("\(path) is not a usable kidledger backup: \(why). Nothing was changed", code: .dataError)
    }

    /// Checks `path` end to end (the hash), then calls `body` for each entry with its
    /// home-relative path, its size and a function that copies its bytes to a descriptor.
    static func read(_ path: String, _ body: (String, Int, (Int32) throws -> Void) throws -> Void) throws {
        let input = open(path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw CLIError("cannot read \(path): \(String(cString: strerror(errno)))", code: .ioError) }
        defer { close(input) }
        var st = stat()
        guard fstat(input, &st) == 0 else { throw CLIError("cannot read \(path)", code: .ioError) }
        let total = Int(st.st_size)
        guard total >= magic.count + 2 + 32 else { throw invalid(path, "it is too short") }
        // First pass: the hash over everything before the last 32 bytes.
        var hasher = SHA256Hasher()
        var reader = FileReader(descriptor: input, path: path)
        try reader.stream(count: total - 32) { hasher.update($0) }
        let stored = try reader.bytes(32)
        guard hasher.finalize() == stored else { throw invalid(path, "its checksum does not match (the file is damaged or incomplete)") }
        // Second pass: the entries.
        guard lseek(input, 0, SEEK_SET) == 0 else { throw CLIError("cannot read \(path)", code: .ioError) }
        reader = FileReader(descriptor: input, path: path)
        let head = try reader.bytes(magic.count + 1)
        guard Array(head.prefix(magic.count)) == magic else { throw invalid(path, "it does not start as one") }
        guard head[magic.count] == format else {
            throw invalid(path, "it is of backup format \(head[magic.count]), this kidledger reads format \(format): update kidledger")
        }
        var entries = 0
        while true {
            let kind = try reader.bytes(1)[0]
            if kind == 0 { break }
            guard kind == 1 else { throw invalid(path, "an entry of unknown kind \(kind)") }
            entries += 1
            guard entries <= entriesMax else { throw invalid(path, "more than \(entriesMax) entries") }
            let lengthBytes = try reader.bytes(2)
            let length = Int(lengthBytes[0]) << 8 | Int(lengthBytes[1])
            guard (1...pathBytesMax).contains(length) else { throw invalid(path, "an entry path of \(length) bytes") }
            let name = String(decoding: try reader.bytes(length), as: UTF8.self)
            guard isSafe(name) else { throw invalid(path, "an entry path \"\(TextEscaping.terminal(name))\" outside the home") }
            var sizeReader = ByteReader(try reader.bytes(8))
            let size = try sizeReader.readBigEndianUInt64("size")
            guard size <= UInt64(total) else { throw invalid(path, "an entry larger than the file") }
            var copied = false
            try body(name, Int(size)) { output in
                try reader.stream(count: Int(size)) { try FileSystem.writeAll(output, $0) }
                copied = true
            }
            if !copied { try reader.stream(count: Int(size)) { _ in } }
        }
    }

    /// Whether a path names a file inside the home: relative, no `.` or `..` part, no NUL.
    static func isSafe(_ path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        return !path.hasPrefix("/") && !path.utf8.contains(0)
            && parts.allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
    }

    /// Reads a file sequentially in chunks.
    struct FileReader {
        let descriptor: Int32
        let path: String
        private var buffer: [UInt8] = []
        private var position = 0

        init(descriptor: Int32, path: String) {
            self.descriptor = descriptor
            self.path = path
        }

        /// Passes the next `count` bytes to `body`, in chunks.
        mutating func stream(count: Int, _ body: ([UInt8]) throws -> Void) throws {
            var left = count
            while left > 0 {
                if position == buffer.count { try fill() }
                let n = min(left, buffer.count - position)
                try body(Array(buffer[position..<position + n]))
                position += n
                left -= n
            }
        }

        /// The next `count` bytes.
        mutating func bytes(_ count: Int) throws -> [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(count)
            try stream(count: count) { out.append(contentsOf: $0) }
            return out
        }

        private mutating func fill() throws {
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            let n = retryWhileInterrupted { chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) } }
            guard n >= 0 else { throw CLIError("cannot read \(path): \(String(cString: strerror(errno)))", code: .ioError) }
            guard n > 0 else { throw BackupArchive.invalid(path, "it ends early") }
            buffer = Array(chunk[0..<n])
            position = 0
        }
    }
}

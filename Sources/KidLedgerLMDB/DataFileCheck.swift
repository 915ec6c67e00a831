#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Checks an existing `data.mdb` before LMDB maps it.
///
/// LMDB reads its data file through a memory map and trusts the file: a file shorter than its
/// meta page says (a truncated copy, a disk that lost its tail) makes the first read of a missing
/// page kill the process with `SIGBUS`. So the two meta pages are read with `pread` first: each
/// must be a meta page with LMDB's magic number and data version; the newer one (larger
/// transaction id) names the last page in use, and the file must reach past it.
///
/// Layout (LMDB 0.9, 64-bit): page header 16 bytes (`mp_flags` u16 at 10, `P_META` = 0x08), then
/// `MDB_meta`: magic u32 (0xBEEFC0DE) at 0, version u32 (1) at 4, address at 8, map size at 16,
/// two `MDB_db` of 48 bytes at 24 (the first's `md_pad` u32 is the page size), last page at 120,
/// transaction id at 128. Meta page 1 starts one page size in.
enum DataFileCheck {
    static let pageHeaderBytes = 16
    static let metaBytes = 136
    static let magic: UInt32 = 0xBEEF_C0DE
    static let dataVersion: UInt32 = 1
    static let metaFlag: UInt16 = 0x08

    /// What one meta page says.
    struct Meta: Equatable {
        var pageSize: Int
        var lastPage: UInt64
        var transaction: UInt64
    }

    /// Checks `directory/data.mdb`. A missing file is fine (LMDB creates one) unless `mustExist`;
    /// an empty one likewise.
    ///
    /// - Throws: ``LMDBError/invalid`` when a meta page is not LMDB's (overwritten, zeroed, not
    ///   an LMDB file), ``LMDBError/versionMismatch`` for another data version,
    ///   ``LMDBError/damaged(_:)`` saying what is wrong otherwise (truncated, impossible sizes).
    static func check(directory: String, mustExist: Bool) throws(LMDBError) {
        let path = directory + "/data.mdb"
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT && !mustExist { return }
            if code == ENOENT { throw .damaged("\(path) is missing") }
            throw LMDBError(code: code)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw LMDBError(code: errno) }
        let size = Int(info.st_size)
        if size == 0 {
            if mustExist { throw .damaged("\(path) is empty (truncated to 0 bytes)") }
            return
        }
        let first = try meta(fd, at: 0, size: size, path: path, which: 0)
        let second = try meta(fd, at: first.pageSize, size: size, path: path, which: 1)
        guard first.pageSize == second.pageSize else {
            throw .damaged("\(path): its two meta pages disagree on the page size")
        }
        let newest = first.transaction >= second.transaction ? first : second
        let (pages, overflow) = newest.lastPage.addingReportingOverflow(1)
        let (needed, tooLarge) = pages.multipliedReportingOverflow(by: UInt64(newest.pageSize))
        guard !overflow, !tooLarge, needed <= UInt64(Int.max) else {
            throw .damaged("\(path): its meta page names an impossible last page \(newest.lastPage)")
        }
        guard UInt64(size) >= needed else {
            throw .damaged("\(path) is truncated: it has \(size) bytes, but its last committed page ends at byte \(needed)")
        }
    }

    /// The inode number of `path`, or nil.
    static func inode(_ path: String) -> UInt64? {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    /// Reads and validates the meta page at `offset`.
    private static func meta(_ fd: Int32, at offset: Int, size: Int, path: String, which: Int) throws(LMDBError) -> Meta {
        let count = pageHeaderBytes + metaBytes
        guard size >= offset + count else {
            throw .damaged("\(path) is truncated: it has \(size) bytes, too few for meta page \(which)")
        }
        var page = [UInt8](repeating: 0, count: count)
        let n = page.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
        guard n == count else {
            if n < 0 { throw LMDBError(code: errno) }
            throw .damaged("\(path) is truncated: meta page \(which) is incomplete")
        }
        func little<T: FixedWidthInteger>(_ at: Int, _: T.Type) -> T {
            var value: T = 0
            for i in (0..<(T.bitWidth / 8)).reversed() { value = (value << 8) | T(page[at + i]) }
            return value
        }
        let flags = little(10, UInt16.self)
        let m = pageHeaderBytes
        // What LMDB itself would report for these two (MDB_INVALID, MDB_VERSION_MISMATCH).
        guard flags & metaFlag != 0, little(m, UInt32.self) == magic else { throw .invalid }
        guard little(m + 4, UInt32.self) == dataVersion else { throw .versionMismatch }
        let pageSize = Int(little(m + 24, UInt32.self))
        guard pageSize >= 512, pageSize <= 1 << 16, pageSize & (pageSize - 1) == 0 else {
            throw .damaged("\(path): meta page \(which) names an impossible page size \(pageSize)")
        }
        return Meta(pageSize: pageSize, lastPage: little(m + 120, UInt64.self), transaction: little(m + 128, UInt64.self))
    }
}

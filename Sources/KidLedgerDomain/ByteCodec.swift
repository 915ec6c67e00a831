/// Canonical binary encoding used for records, changes and store keys.
///
/// Integers in keys are fixed-width big-endian so that byte order equals numeric order;
/// integers in values are LEB128 varints (zigzag for signed) to keep records and frames small.
/// Every read is bounds-checked and throws ``DecodeError`` instead of trapping.
public struct ByteWriter: Sendable {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8]

    /// Creates an empty writer, optionally reserving capacity.
    public init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Appends one byte.
    public mutating func write(_ byte: UInt8) { bytes.append(byte) }

    /// Appends raw bytes without a length prefix.
    public mutating func write(raw: some Sequence<UInt8>) { bytes.append(contentsOf: raw) }

    /// Appends a fixed-width big-endian unsigned integer.
    public mutating func write(bigEndian value: UInt64) {
        // Byte by byte: the generic append of a raw buffer costs several times more, and this
        // runs for every id and key the hot paths build.
        bytes.append(UInt8(truncatingIfNeeded: value >> 56))
        bytes.append(UInt8(truncatingIfNeeded: value >> 48))
        bytes.append(UInt8(truncatingIfNeeded: value >> 40))
        bytes.append(UInt8(truncatingIfNeeded: value >> 32))
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    /// Appends a fixed-width big-endian unsigned 32-bit integer.
    public mutating func write(bigEndian value: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    /// Appends a fixed-width signed integer in big-endian order with the sign bit flipped, so that
    /// byte order equals numeric order (used for timestamps in keys).
    public mutating func write(orderedSigned value: Int64) {
        write(bigEndian: UInt64(bitPattern: value) ^ (1 << 63))
    }

    /// Appends an unsigned LEB128 varint.
    public mutating func write(varint value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// Appends a zigzag-encoded signed varint.
    public mutating func write(zigzag value: Int64) {
        write(varint: Self.zigzag(value))
    }

    /// The unsigned value a zigzag varint of `value` encodes.
    @inline(__always)
    static func zigzag(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }

    /// How many bytes `write(varint: value)` appends (seven bits per byte, at least one).
    @inline(__always)
    public static func varintCount(_ value: UInt64) -> Int { max(1, (64 - value.leadingZeroBitCount + 6) / 7) }

    /// How many bytes `write(zigzag: value)` appends.
    @inline(__always)
    public static func zigzagCount(_ value: Int64) -> Int { varintCount(zigzag(value)) }

    /// Appends a length-prefixed byte string.
    public mutating func write(blob: some Collection<UInt8>) {
        write(varint: UInt64(blob.count))
        bytes.append(contentsOf: blob)
    }

    /// Appends a length-prefixed UTF-8 string.
    public mutating func write(string: String) {
        // No intermediate array: the UTF-8 view's count is O(1) for native strings and the append
        // copies from its contiguous storage.
        let utf8 = string.utf8
        write(varint: UInt64(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    /// Appends a Boolean as one byte (0 or 1).
    public mutating func write(bool: Bool) { bytes.append(bool ? 1 : 0) }

    /// Appends a 16-byte record id.
    public mutating func write(id: RecordID) {
        write(bigEndian: id.high)
        write(bigEndian: id.low)
    }
}

/// Why a byte string could not be decoded.
public enum DecodeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The input ended before the value did.
    case truncated(String)
    /// A value was out of its allowed range or not canonical.
    case invalid(String)
    /// Bytes were left over after the value.
    case trailingBytes(Int)

    /// A readable sentence.
    public var description: String {
        switch self {
        case .truncated(let what): "truncated input while reading \(what)"
        case .invalid(let what): "invalid \(what)"
        case .trailingBytes(let n): "\(n) unexpected trailing bytes"
        }
    }
}

/// A bounds-checked reader over a byte buffer.
public struct ByteReader: Sendable {
    /// The bytes being read.
    public let bytes: [UInt8]
    /// The index of the next byte.
    public private(set) var offset: Int

    /// Creates a reader positioned at the start of `bytes`.
    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        offset = 0
    }

    /// Whether every byte has been consumed.
    public var isAtEnd: Bool { offset == bytes.count }

    /// How many bytes are left.
    public var remaining: Int { bytes.count - offset }

    /// Throws unless every byte has been consumed.
    public func expectEnd() throws(DecodeError) {
        if offset != bytes.count { throw .trailingBytes(bytes.count - offset) }
    }

    /// Reads one byte.
    @inline(__always)
    public mutating func readByte(_ what: String = "byte") throws(DecodeError) -> UInt8 {
        guard offset < bytes.count else { throw .truncated(what) }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Reads `count` raw bytes.
    public mutating func readRaw(count: Int, _ what: String = "bytes") throws(DecodeError) -> [UInt8] {
        guard count >= 0, count <= remaining else { throw .truncated(what) }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// Reads a fixed-width big-endian UInt64.
    @inline(__always)
    public mutating func readBigEndianUInt64(_ what: String = "integer") throws(DecodeError) -> UInt64 {
        guard remaining >= 8 else { throw .truncated(what) }
        // One unaligned load (bounds checked just above) instead of eight checked subscripts.
        let at = offset
        let v = bytes.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt64.self)) }
        offset += 8
        return v
    }

    /// Reads a fixed-width big-endian UInt32.
    public mutating func readBigEndianUInt32(_ what: String = "integer") throws(DecodeError) -> UInt32 {
        guard remaining >= 4 else { throw .truncated(what) }
        let at = offset
        let v = bytes.withUnsafeBytes { UInt32(bigEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt32.self)) }
        offset += 4
        return v
    }

    /// Reads a value written by ``ByteWriter/write(orderedSigned:)``.
    public mutating func readOrderedSigned(_ what: String = "integer") throws(DecodeError) -> Int64 {
        Int64(bitPattern: try readBigEndianUInt64(what) ^ (1 << 63))
    }

    /// Reads an unsigned LEB128 varint (at most 10 bytes, canonical).
    @inline(__always)
    public mutating func readVarint(_ what: String = "varint") throws(DecodeError) -> UInt64 {
        // Most varints (counts, lengths, small values) are one byte: read in place in the
        // decoders of this module (a call cost several times the read), the rest by the loop.
        if offset < bytes.count, bytes[offset] < 0x80 {
            defer { offset += 1 }
            return UInt64(bytes[offset])
        }
        return try readLongVarint(what)
    }

    /// ``readVarint(_:)`` past its one-byte case: straight from the buffer (a timestamp's varint
    /// is six or seven bytes; a checked `readByte` per byte cost about a hundred instructions).
    /// Every byte looked at is consumed, also when the varint is then refused, as byte by byte.
    private mutating func readLongVarint(_ what: String) throws(DecodeError) -> UInt64 {
        var result: UInt64 = 0
        var next = offset
        let problem: DecodeError? = bytes.withUnsafeBufferPointer { buffer in
            var shift: UInt64 = 0
            for index in 0..<10 {
                guard next < buffer.count else { return .truncated(what) }
                let byte = buffer[next]
                next += 1
                if index == 9 && byte > 1 { return .invalid(what) }
                result |= UInt64(byte & 0x7f) << shift
                if byte & 0x80 == 0 {
                    return byte == 0 && index > 0 ? .invalid("\(what) (non-canonical varint)") : nil
                }
                shift += 7
            }
            return .invalid(what)
        }
        offset = next
        if let problem { throw problem }
        return result
    }

    /// Reads a zigzag-encoded signed varint.
    @inline(__always)
    public mutating func readZigzag(_ what: String = "integer") throws(DecodeError) -> Int64 {
        let raw = try readVarint(what)
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    /// Reads a length-prefixed byte string of at most `maxCount` bytes.
    public mutating func readBlob(maxCount: Int, _ what: String = "bytes") throws(DecodeError) -> [UInt8] {
        let count = try readVarint(what)
        guard count <= UInt64(maxCount) else { throw .invalid("\(what) (length \(count) exceeds \(maxCount))") }
        return try readRaw(count: Int(count), what)
    }

    /// Reads a length-prefixed UTF-8 string of at most `maxBytes` bytes; invalid UTF-8 is an error.
    public mutating func readString(maxBytes: Int, _ what: String = "string") throws(DecodeError) -> String {
        let count = try readVarint(what)
        guard count <= UInt64(maxBytes) else { throw .invalid("\(what) (length \(count) exceeds \(maxBytes))") }
        let n = Int(count)
        guard n <= remaining else { throw .truncated(what) }
        let start = offset
        // Straight from the buffer, without copying the bytes out first. Decoding repairs invalid
        // UTF-8 (with U+FFFD), so the bytes round-trip exactly when they are valid (several times
        // cheaper than the generic `String(validating:as:)`); ASCII is valid as it is.
        let decoded: String? = bytes.withUnsafeBufferPointer { buffer in
            let raw = UnsafeBufferPointer(rebasing: buffer[start..<start + n])
            let s = String(decoding: raw, as: UTF8.self)
            if raw.allSatisfy({ $0 < 0x80 }) { return s }
            let same = s.utf8.withContiguousStorageIfAvailable { $0.elementsEqual(raw) } ?? s.utf8.elementsEqual(raw)
            return same ? s : nil
        }
        guard let decoded else { throw .invalid("\(what) (not UTF-8)") }
        offset += n
        return decoded
    }

    /// Reads a Boolean byte (0 or 1 only).
    @inline(__always)
    public mutating func readBool(_ what: String = "flag") throws(DecodeError) -> Bool {
        switch try readByte(what) {
        case 0: return false
        case 1: return true
        default: throw .invalid(what)
        }
    }

    /// Reads a 16-byte record id.
    @inline(__always)
    public mutating func readID(_ what: String = "id") throws(DecodeError) -> RecordID {
        let high = try readBigEndianUInt64(what)
        let low = try readBigEndianUInt64(what)
        return RecordID(high: high, low: low)
    }
}

import KidLedgerDomain
import Testing

/// The reader's fast paths (one load for fixed-width integers, one-byte varints) read exactly
/// what the byte-by-byte definitions read, and fail the same way.
@Suite struct ByteReaderFastPathTests {
    @Test func fixedWidthIntegersAtEveryOffset() throws {
        var rng = SplitMix64(seed: 11)
        for _ in 0..<200 {
            let bytes = (0..<Int.random(in: 0...24, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            for start in 0...bytes.count {
                var r = ByteReader(bytes)
                for _ in 0..<start { _ = try r.readByte() }
                var reference: UInt64 = 0
                for i in 0..<min(8, bytes.count - start) { reference = reference << 8 | UInt64(bytes[start + i]) }
                var copy = r
                if bytes.count - start >= 8 {
                    #expect(try r.readBigEndianUInt64() == reference)
                    #expect(r.offset == start + 8)
                } else {
                    #expect(throws: DecodeError.truncated("integer")) { try r.readBigEndianUInt64() }
                    #expect(r.offset == start)
                }
                if bytes.count - start >= 4 {
                    var reference32: UInt32 = 0
                    for i in 0..<4 { reference32 = reference32 << 8 | UInt32(bytes[start + i]) }
                    #expect(try copy.readBigEndianUInt32() == reference32)
                    #expect(copy.offset == start + 4)
                } else {
                    #expect(throws: DecodeError.truncated("integer")) { try copy.readBigEndianUInt32() }
                }
            }
        }
    }

    @Test func varintsRoundTripAndStayCanonical() throws {
        var values: [UInt64] = [0, 1, 0x7F, 0x80, 0xFF, 0x3FFF, 0x4000, UInt64(Int64.max), .max]
        var rng = SplitMix64(seed: 5)
        for _ in 0..<500 { values.append(rng.next() >> UInt64.random(in: 0...63, using: &rng)) }
        var w = ByteWriter()
        for v in values { w.write(varint: v) }
        var r = ByteReader(w.bytes)
        for v in values { #expect(try r.readVarint() == v) }
        #expect(r.isAtEnd)
        #expect(throws: DecodeError.truncated("varint")) { var e = ByteReader([]); _ = try e.readVarint() }
        #expect(throws: DecodeError.truncated("varint")) { var e = ByteReader([0x80]); _ = try e.readVarint() }
        #expect(throws: DecodeError.invalid("varint (non-canonical varint)")) { var e = ByteReader([0x80, 0x00]); _ = try e.readVarint() }
        var zero = ByteReader([0x00, 0x05])
        #expect(try zero.readVarint() == 0)
        #expect(try zero.readVarint() == 5)
    }

    /// The varint read byte by byte, as `readVarint` was defined: its value or error, and the
    /// offset it leaves.
    private static func referenceVarint(_ r: inout ByteReader) -> (Result<UInt64, DecodeError>, Int) {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        do throws(DecodeError) {
            for index in 0..<10 {
                let byte = try r.readByte("varint")
                if index == 9 && byte > 1 { throw DecodeError.invalid("varint") }
                result |= UInt64(byte & 0x7f) << shift
                if byte & 0x80 == 0 {
                    if byte == 0 && index > 0 { throw DecodeError.invalid("varint (non-canonical varint)") }
                    return (.success(result), r.offset)
                }
                shift += 7
            }
            throw DecodeError.invalid("varint")
        } catch {
            return (.failure(error), r.offset)
        }
    }

    /// Random bytes, mostly with continuation bits (long, truncated, overlong and non-canonical
    /// varints), read from every offset: the same value or error, and the same offset after.
    @Test func varintsReadLikeByteByByte() throws {
        var rng = SplitMix64(seed: 6)
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...14, using: &rng)).map { _ in
                switch Int.random(in: 0..<6, using: &rng) {
                case 0: UInt8(0)
                case 1: UInt8(0x80)
                case 2: UInt8.random(in: 0...1, using: &rng)
                case 3: UInt8.random(in: 0...0x7F, using: &rng)
                default: UInt8.random(in: 0x80...0xFF, using: &rng)
                }
            }
            for start in 0...bytes.count {
                var r = ByteReader(bytes), reference = ByteReader(bytes)
                for _ in 0..<start { _ = try r.readByte(); _ = try reference.readByte() }
                let (expected, expectedOffset) = Self.referenceVarint(&reference)
                let actual = Result { () throws(DecodeError) -> UInt64 in try r.readVarint() }
                #expect(actual == expected, "\(bytes) from \(start)")
                #expect(r.offset == expectedOffset)
            }
        }
    }
}

import KidLedgerDomain
import Testing

/// `readString` returns valid UTF-8 unchanged and rejects every invalid sequence (overlong
/// forms, surrogates, stray continuation bytes, truncated sequences, bytes above U+10FFFF).
@Test(arguments: [
    ([UInt8]("Ava".utf8), true), ([UInt8]("Zoë 🐣".utf8), true), ([], true), ([0x00, 0x7F], true),
    ([0xC3, 0x28], false), ([0x80], false), ([0xC0, 0x80], false), ([0xED, 0xA0, 0x80], false),
    ([0xF4, 0x90, 0x80, 0x80], false), ([0xE2, 0x82], false), ([0xFF], false), ([0x41, 0xEF, 0xBF], false),
])
func readStringValidatesUTF8(bytes: [UInt8], valid: Bool) {
    var w = ByteWriter()
    w.write(blob: bytes)
    var r = ByteReader(w.bytes)
    let s = try? r.readString(maxBytes: 64)
    #expect((s != nil) == valid)
    if let s { #expect(Array(s.utf8) == bytes) }
}

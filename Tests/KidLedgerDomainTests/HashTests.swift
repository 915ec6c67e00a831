import KidLedgerDomain
import Testing

func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

let abc448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"

@Test(arguments: [
    ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    (abc448, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
])
func sha256KnownAnswers(_ input: String, _ expected: String) {
    #expect(hexString(SHA256.hash(Array(input.utf8))) == expected)
    #expect(hexString(SHA256.hash(input.utf8)) == expected)
}

@Test(arguments: [
    ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
    ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
    (abc448, "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
])
func sha1KnownAnswers(_ input: String, _ expected: String) {
    #expect(hexString(SHA1.hash(Array(input.utf8))) == expected)
}

/// Messages around the padding's block boundaries (a second padding block from 56 bytes on),
/// bytes `(7i + 3) mod 256`, against digests from another implementation (Python's hashlib).
@Test(arguments: [
    (55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b", "ddf57317ef34bfee3b6df83d359098930eb278bc"),
    (56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27", "a0d492bb0fc889d0eca3bc137066ab6f4f74f369"),
    (57, "35df609437dcfea3279283ab79fd554e2bf78f8f7ae2de532d8ee300b09e8f73", "11a02dcf95859677a62e75024067c22b165d890f"),
    (63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055", "c55856749bef509bdfe6bfebfc7bf4e793e82132"),
    (64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241", "bede92be29c3874e1b54ddc77988d606fc857a8e"),
    (119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e", "504e27376a6e0f0dba8295b85cb25dc4dfa17d23"),
    (120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5", "82134b02fb3f702491be9bed581eeab59334acb2"),
])
func paddingBoundaryKnownAnswers(_ length: Int, _ sha256: String, _ sha1: String) {
    let message = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }
    #expect(hexString(SHA256.hash(message)) == sha256)
    #expect(hexString(SHA1.hash(message)) == sha1)
    // The same hasher again after a finalize starts from scratch.
    var hasher = SHA256Hasher()
    hasher.update([1, 2, 3])
    _ = hasher.finalizeWords()
    hasher.update(message)
    #expect(hexString(hasher.finalize()) == sha256)
}

@Test func sha256OneMillionA() {
    let expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
    #expect(hexString(SHA256.hash([UInt8](repeating: 0x61, count: 1_000_000))) == expected)
    var hasher = SHA256Hasher()
    let chunk = [UInt8](repeating: 0x61, count: 1000)
    for _ in 0..<1000 { hasher.update(chunk) }
    #expect(hexString(hasher.finalize()) == expected)
}

@Test func sha1OneMillionA() {
    #expect(hexString(SHA1.hash([UInt8](repeating: 0x61, count: 1_000_000)))
        == "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
}

/// Deterministic pseudo-random message bytes.
func messageBytes(count: Int, seed: UInt64) -> [UInt8] {
    var rng = SplitMix64(seed: seed)
    return (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
}

@Test(arguments: [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 200, 1000])
func incrementalMatchesOneShot(_ length: Int) {
    let message = messageBytes(count: length, seed: UInt64(length))
    let sha256 = SHA256.hash(message)
    let sha1 = SHA1.hash(message)
    #expect(sha256.count == 32)
    #expect(sha1.count == 20)
    for split in Set([0, 1, length / 3, length / 2, length - 1, length].filter { (0...length).contains($0) }) {
        for second in Set([split, (split + length) / 2, length]) where second >= split {
            var h256 = SHA256Hasher()
            var h1 = SHA1Hasher()
            for part in [message[..<split], message[split..<second], message[second...]] {
                h256.update(Array(part))
                Array(part).withUnsafeBytes { h1.update($0) }
            }
            #expect(h256.finalize() == sha256, "split \(split)/\(second) of \(length)")
            #expect(h1.finalize() == sha1, "split \(split)/\(second) of \(length)")
        }
    }
}

@Test func byteAtATimeAndReuseAfterFinalize() {
    let message = messageBytes(count: 300, seed: 42)
    var hasher = SHA256Hasher()
    for byte in message { hasher.update([byte]) }
    #expect(hasher.finalize() == SHA256.hash(message))
    // finalize resets the hasher.
    hasher.update(Array("abc".utf8))
    #expect(hexString(hasher.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    // Non-contiguous sequences work too.
    #expect(SHA256.hash(message.lazy.map { $0 }) == SHA256.hash(message))
    #expect(SHA1.hash(AnySequence(message)) == SHA1.hash(message))
}

// MARK: - RecordID

@Test func uuidV5KnownVector() {
    let dns = RecordID(string: "6ba7b810-9dad-11d1-80b4-00c04fd430c8")!
    #expect(RecordID.v5(namespace: dns, name: "python.org").description == "886313e1-3b8a-5372-9b90-0c9aee199e5d")
    #expect(RecordID.v5(namespace: dns, name: Array("python.org".utf8)) == RecordID.v5(namespace: dns, name: "python.org"))
}

@Test func namespaceAndZeroConstants() {
    #expect(RecordID.namespaceKidLedger == RecordID(string: "6b1d3c2e-5f2a-4c39-9a57-2f0f6c8e1d40")!)
    #expect(RecordID.zero.description == "00000000-0000-0000-0000-000000000000")
    #expect(RecordID.zero.bytes == [UInt8](repeating: 0, count: 16))
}

@Test func recordIDStringRoundTrip() {
    var rng = SplitMix64(seed: 7)
    for _ in 0..<200 {
        let id = RecordID(high: rng.next(), low: rng.next())
        #expect(RecordID(string: id.description) == id)
        #expect(RecordID(string: id.description.uppercased()) == id)
        #expect(RecordID(string: id.hex) == id)
        #expect(RecordID(bytes: id.bytes) == id)
        #expect(id.hex.count == 32 && id.description.count == 36)
        #expect(id.hex == id.description.filter { $0 != "-" })
    }
    let id = RecordID(string: "00112233-4455-6677-8899-AABBCCDDEEFF")!
    #expect(id.high == 0x0011_2233_4455_6677 && id.low == 0x8899_aabb_ccdd_eeff)
    #expect(id.bytes == [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff])
    #expect(id.description == "00112233-4455-6677-8899-aabbccddeeff")
}

@Test(arguments: [
    "", "0", "00112233-4455-6677-8899-aabbccddeef", "00112233-4455-6677-8899-aabbccddeeff0",
    "0011223-34455-6677-8899-aabbccddeeff", "00112233_4455_6677_8899_aabbccddeeff",
    "00112233-4455-6677-8899-aabbccddeefg", "{00112233-4455-6677-8899-aabbccddeeff}",
    " 00112233-4455-6677-8899-aabbccddeeff", "urn:uuid:00112233-4455-6677-8899-aabbccddeeff",
    "00112233445566778899aabbccddeef", "00112233445566778899aabbccddeeffa", "0011223344556677-8899aabbccddeeff",
    "+0112233445566778899aabbccddeeff", "00112233-4455-6677-8899-aabbccddeeﬀ",
])
func recordIDRejectsBadStrings(_ text: String) {
    #expect(RecordID(string: text) == nil)
}

@Test func randomIDsHaveVersion4AndVariant() {
    var rng = SplitMix64(seed: 99)
    var seen = Set<RecordID>()
    for _ in 0..<1000 {
        let id = RecordID.random(using: &rng)
        let bytes = id.bytes
        #expect(bytes[6] >> 4 == 4)
        #expect(bytes[8] >> 6 == 0b10)
        #expect(id.description.dropFirst(14).first == "4")
        seen.insert(id)
    }
    #expect(seen.count == 1000)
    var a = SplitMix64(seed: 5), b = SplitMix64(seed: 5)
    #expect(RecordID.random(using: &a) == RecordID.random(using: &b))
}

@Test func recordIDOrderingIsByteOrder() {
    var rng = SplitMix64(seed: 11)
    let ids = (0..<300).map { i in
        // Force many equal high halves so the low half decides.
        RecordID(high: i % 3 == 0 ? 0x8000_0000_0000_0000 : rng.next(), low: rng.next())
    }
    let sorted = ids.sorted()
    #expect(sorted.map(\.bytes) == ids.map(\.bytes).sorted { $0.lexicographicallyPrecedes($1) })
    #expect(RecordID.zero < RecordID(high: 0, low: 1))
    #expect(RecordID(high: 0, low: .max) < RecordID(high: 1, low: 0))
}

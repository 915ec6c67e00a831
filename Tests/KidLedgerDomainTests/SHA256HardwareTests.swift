import Foundation
@testable import KidLedgerDomain
import Testing

/// The digest of `message` with the Swift compression function only, fed in pieces of `piece`
/// bytes (so that one call compresses several blocks when `piece` is large).
func portableSHA256(_ message: [UInt8], piece: Int) -> [UInt8] {
    var engine = BlockHashEngine(PortableSHA256Compressor())
    var start = 0
    while start < message.count {
        let end = min(message.count, start + piece)
        message[start..<end].withUnsafeBytes { engine.update($0) }
        start = end
    }
    return engine.finalize()
}

/// Hands `message` to `update` in pieces of 1, 63, 64, 65, 200 and 1,000 bytes, then the rest.
func inPieces(_ message: [UInt8], _ update: ([UInt8]) -> Void) {
    var start = 0
    for piece in [1, 63, 64, 65, 200, 1000] where start < message.count {
        let end = min(message.count, start + piece)
        update(Array(message[start..<end]))
        start = end
    }
    update(Array(message[start...]))
}

/// The hardware path, where the processor has it, gives the Swift path's digest on every length
/// from 0 to 4 blocks and beyond, whole and in pieces (one C call over several blocks, and a
/// block at a time); the Swift path itself is held to the known answers in HashTests.
@Test func hardwareCompressionMatchesPortable() {
    for length in Array(0...260) + [1000, 4096, 65_537] {
        let message = messageBytes(count: length, seed: UInt64(length) &* 0x9E37_79B9)
        let reference = portableSHA256(message, piece: 1)
        #expect(portableSHA256(message, piece: 64 * 3 + 5) == reference, "length \(length)")
        #expect(SHA256.hash(message) == reference, "length \(length)")
        var hasher = SHA256Hasher()
        inPieces(message) { hasher.update($0) }
        #expect(hasher.finalize() == reference, "length \(length)")
    }
}

/// On a processor with the SHA extensions the hardware path is the one taken (else the test above
/// would only compare the Swift path with itself).
@Test func hardwarePathTakenWhereAvailable() throws {
    #if arch(x86_64)
    let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
    let hasSHA = flags.split(separator: "\n").contains { $0.hasPrefix("flags") && $0.split(separator: " ").contains("sha_ni") }
    #expect(SHA256.hardwareAccelerated == hasSHA)
    #else
    #expect(!SHA256.hardwareAccelerated)
    #endif
}

/// SHA-1 on the hardware path, where the processor has it, gives the Swift path's digest on every
/// length from 0 to 4 blocks and beyond, whole and in pieces; the Swift path itself is held to
/// the known answers in HashTests.
@Test func sha1HardwareCompressionMatchesPortable() {
    for length in Array(0...260) + [1000, 4096, 65_537] {
        let message = messageBytes(count: length, seed: UInt64(length) &* 0x85EB_CA6B)
        var portable = BlockHashEngine(PortableSHA1Compressor())
        message.withUnsafeBytes { portable.update($0) }
        let reference = portable.finalize()
        #expect(SHA1.hash(message) == reference, "length \(length)")
        var hasher = SHA1Hasher()
        inPieces(message) { hasher.update($0) }
        #expect(hasher.finalize() == reference, "length \(length)")
    }
}

/// SHA-1 (FIPS 180-4) in pure Swift; used only for name-based (version-5) record ids, not for security.
public enum SHA1 {
    /// Returns the 20-byte SHA-1 digest of `bytes`.
    public static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var hasher = SHA1Hasher()
        hasher.update(sequence: bytes)
        return hasher.finalize()
    }
}

/// Incremental SHA-1: feed bytes with `update`, then call `finalize` for the 20-byte digest.
public struct SHA1Hasher: Sendable {
    private var engine = BlockHashEngine(SHA1Compressor())

    /// Creates a hasher in the initial SHA-1 state.
    public init() {}

    /// Feeds raw bytes into the hash.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        engine.update(bytes)
    }

    /// Feeds an array of bytes into the hash.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { engine.update($0) }
    }

    /// Returns the 20-byte digest of everything fed so far and resets the hasher to its initial state.
    public mutating func finalize() -> [UInt8] {
        engine.finalize()
    }

    mutating func update(sequence bytes: some Sequence<UInt8>) {
        engine.update(sequence: bytes)
    }
}

struct SHA1Compressor: BlockCompressor {
    private var h0: UInt32 = 0x6745_2301, h1: UInt32 = 0xefcd_ab89, h2: UInt32 = 0x98ba_dcfe
    private var h3: UInt32 = 0x1032_5476, h4: UInt32 = 0xc3d2_e1f0

    init() {}

    var digest: [UInt8] { bigEndianBytes([h0, h1, h2, h3, h4]) }

    mutating func compress(blocks: UnsafeRawBufferPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 80) { w in
            var offset = 0
            while offset < blocks.count {
                for t in 0..<16 {
                    w[t] = UInt32(bigEndian: blocks.loadUnaligned(fromByteOffset: offset + 4 * t, as: UInt32.self))
                }
                for t in 16..<80 {
                    w[t] = rotateLeft(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1)
                }
                var (a, b, c, d, e) = (h0, h1, h2, h3, h4)
                // Four 20-round stages, each with its own boolean function and constant.
                for t in 0..<20 {
                    let temp = rotateLeft(a, 5) &+ ((b & c) | (~b & d)) &+ e &+ 0x5a82_7999 &+ w[t]
                    (e, d, c, b, a) = (d, c, rotateLeft(b, 30), a, temp)
                }
                for t in 20..<40 {
                    let temp = rotateLeft(a, 5) &+ (b ^ c ^ d) &+ e &+ 0x6ed9_eba1 &+ w[t]
                    (e, d, c, b, a) = (d, c, rotateLeft(b, 30), a, temp)
                }
                for t in 40..<60 {
                    let temp = rotateLeft(a, 5) &+ ((b & c) | (b & d) | (c & d)) &+ e &+ 0x8f1b_bcdc &+ w[t]
                    (e, d, c, b, a) = (d, c, rotateLeft(b, 30), a, temp)
                }
                for t in 60..<80 {
                    let temp = rotateLeft(a, 5) &+ (b ^ c ^ d) &+ e &+ 0xca62_c1d6 &+ w[t]
                    (e, d, c, b, a) = (d, c, rotateLeft(b, 30), a, temp)
                }
                h0 &+= a; h1 &+= b; h2 &+= c; h3 &+= d; h4 &+= e
                offset += 64
            }
        }
    }
}

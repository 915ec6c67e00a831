/// SHA-1 (FIPS 180-4) in Swift, used only for name-based (version-5) record ids (an undo entry's
/// id, a member's, a household's): not for security. Without allocations: received undo entries
/// check their ids, so a sync of many hashes a few per change.
public enum SHA1 {
    /// Returns the 20-byte SHA-1 digest of `bytes`.
    public static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var hasher = SHA1Hasher()
        hasher.update(Array(bytes))
        return hasher.finalize()
    }
}

/// Incremental SHA-1: feed bytes with `update`, then call `finalize` for the 20-byte digest.
public struct SHA1Hasher: Sendable {
    private var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476, 0xc3d2_e1f0)
    /// The current block's first `used` bytes.
    private var block: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    private var used = 0
    private var length: UInt64 = 0

    /// Creates a hasher in the initial SHA-1 state.
    public init() {}

    /// Feeds raw bytes into the hash.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        length &+= UInt64(bytes.count)
        var offset = 0
        while offset < bytes.count {
            let take = min(64 - used, bytes.count - offset), at = used
            withUnsafeMutableBytes(of: &block) { $0.baseAddress!.advanced(by: at).copyMemory(from: base + offset, byteCount: take) }
            used += take
            offset += take
            if used == 64 { compressBlock() }
        }
    }

    /// Feeds an array of bytes into the hash.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Returns the 20-byte digest of everything fed so far and resets the hasher to its initial state.
    public mutating func finalize() -> [UInt8] {
        let bitLength = length &* 8, at = used
        // 0x80, zeros up to 56 bytes mod 64 (a second block when fewer than nine are left), the bit length.
        withUnsafeMutableBytes(of: &block) { b in
            b[at] = 0x80
            for i in (at + 1)..<64 { b[i] = 0 }
        }
        if at >= 56 {
            compressBlock()
            block = (0, 0, 0, 0, 0, 0, 0, 0)
        }
        block.7 = bitLength.bigEndian
        compressBlock()
        let words = (h.0.bigEndian, h.1.bigEndian, h.2.bigEndian, h.3.bigEndian, h.4.bigEndian)
        self = SHA1Hasher()
        return withUnsafeBytes(of: words) { Array($0) }
    }

    /// Compresses the (full) current block into the state and empties it: four stages of twenty
    /// rounds, each with its own function and constant, over a rolling 16-word schedule.
    private mutating func compressBlock() {
        let bytes = block
        h = withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 16) { w in
            withUnsafeBytes(of: bytes) { p in
                for t in 0..<16 { w[t] = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 4 * t, as: UInt32.self)) }
            }
            var (a, b, c, d, e) = h
            for t in 0..<80 {
                if t >= 16 { w[t & 15] = rotateLeft(w[(t - 3) & 15] ^ w[(t - 8) & 15] ^ w[(t - 14) & 15] ^ w[t & 15], 1) }
                let f: UInt32
                if t < 20 {
                    f = ((b & c) | (~b & d)) &+ 0x5a82_7999
                } else if t < 40 {
                    f = (b ^ c ^ d) &+ 0x6ed9_eba1
                } else if t < 60 {
                    f = ((b & c) | (b & d) | (c & d)) &+ 0x8f1b_bcdc
                } else {
                    f = (b ^ c ^ d) &+ 0xca62_c1d6
                }
                let temp = rotateLeft(a, 5) &+ f &+ e &+ w[t & 15]
                (e, d, c, b, a) = (d, c, rotateLeft(b, 30), a, temp)
            }
            return (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e)
        }
        used = 0
    }
}

@inline(__always)
private func rotateLeft(_ x: UInt32, _ n: UInt32) -> UInt32 { (x &<< n) | (x &>> (32 - n)) }

/// SHA-256 (FIPS 180-4) in pure Swift.
public enum SHA256 {
    /// Returns the 32-byte SHA-256 digest of `bytes`.
    public static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(sequence: bytes)
        return hasher.finalize()
    }
}

/// A SHA-256 digest held inline: its 32 bytes as four big-endian 64-bit words (`w0` holds bytes 0–7).
public struct SHA256Words: Equatable, Sendable {
    /// Bytes 0–7, 8–15, 16–23 and 24–31 of the digest, each read big-endian.
    public var w0, w1, w2, w3: UInt64

    /// The first `count` bytes (at most 32).
    public func prefix(_ count: Int) -> [UInt8] {
        var words = (w0.bigEndian, w1.bigEndian, w2.bigEndian, w3.bigEndian)
        return withUnsafeBytes(of: &words) { Array($0.prefix(count)) }
    }
}

/// Incremental SHA-256: feed bytes with `update`, then call `finalize` for the 32-byte digest.
public struct SHA256Hasher: Sendable {
    private var engine = BlockHashEngine(SHA256Compressor())

    /// Creates a hasher in the initial SHA-256 state.
    public init() {}

    /// Feeds raw bytes into the hash.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        engine.update(bytes)
    }

    /// Feeds an array of bytes into the hash.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { engine.update($0) }
    }

    /// Returns the 32-byte digest of everything fed so far and resets the hasher to its initial state.
    public mutating func finalize() -> [UInt8] {
        engine.finalize()
    }

    /// The digest of everything fed so far as four words, without allocating (the hot paths hash
    /// several times per change); resets the hasher to its initial state.
    public mutating func finalizeWords() -> SHA256Words {
        engine.finalize { c in c.words }
    }

    mutating func update(sequence bytes: some Sequence<UInt8>) {
        engine.update(sequence: bytes)
    }
}

// MARK: - Shared Merkle–Damgård machinery (used by SHA-256 and SHA-1)

/// A compression function over 64-byte blocks with a big-endian 32-bit-word state.
protocol BlockCompressor: Sendable {
    /// Compresses `blocks`, whose count is a multiple of 64, into the state.
    mutating func compress(blocks: UnsafeRawBufferPointer)
    /// The state words serialized big-endian (the digest after padding).
    var digest: [UInt8] { get }
    /// A compressor in its initial state.
    init()
}

/// Buffers partial blocks, counts the message length, and applies the standard 64-byte-block padding.
struct BlockHashEngine<Compressor: BlockCompressor>: Sendable {
    private var compressor: Compressor
    private var buffer: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    private var buffered = 0
    private var length: UInt64 = 0

    init(_ compressor: Compressor) { self.compressor = compressor }

    mutating func update(_ input: UnsafeRawBufferPointer) {
        guard var base = input.baseAddress, input.count > 0 else { return }
        var remaining = input.count
        length &+= UInt64(truncatingIfNeeded: remaining)
        if buffered > 0 {
            let take = min(64 - buffered, remaining)
            let offset = buffered
            withUnsafeMutableBytes(of: &buffer) { buf in
                buf.baseAddress!.advanced(by: offset).copyMemory(from: base, byteCount: take)
            }
            buffered += take
            base += take
            remaining -= take
            if buffered < 64 { return }
            withUnsafeBytes(of: buffer) { compressor.compress(blocks: $0) }
            buffered = 0
        }
        let whole = remaining & ~63
        if whole > 0 {
            compressor.compress(blocks: UnsafeRawBufferPointer(start: base, count: whole))
            base += whole
            remaining -= whole
        }
        if remaining > 0 {
            withUnsafeMutableBytes(of: &buffer) { buf in
                buf.baseAddress!.copyMemory(from: base, byteCount: remaining)
            }
            buffered = remaining
        }
    }

    mutating func update(sequence bytes: some Sequence<UInt8>) {
        let done: Void? = bytes.withContiguousStorageIfAvailable { update(UnsafeRawBufferPointer($0)) }
        if done == nil {
            Array(bytes).withUnsafeBytes { update($0) }
        }
    }

    mutating func finalize() -> [UInt8] {
        finalize { $0.digest }
    }

    /// Pads, compresses the last block(s), hands the final compressor to `body`, and resets.
    mutating func finalize<R>(_ body: (Compressor) throws -> R) rethrows -> R {
        let bitLength = length &* 8
        // 0x80, then zeros up to 56 mod 64, then the 64-bit big-endian bit length.
        let padCount = (buffered < 56 ? 56 : 120) - buffered
        var tail: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                   UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &tail) { t in
            t[0] = 0x80
            for i in 0..<8 {
                t[padCount + i] = UInt8(truncatingIfNeeded: bitLength >> (56 - 8 * UInt64(i)))
            }
            update(UnsafeRawBufferPointer(rebasing: t[0..<(padCount + 8)]))
        }
        defer { self = BlockHashEngine(Compressor()) }
        return try body(compressor)
    }
}

/// Serializes 32-bit words big-endian.
func bigEndianBytes(_ words: [UInt32]) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(words.count * 4)
    for word in words {
        out.append(UInt8(truncatingIfNeeded: word >> 24))
        out.append(UInt8(truncatingIfNeeded: word >> 16))
        out.append(UInt8(truncatingIfNeeded: word >> 8))
        out.append(UInt8(truncatingIfNeeded: word))
    }
    return out
}

@inline(__always) func rotateRight(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
@inline(__always) func rotateLeft(_ x: UInt32, _ n: UInt32) -> UInt32 { (x << n) | (x >> (32 - n)) }

// MARK: - SHA-256 compression

struct SHA256Compressor: BlockCompressor {
    private var h0: UInt32 = 0x6a09_e667, h1: UInt32 = 0xbb67_ae85, h2: UInt32 = 0x3c6e_f372, h3: UInt32 = 0xa54f_f53a
    private var h4: UInt32 = 0x510e_527f, h5: UInt32 = 0x9b05_688c, h6: UInt32 = 0x1f83_d9ab, h7: UInt32 = 0x5be0_cd19

    init() {}

    var digest: [UInt8] { words.prefix(32) }

    /// The state as the digest's four big-endian words.
    var words: SHA256Words {
        SHA256Words(w0: UInt64(h0) << 32 | UInt64(h1), w1: UInt64(h2) << 32 | UInt64(h3),
                    w2: UInt64(h4) << 32 | UInt64(h5), w3: UInt64(h6) << 32 | UInt64(h7))
    }

    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    /// One round: `d` and `h` take their new values; the caller rotates the roles of the eight
    /// working variables instead of moving them (the usual unrolled form).
    @inline(__always)
    private static func round(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: inout UInt32,
                              _ e: UInt32, _ f: UInt32, _ g: UInt32, _ h: inout UInt32, _ kw: UInt32) {
        let t1 = h &+ (rotateRight(e, 6) ^ rotateRight(e, 11) ^ rotateRight(e, 25)) &+ ((e & f) ^ (~e & g)) &+ kw
        let t2 = (rotateRight(a, 2) ^ rotateRight(a, 13) ^ rotateRight(a, 22)) &+ ((a & b) ^ (a & c) ^ (b & c))
        d = d &+ t1
        h = t1 &+ t2
    }

    mutating func compress(blocks: UnsafeRawBufferPointer) {
        Self.k.withUnsafeBufferPointer { k in
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                var offset = 0
                while offset < blocks.count {
                    for t in 0..<16 {
                        w[t] = UInt32(bigEndian: blocks.loadUnaligned(fromByteOffset: offset + 4 * t, as: UInt32.self))
                    }
                    for t in 16..<64 {
                        let x = w[t - 15], y = w[t - 2]
                        let s0 = rotateRight(x, 7) ^ rotateRight(x, 18) ^ (x >> 3)
                        let s1 = rotateRight(y, 17) ^ rotateRight(y, 19) ^ (y >> 10)
                        w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                    }
                    var (a, b, c, d, e, f, g, h) = (h0, h1, h2, h3, h4, h5, h6, h7)
                    var t = 0
                    while t < 64 {
                        Self.round(a, b, c, &d, e, f, g, &h, k[t] &+ w[t])
                        Self.round(h, a, b, &c, d, e, f, &g, k[t + 1] &+ w[t + 1])
                        Self.round(g, h, a, &b, c, d, e, &f, k[t + 2] &+ w[t + 2])
                        Self.round(f, g, h, &a, b, c, d, &e, k[t + 3] &+ w[t + 3])
                        Self.round(e, f, g, &h, a, b, c, &d, k[t + 4] &+ w[t + 4])
                        Self.round(d, e, f, &g, h, a, b, &c, k[t + 5] &+ w[t + 5])
                        Self.round(c, d, e, &f, g, h, a, &b, k[t + 6] &+ w[t + 6])
                        Self.round(b, c, d, &e, f, g, h, &a, k[t + 7] &+ w[t + 7])
                        t += 8
                    }
                    h0 &+= a; h1 &+= b; h2 &+= c; h3 &+= d
                    h4 &+= e; h5 &+= f; h6 &+= g; h7 &+= h
                    offset += 64
                }
            }
        }
    }
}

#if canImport(CSHA256)
import CSHA256
#endif

/// SHA-256 (FIPS 180-4): the padding and the state in Swift; the compression function with the
/// processor's SHA instructions when it has them (x86-64; ``SHA256/hardwareAccelerated``), else in
/// Swift. Both give the same digests (the tests compare them on every length up to several blocks).
public enum SHA256 {
    /// Whether the compression function runs on the processor's SHA instructions.
    public static var hardwareAccelerated: Bool { SHA256Compressor.hardware }

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
    /// The padding is written into the partial block's buffer in place (0x80, zeros up to 56 mod
    /// 64, then the 64-bit big-endian bit length; a second block when fewer than nine bytes are
    /// left), not fed through ``update(_:)`` from a separate tail: every hash of the hot paths is
    /// short, so this is a fair part of its cost.
    mutating func finalize<R>(_ body: (Compressor) throws -> R) rethrows -> R {
        let bitLength = length &* 8
        let used = buffered
        withUnsafeMutableBytes(of: &buffer) { block in
            let base = block.baseAddress!
            base.storeBytes(of: 0x80, toByteOffset: used, as: UInt8.self)
            (base + used + 1).initializeMemory(as: UInt8.self, repeating: 0, count: 63 - used)
        }
        if used >= 56 {
            withUnsafeBytes(of: buffer) { compressor.compress(blocks: $0) }
            buffer = (0, 0, 0, 0, 0, 0, 0, 0)
        }
        buffer.7 = bitLength.bigEndian
        withUnsafeBytes(of: buffer) { compressor.compress(blocks: $0) }
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

/// The eight state words H0…H7, in order and contiguous (a homogeneous tuple), as the C function
/// takes them.
typealias SHA256State = (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)

/// SHA-256's compression: the processor's SHA instructions when it has them, else
/// ``PortableSHA256Compressor``'s Swift.
struct SHA256Compressor: BlockCompressor {
    private var h: SHA256State = PortableSHA256Compressor.initial

    init() {}

    /// Whether the processor has the SHA instructions (decided once, when the program loads).
    static var hardware: Bool {
        #if canImport(CSHA256)
        kl_sha256_hw_available() != 0
        #else
        false
        #endif
    }

    var digest: [UInt8] { words.prefix(32) }

    /// The state as the digest's four big-endian words.
    var words: SHA256Words { PortableSHA256Compressor.words(h) }

    mutating func compress(blocks: UnsafeRawBufferPointer) {
        #if canImport(CSHA256)
        if compressOnSHAInstructions(&h, blocks, kl_sha256_hw_compress) { return }
        #endif
        PortableSHA256Compressor.compress(&h, blocks: blocks)
    }
}

#if canImport(CSHA256)
/// Runs one of CSHA256's compression functions over the state words `state` (a homogeneous tuple
/// of `UInt32`s) and the whole blocks of `blocks`, when the processor has the SHA instructions
/// (``SHA256Compressor/hardware``); false, with nothing done, when it has not.
@inline(__always)
func compressOnSHAInstructions<State>(_ state: inout State, _ blocks: UnsafeRawBufferPointer,
                                      _ compress: (UnsafeMutablePointer<UInt32>?, UnsafePointer<UInt8>?, Int) -> Void) -> Bool {
    guard SHA256Compressor.hardware, let start = blocks.baseAddress else { return false }
    withUnsafeMutableBytes(of: &state) { words in
        compress(words.baseAddress!.assumingMemoryBound(to: UInt32.self), start.assumingMemoryBound(to: UInt8.self), blocks.count / 64)
    }
    return true
}
#endif

/// SHA-256's compression in Swift: the fallback on processors without the SHA instructions, and
/// the reference the tests hold the hardware path to.
struct PortableSHA256Compressor: BlockCompressor {
    /// The initial state (computed: a literal, with no lazy global to check on every hash).
    static var initial: SHA256State {
        (0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19)
    }
    private var h: SHA256State = Self.initial

    init() {}

    var digest: [UInt8] { Self.words(h).prefix(32) }

    mutating func compress(blocks: UnsafeRawBufferPointer) { Self.compress(&h, blocks: blocks) }

    static func words(_ h: SHA256State) -> SHA256Words {
        SHA256Words(w0: UInt64(h.0) << 32 | UInt64(h.1), w1: UInt64(h.2) << 32 | UInt64(h.3),
                    w2: UInt64(h.4) << 32 | UInt64(h.5), w3: UInt64(h.6) << 32 | UInt64(h.7))
    }

    /// One round: `d` and `h` take their new values; the caller rotates the roles of the eight
    /// working variables instead of moving them (the usual unrolled form). The two Σ are taken as
    /// nested rotations (Σ1(e) = ROTR6(e ⊕ ROTR5(e ⊕ ROTR14(e))), Σ0 alike: one copy of the word
    /// instead of three), and Maj(a, b, c) as `b ⊕ ((a ⊕ b) ∧ (b ⊕ c))`, where `b ⊕ c` is the
    /// previous round's `a ⊕ b` (carried in `bc`).
    @inline(__always)
    private static func round(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: inout UInt32,
                              _ e: UInt32, _ f: UInt32, _ g: UInt32, _ h: inout UInt32, _ kw: UInt32,
                              _ bc: inout UInt32) {
        let sigma1 = rotateRight(rotateRight(rotateRight(e, 14) ^ e, 5) ^ e, 6)
        let t1 = h &+ sigma1 &+ (((f ^ g) & e) ^ g) &+ kw
        let ab = a ^ b
        let sigma0 = rotateRight(rotateRight(rotateRight(a, 9) ^ a, 11) ^ a, 2)
        let t2 = sigma0 &+ ((ab & bc) ^ b)
        bc = ab
        d = d &+ t1
        h = t1 &+ t2
    }

    /// The message schedule: W[t] from W[t-16] (`w`), W[t-15], W[t-7] and W[t-2] (σ0 and σ1 as
    /// nested rotations, like the Σ of ``round``).
    @inline(__always)
    private static func schedule(_ w: UInt32, _ w15: UInt32, _ w7: UInt32, _ w2: UInt32) -> UInt32 {
        let s0 = rotateRight(rotateRight(w15, 11) ^ w15, 7) ^ (w15 >> 3)
        let s1 = rotateRight(rotateRight(w2, 2) ^ w2, 17) ^ (w2 >> 10)
        return w &+ s0 &+ w7 &+ s1
    }

    // long-function: the 64 rounds unrolled into registers and immediates, for speed; splitting them undoes that.
    /// Fully unrolled (generated): the sixteen schedule words and the round constants stay in
    /// registers and immediates instead of a 64-word array and a table (about a third fewer
    /// instructions per block).
    static func compress(_ state: inout SHA256State, blocks: UnsafeRawBufferPointer) {
        guard let start = blocks.baseAddress else { return }
        var (h0, h1, h2, h3, h4, h5, h6, h7) = state
        defer { state = (h0, h1, h2, h3, h4, h5, h6, h7) }
        var offset = 0
        while offset < blocks.count {
            let p = start + offset
            var w0 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
            var w1 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
            var w2 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
            var w3 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
            var w4 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
            var w5 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 20, as: UInt32.self))
            var w6 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 24, as: UInt32.self))
            var w7 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 28, as: UInt32.self))
            var w8 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 32, as: UInt32.self))
            var w9 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 36, as: UInt32.self))
            var w10 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 40, as: UInt32.self))
            var w11 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 44, as: UInt32.self))
            var w12 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 48, as: UInt32.self))
            var w13 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 52, as: UInt32.self))
            var w14 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 56, as: UInt32.self))
            var w15 = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 60, as: UInt32.self))
            var (a, b, c, d, e, f, g, h) = (h0, h1, h2, h3, h4, h5, h6, h7)
            var bc = b ^ c
            Self.round(a, b, c, &d, e, f, g, &h, 0x428a2f98 &+ w0, &bc)
            Self.round(h, a, b, &c, d, e, f, &g, 0x71374491 &+ w1, &bc)
            Self.round(g, h, a, &b, c, d, e, &f, 0xb5c0fbcf &+ w2, &bc)
            Self.round(f, g, h, &a, b, c, d, &e, 0xe9b5dba5 &+ w3, &bc)
            Self.round(e, f, g, &h, a, b, c, &d, 0x3956c25b &+ w4, &bc)
            Self.round(d, e, f, &g, h, a, b, &c, 0x59f111f1 &+ w5, &bc)
            Self.round(c, d, e, &f, g, h, a, &b, 0x923f82a4 &+ w6, &bc)
            Self.round(b, c, d, &e, f, g, h, &a, 0xab1c5ed5 &+ w7, &bc)
            Self.round(a, b, c, &d, e, f, g, &h, 0xd807aa98 &+ w8, &bc)
            Self.round(h, a, b, &c, d, e, f, &g, 0x12835b01 &+ w9, &bc)
            Self.round(g, h, a, &b, c, d, e, &f, 0x243185be &+ w10, &bc)
            Self.round(f, g, h, &a, b, c, d, &e, 0x550c7dc3 &+ w11, &bc)
            Self.round(e, f, g, &h, a, b, c, &d, 0x72be5d74 &+ w12, &bc)
            Self.round(d, e, f, &g, h, a, b, &c, 0x80deb1fe &+ w13, &bc)
            Self.round(c, d, e, &f, g, h, a, &b, 0x9bdc06a7 &+ w14, &bc)
            Self.round(b, c, d, &e, f, g, h, &a, 0xc19bf174 &+ w15, &bc)
            w0 = Self.schedule(w0, w1, w9, w14)
            Self.round(a, b, c, &d, e, f, g, &h, 0xe49b69c1 &+ w0, &bc)
            w1 = Self.schedule(w1, w2, w10, w15)
            Self.round(h, a, b, &c, d, e, f, &g, 0xefbe4786 &+ w1, &bc)
            w2 = Self.schedule(w2, w3, w11, w0)
            Self.round(g, h, a, &b, c, d, e, &f, 0x0fc19dc6 &+ w2, &bc)
            w3 = Self.schedule(w3, w4, w12, w1)
            Self.round(f, g, h, &a, b, c, d, &e, 0x240ca1cc &+ w3, &bc)
            w4 = Self.schedule(w4, w5, w13, w2)
            Self.round(e, f, g, &h, a, b, c, &d, 0x2de92c6f &+ w4, &bc)
            w5 = Self.schedule(w5, w6, w14, w3)
            Self.round(d, e, f, &g, h, a, b, &c, 0x4a7484aa &+ w5, &bc)
            w6 = Self.schedule(w6, w7, w15, w4)
            Self.round(c, d, e, &f, g, h, a, &b, 0x5cb0a9dc &+ w6, &bc)
            w7 = Self.schedule(w7, w8, w0, w5)
            Self.round(b, c, d, &e, f, g, h, &a, 0x76f988da &+ w7, &bc)
            w8 = Self.schedule(w8, w9, w1, w6)
            Self.round(a, b, c, &d, e, f, g, &h, 0x983e5152 &+ w8, &bc)
            w9 = Self.schedule(w9, w10, w2, w7)
            Self.round(h, a, b, &c, d, e, f, &g, 0xa831c66d &+ w9, &bc)
            w10 = Self.schedule(w10, w11, w3, w8)
            Self.round(g, h, a, &b, c, d, e, &f, 0xb00327c8 &+ w10, &bc)
            w11 = Self.schedule(w11, w12, w4, w9)
            Self.round(f, g, h, &a, b, c, d, &e, 0xbf597fc7 &+ w11, &bc)
            w12 = Self.schedule(w12, w13, w5, w10)
            Self.round(e, f, g, &h, a, b, c, &d, 0xc6e00bf3 &+ w12, &bc)
            w13 = Self.schedule(w13, w14, w6, w11)
            Self.round(d, e, f, &g, h, a, b, &c, 0xd5a79147 &+ w13, &bc)
            w14 = Self.schedule(w14, w15, w7, w12)
            Self.round(c, d, e, &f, g, h, a, &b, 0x06ca6351 &+ w14, &bc)
            w15 = Self.schedule(w15, w0, w8, w13)
            Self.round(b, c, d, &e, f, g, h, &a, 0x14292967 &+ w15, &bc)
            w0 = Self.schedule(w0, w1, w9, w14)
            Self.round(a, b, c, &d, e, f, g, &h, 0x27b70a85 &+ w0, &bc)
            w1 = Self.schedule(w1, w2, w10, w15)
            Self.round(h, a, b, &c, d, e, f, &g, 0x2e1b2138 &+ w1, &bc)
            w2 = Self.schedule(w2, w3, w11, w0)
            Self.round(g, h, a, &b, c, d, e, &f, 0x4d2c6dfc &+ w2, &bc)
            w3 = Self.schedule(w3, w4, w12, w1)
            Self.round(f, g, h, &a, b, c, d, &e, 0x53380d13 &+ w3, &bc)
            w4 = Self.schedule(w4, w5, w13, w2)
            Self.round(e, f, g, &h, a, b, c, &d, 0x650a7354 &+ w4, &bc)
            w5 = Self.schedule(w5, w6, w14, w3)
            Self.round(d, e, f, &g, h, a, b, &c, 0x766a0abb &+ w5, &bc)
            w6 = Self.schedule(w6, w7, w15, w4)
            Self.round(c, d, e, &f, g, h, a, &b, 0x81c2c92e &+ w6, &bc)
            w7 = Self.schedule(w7, w8, w0, w5)
            Self.round(b, c, d, &e, f, g, h, &a, 0x92722c85 &+ w7, &bc)
            w8 = Self.schedule(w8, w9, w1, w6)
            Self.round(a, b, c, &d, e, f, g, &h, 0xa2bfe8a1 &+ w8, &bc)
            w9 = Self.schedule(w9, w10, w2, w7)
            Self.round(h, a, b, &c, d, e, f, &g, 0xa81a664b &+ w9, &bc)
            w10 = Self.schedule(w10, w11, w3, w8)
            Self.round(g, h, a, &b, c, d, e, &f, 0xc24b8b70 &+ w10, &bc)
            w11 = Self.schedule(w11, w12, w4, w9)
            Self.round(f, g, h, &a, b, c, d, &e, 0xc76c51a3 &+ w11, &bc)
            w12 = Self.schedule(w12, w13, w5, w10)
            Self.round(e, f, g, &h, a, b, c, &d, 0xd192e819 &+ w12, &bc)
            w13 = Self.schedule(w13, w14, w6, w11)
            Self.round(d, e, f, &g, h, a, b, &c, 0xd6990624 &+ w13, &bc)
            w14 = Self.schedule(w14, w15, w7, w12)
            Self.round(c, d, e, &f, g, h, a, &b, 0xf40e3585 &+ w14, &bc)
            w15 = Self.schedule(w15, w0, w8, w13)
            Self.round(b, c, d, &e, f, g, h, &a, 0x106aa070 &+ w15, &bc)
            w0 = Self.schedule(w0, w1, w9, w14)
            Self.round(a, b, c, &d, e, f, g, &h, 0x19a4c116 &+ w0, &bc)
            w1 = Self.schedule(w1, w2, w10, w15)
            Self.round(h, a, b, &c, d, e, f, &g, 0x1e376c08 &+ w1, &bc)
            w2 = Self.schedule(w2, w3, w11, w0)
            Self.round(g, h, a, &b, c, d, e, &f, 0x2748774c &+ w2, &bc)
            w3 = Self.schedule(w3, w4, w12, w1)
            Self.round(f, g, h, &a, b, c, d, &e, 0x34b0bcb5 &+ w3, &bc)
            w4 = Self.schedule(w4, w5, w13, w2)
            Self.round(e, f, g, &h, a, b, c, &d, 0x391c0cb3 &+ w4, &bc)
            w5 = Self.schedule(w5, w6, w14, w3)
            Self.round(d, e, f, &g, h, a, b, &c, 0x4ed8aa4a &+ w5, &bc)
            w6 = Self.schedule(w6, w7, w15, w4)
            Self.round(c, d, e, &f, g, h, a, &b, 0x5b9cca4f &+ w6, &bc)
            w7 = Self.schedule(w7, w8, w0, w5)
            Self.round(b, c, d, &e, f, g, h, &a, 0x682e6ff3 &+ w7, &bc)
            w8 = Self.schedule(w8, w9, w1, w6)
            Self.round(a, b, c, &d, e, f, g, &h, 0x748f82ee &+ w8, &bc)
            w9 = Self.schedule(w9, w10, w2, w7)
            Self.round(h, a, b, &c, d, e, f, &g, 0x78a5636f &+ w9, &bc)
            w10 = Self.schedule(w10, w11, w3, w8)
            Self.round(g, h, a, &b, c, d, e, &f, 0x84c87814 &+ w10, &bc)
            w11 = Self.schedule(w11, w12, w4, w9)
            Self.round(f, g, h, &a, b, c, d, &e, 0x8cc70208 &+ w11, &bc)
            w12 = Self.schedule(w12, w13, w5, w10)
            Self.round(e, f, g, &h, a, b, c, &d, 0x90befffa &+ w12, &bc)
            w13 = Self.schedule(w13, w14, w6, w11)
            Self.round(d, e, f, &g, h, a, b, &c, 0xa4506ceb &+ w13, &bc)
            w14 = Self.schedule(w14, w15, w7, w12)
            Self.round(c, d, e, &f, g, h, a, &b, 0xbef9a3f7 &+ w14, &bc)
            w15 = Self.schedule(w15, w0, w8, w13)
            Self.round(b, c, d, &e, f, g, h, &a, 0xc67178f2 &+ w15, &bc)
            h0 &+= a; h1 &+= b; h2 &+= c; h3 &+= d
            h4 &+= e; h5 &+= f; h6 &+= g; h7 &+= h
            offset += 64
        }
    }
}

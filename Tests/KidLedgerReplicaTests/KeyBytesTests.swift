@testable import KidLedgerReplica
import KidLedgerDomain
import Testing

/// `KeyBytes.compare` (eight bytes at a time) orders like a byte-by-byte lexicographic comparison.
@Test func keyBytesCompareIsLexicographic() {
    var g = SplitMix64(seed: 8)
    for _ in 0..<1_000 {
        let n = Int(g.next() % 24)
        let a = (0..<n).map { _ in UInt8(truncatingIfNeeded: g.next() % 3) }   // few symbols: long common prefixes
        var b = Array(a.prefix(Int(g.next() % UInt64(n + 1))))
        for _ in 0..<Int(g.next() % 12) { b.append(UInt8(truncatingIfNeeded: g.next() % 3 == 0 ? 0xFF : g.next() % 3)) }
        let expected = a.lexicographicallyPrecedes(b) ? -1 : (a == b ? 0 : 1)
        #expect(KeyBytes.compare(a, b) == expected, "\(a) vs \(b)")
        #expect(KeyBytes.compare(b, a) == -expected)
    }
}

/// `KeyBytes.equal` (eight bytes at a time) agrees with `Array`'s `==`: equal arrays, a prefix of
/// the other, and arrays differing in one byte anywhere, on both sides of a word boundary.
@Test func keyBytesEqualIsArrayEquality() {
    var g = SplitMix64(seed: 9)
    for _ in 0..<1_000 {
        let a = (0..<Int(g.next() % 40)).map { _ in UInt8(truncatingIfNeeded: g.next() % 2) }
        var b = a
        switch g.next() % 3 {
        case 0: break
        case 1: b = Array(a.prefix(Int(g.next() % UInt64(a.count + 1))))
        default: if !a.isEmpty { b[Int(g.next() % UInt64(a.count))] ^= 1 }
        }
        #expect(KeyBytes.equal(a, b) == (a == b), "\(a) vs \(b)")
        #expect(KeyBytes.equal(b, a) == (a == b))
    }
}

@testable import KidLedgerReplica
import KidLedgerDomain
import Testing

/// The writes `ByteWriter` and `ShortBytes` share, so that one random plan drives both.
private protocol ByteSink {
    mutating func write(_ byte: UInt8)
    mutating func write(bigEndian value: UInt64)
    mutating func write(orderedSigned value: Int64)
    mutating func write(id: RecordID)
    mutating func write(varint value: UInt64)
    mutating func write(raw: [UInt8])
}
extension ByteWriter: ByteSink {
    mutating func write(raw: [UInt8]) { write(raw: raw[...]) }
}
extension ShortBytes: ByteSink {}

/// One write of a random plan: `kind` picks the method, `a` and `b` are its arguments.
private struct Step {
    var kind, a, b: UInt64

    func write(into w: inout some ByteSink) {
        switch kind {
        case 0: w.write(UInt8(truncatingIfNeeded: a))
        case 1: w.write(bigEndian: a)
        case 2: w.write(orderedSigned: Int64(bitPattern: a))
        case 3: w.write(id: RecordID(high: a, low: b))
        case 4: w.write(varint: a)
        default: w.write(raw: Array(repeating: UInt8(truncatingIfNeeded: a), count: Int(b % 9)))
        }
    }
}

/// `ShortBytes` writes the same bytes as `ByteWriter`, whose layout the stored keys and values
/// have always had: each kind of write, in random sequences up to its capacity, compared byte
/// for byte.
@Test func shortBytesWritesWhatByteWriterWrites() {
    var g = SplitMix64(seed: 21)
    for _ in 0..<500 {
        // Values near the edges of their ranges half of the time.
        func value() -> UInt64 {
            switch g.next() % 4 {
            case 0: g.next() % 300
            case 1: UInt64.max - g.next() % 300
            case 2: 1 << (g.next() % 64)
            default: g.next()
            }
        }
        // A random plan of writes, as long as it fits.
        var plan: [Step] = []
        var expected = ByteWriter()
        while true {
            let step = Step(kind: g.next() % 6, a: value(), b: value())
            var longer = expected
            step.write(into: &longer)
            guard longer.bytes.count <= ShortBytes.capacity else { break }
            plan.append(step)
            expected = longer
        }
        let built = ShortBytes.make { w in
            for step in plan { step.write(into: &w) }
        }
        #expect(built == expected.bytes, "\(plan)")
    }
}

/// The key builders keep the documented layouts (docs/STORE.md, "The LMDB layout").
@Test func keysKeepTheirLayout() {
    let id = RecordID(high: 0x0102_0304_0506_0708, low: 0x1112_1314_1516_1718)
    let child = RecordID(high: 0x2122_2324_2526_2728, low: 0x3132_3334_3536_3738)
    let idBytes: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
    let childBytes: [UInt8] = [0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38]
    #expect(Keys.id(id) == idBytes)
    #expect(Keys.origin(ReplicaID(0x0A0B)) == [0, 0, 0, 0, 0, 0, 0x0A, 0x0B])
    #expect(Bytes.u64(258) == [0, 0, 0, 0, 0, 0, 1, 2])
    #expect(Keys.change(ReplicaID(1), 2) == [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2])
    #expect(Keys.change(ReplicaID(1), 2, version: [9, 8, 7]) == Keys.change(ReplicaID(1), 2) + [9, 8, 7])
    #expect(Keys.register(id, .childName) == idBytes + [Field.childName.rawValue])
    // createdAt -1 ms: the sign bit flipped, so it sorts just below zero.
    let t = LedgerTransaction(id: id, childID: child, amountCents: 5, createdAtMillis: -1, source: "test")
    let minusOne: [UInt8] = [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
    #expect(Keys.byTime(t) == minusOne + idBytes)
    #expect(Keys.byChild(t) == childBytes + minusOne + idBytes)
    #expect(Keys.deferred(t) == childBytes + idBytes)
}

/// The digest's bytes and a child's totals keep their stored layouts, and read back.
@Test func digestAndTotalsBytesRoundTrip() throws {
    let digest = Digest256(0x0102_0304_0506_0708, 2, 3, UInt64.max)
    #expect(Array(digest.bytes.prefix(8)) == [1, 2, 3, 4, 5, 6, 7, 8])
    #expect(Digest256(bytes: digest.bytes) == digest)
    var totals = Aggregate()
    totals.count = 300  // a two-byte varint
    totals.sumCents = -5
    totals.hashHigh = 0xAA
    totals.hashLow = 0xBB
    let encoded = totals.encoded()
    #expect(encoded.count == 2 + 32)
    totals.count = UInt64.max  // the longest varint: ten bytes
    #expect(try Aggregate.decode(totals.encoded()) == totals)
    totals.count = 300
    #expect(Array(encoded.prefix(2)) == [0xAC, 0x02])
    #expect(try Aggregate.decode(encoded) == totals)
    #expect(totals.idHash == [0, 0, 0, 0, 0, 0, 0, 0xAA, 0, 0, 0, 0, 0, 0, 0, 0xBB])
}

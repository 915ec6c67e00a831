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

/// `varintCount` and `zigzagCount` give the number of bytes the writer appends, at every length.
@Test func varintAndZigzagCountsMatchTheWriter() {
    var values: [UInt64] = [0, 1, 0x7F, 0x80, 0x3FFF, 0x4000, UInt64.max, UInt64.max >> 1]
    for shift in 0..<64 { values += [1 << UInt64(shift), (1 << UInt64(shift)) - 1, (1 << UInt64(shift)) + 1] }
    for v in values {
        var w = ByteWriter()
        w.write(varint: v)
        #expect(ByteWriter.varintCount(v) == w.bytes.count)
        for s in [Int64(bitPattern: v), -Int64(bitPattern: v >> 1), Int64(bitPattern: v >> 1)] {
            var z = ByteWriter()
            z.write(zigzag: s)
            #expect(ByteWriter.zigzagCount(s) == z.bytes.count)
        }
    }
}

/// `soleTransaction` is the transaction's own encoding for a change of one transaction, over
/// sequences, clocks and notes of every varint length; nil for other changes.
@Test func soleTransactionIsTheTransactionsEncoding() {
    let t = LedgerTransaction(id: RecordID(high: 1, low: 2), childID: RecordID(high: 3, low: 4), amountCents: -250,
                              createdAtMillis: 1_700_000_000_000, note: "pocket money 🐣", source: "cli")
    for sequence: UInt64 in [1, 127, 128, 1 << 20, UInt64.max] {
        for millis: Int64 in [0, 63, 64, 1_700_000_000_000, HLC.millisMax] {
            for counter: UInt32 in [0, 127, 128, UInt32.max] {
                for reverses: RecordID? in [nil, RecordID(high: 5, low: 6)] {
                    var u = t
                    u.reverses = reverses
                    let c = Change(origin: ReplicaID(9), sequence: sequence, hlc: HLC(millis: millis, counter: counter),
                                   operations: [.addTransaction(u)])
                    #expect(RecordCodec.soleTransaction(of: c, encoded: RecordCodec.encode(c)) == RecordCodec.encode(u))
                }
            }
        }
    }
    let child = Operation.createChild(ChildRecord(id: RecordID(high: 7, low: 8), createdAtMillis: 5))
    for ops: [Operation] in [[child], [.addTransaction(t), .addTransaction(t)], [child, .addTransaction(t)]] {
        let c = Change(origin: ReplicaID(9), sequence: 3, hlc: HLC(millis: 10), operations: ops)
        #expect(RecordCodec.soleTransaction(of: c, encoded: RecordCodec.encode(c)) == nil)
    }
}

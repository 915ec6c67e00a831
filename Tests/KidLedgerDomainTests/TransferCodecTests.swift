import KidLedgerDomain
import Testing

/// Issue 39: an owner transfer names the exact changes it saw (operation 9); operation 8, the older
/// format, still decodes.
@Suite("Owner transfer encoding")
struct TransferCodecTests {
    let key = [UInt8](repeating: 0x42, count: 32)
    let signature = [UInt8](repeating: 0x51, count: 64)

    func entry(_ origin: UInt64, _ fill: UInt8) -> [UInt8] {
        Membership.seenChangeKey(origin: ReplicaID(origin), encodedChange: [fill])
    }

    @Test("a transfer with seen changes is operation 9 and round-trips; without them it is operation 8")
    func roundTrip() throws {
        let changes = [entry(3, 1), entry(3, 2), entry(9, 1)].sorted { $0.lexicographicallyPrecedes($1) }
        let named = OwnerTransfer(newOwner: key, epoch: 2, transferredAtMillis: 7, seen: [ReplicaID(3): 5, ReplicaID(9): 1],
                                  seenChanges: changes, signature: signature)
        let older = OwnerTransfer(newOwner: key, epoch: 2, transferredAtMillis: 7, seen: [ReplicaID(3): 5], signature: signature)
        for (t, tag) in [(named, UInt8(9)), (older, UInt8(8))] {
            let bytes = RecordCodec.encodeOperation(.transferOwner(t))
            #expect(bytes.first == tag)
            var reader = ByteReader(bytes)
            #expect(try RecordCodec.decodeOperation(&reader) == .transferOwner(t))
            #expect(reader.isAtEnd)
        }
        // The seen changes are inside the signature: another set is another message.
        var other = named
        other.seenChanges = Array(changes.prefix(2))
        let household = RecordID(high: 1, low: 2)
        #expect(Membership.transferMessage(household: household, named) != Membership.transferMessage(household: household, other))
        #expect(Membership.transferMessage(household: household, named) != Membership.transferMessage(household: household, older))
        // An empty list is still the new format (it saw no owner-signed record).
        var none = named
        none.seenChanges = []
        #expect(RecordCodec.encodeOperation(.transferOwner(none)).first == 9)
    }

    @Test("seen changes out of order, repeated, or more than 10,000 do not decode")
    func refusesBadLists() {
        func bytes(_ entries: [[UInt8]], count: Int? = nil) -> [UInt8] {
            var w = ByteWriter(capacity: 64)
            w.write(UInt8(9))
            w.write(blob: key)
            w.write(varint: 1)
            w.write(zigzag: 0)
            RecordCodec.encode(seen: [:], into: &w)
            w.write(varint: UInt64(count ?? entries.count))
            for e in entries { w.write(raw: e) }
            w.write(blob: signature)
            return w.bytes
        }
        let a = entry(1, 1), b = entry(2, 1)
        for bad in [bytes([b, a]), bytes([a, a]), bytes([a], count: Limits.cutEntriesMax + 1), bytes([a], count: 2)] {
            var reader = ByteReader(bad)
            #expect(throws: DecodeError.self) { try RecordCodec.decodeOperation(&reader) }
        }
        var reader = ByteReader(bytes([a, b]))
        #expect(throws: Never.self) { try RecordCodec.decodeOperation(&reader) }
    }
}

import KidLedgerDomain
import Testing

/// The relay's membership operations (tags 10 to 13): canonical round trips, and refusals of
/// short, padded, trailing and out-of-range input, every prefix and every flipped length byte
/// decoding to an error, never a trap.
@Suite struct RelayCodecTests {
    static let relay = [UInt8](repeating: 0x51, count: 32)
    static let signature = [UInt8](repeating: 0x5A, count: 64)

    static let operations: [Operation] = [
        .relayGrant(RelayGrant(relay: relay, addresses: ["relay.example.org:7447", "[2001:db8::1]:7447", "192.0.2.1:1"],
                               streamKey: [UInt8](repeating: 3, count: 32), grantedAtMillis: 1_700_000_000_000, signature: signature)),
        .relayGrant(RelayGrant(relay: relay, addresses: [], streamKey: [UInt8](repeating: 4, count: 32), grantedAtMillis: -5,
                               signature: signature)),
        .relayRevoke(RelayRevocation(relay: relay, revokedAtMillis: 9, signature: signature)),
        .relayEpoch(RelayEpoch(record: [1, 0, 1] + [UInt8](repeating: 7, count: 176), signature: signature)),
        .relayMemberKey(MemberRelayKey(relay: relay, key: [UInt8](repeating: 0x6B, count: 32))),
    ]

    static func decode(_ bytes: [UInt8]) throws(DecodeError) -> Operation {
        var r = ByteReader(bytes)
        let op = try RecordCodec.decodeOperation(&r)
        try r.expectEnd()
        return op
    }

    @Test(arguments: operations)
    func roundTripsCanonically(op: Operation) throws {
        let bytes = RecordCodec.encodeOperation(op)
        #expect(try Self.decode(bytes) == op)
        #expect(RecordCodec.encodeOperation(try Self.decode(bytes)) == bytes)
        // In a change too.
        let change = Change(origin: ReplicaID(5), sequence: 2, hlc: HLC(millis: 10), operations: [op])
        #expect(try RecordCodec.decodeChange(RecordCodec.encode(change)) == change)
    }

    @Test(arguments: operations)
    func refusesEveryPrefixAndTrailingBytes(op: Operation) {
        let bytes = RecordCodec.encodeOperation(op)
        for n in 0..<bytes.count { #expect(throws: DecodeError.self) { try Self.decode(Array(bytes[..<n])) } }
        #expect(throws: DecodeError.self) { try Self.decode(bytes + [0]) }
    }

    /// Every byte changed to every value decodes or throws (no trap), and a decoded one re-encodes
    /// to the same bytes (canonical: no second encoding of one value).
    @Test(arguments: operations)
    func anyByteChangedDecodesCanonicallyOrThrows(op: Operation) {
        let bytes = RecordCodec.encodeOperation(op)
        for i in bytes.indices.prefix(120) {
            for value in [0, 1, 0x7F, 0x80, 0xFF, bytes[i] ^ 1] as [UInt8] {
                var changed = bytes
                changed[i] = value
                if let decoded = try? Self.decode(changed) { #expect(RecordCodec.encodeOperation(decoded) == changed) }
            }
        }
    }

    @Test func refusesPaddedVarintsAndWrongKeyLengths() {
        // A padded length varint of the relay key (0xA0 0x00 for 32).
        let bytes = RecordCodec.encodeOperation(Self.operations[4])
        #expect(throws: DecodeError.self) { try Self.decode([bytes[0], 0xA0, 0x00] + bytes[2...]) }
        // A 31-byte key.
        var w = ByteWriter()
        w.write(13)
        w.write(blob: [UInt8](repeating: 1, count: 31))
        w.write(blob: [UInt8](repeating: 1, count: 32))
        #expect(throws: DecodeError.self) { try Self.decode(w.bytes) }
        // An empty or oversized epoch record.
        for record in [[], [UInt8](repeating: 0, count: Limits.relayEpochRecordBytesMax + 1)] as [[UInt8]] {
            var e = ByteWriter()
            e.write(12)
            e.write(blob: record)
            e.write(blob: Self.signature)
            #expect(throws: DecodeError.self) { try Self.decode(e.bytes) }
        }
    }

    static func grantBytes(addresses: [String]) -> [UInt8] {
        var w = ByteWriter()
        w.write(10)
        w.write(blob: relay)
        w.write(varint: UInt64(addresses.count))
        for a in addresses { w.write(string: a) }
        w.write(blob: [UInt8](repeating: 3, count: 32))
        w.write(zigzag: 1)
        w.write(blob: signature)
        return w.bytes
    }

    @Test(arguments: [
        ["a:1", "b:2", "c:3", "d:4", "e:5"], ["a:1", "a:1"], ["nohost"], [":80"], ["h:0"], ["h:65536"], ["h:080"], ["h:"],
        ["::1:80"], ["[::1:80"], ["h h:80"], ["h:80\n"], [String(repeating: "a", count: 253) + ":80"], ["[]:80"],
    ])
    func refusesBadAddressLists(addresses: [String]) {
        #expect(throws: DecodeError.self) { try Self.decode(Self.grantBytes(addresses: addresses)) }
        #expect(RelayAddress.listProblem(addresses) != nil)
    }

    @Test(arguments: [["a:1", "b:2", "c:3", "d:65535"], ["[::1]:7447"], [String(repeating: "a", count: 249) + ":7447"], []])
    func takesGoodAddressLists(addresses: [String]) throws {
        #expect(RelayAddress.listProblem(addresses) == nil)
        guard case .relayGrant(let g) = try Self.decode(Self.grantBytes(addresses: addresses)) else { Issue.record("not a grant"); return }
        #expect(g.addresses == addresses)
    }

    /// The signed messages name the household and every field, under their own domain.
    @Test func signedMessagesDifferByKindHouseholdAndField() {
        let h = RecordID(high: 1, low: 2), other = RecordID(high: 1, low: 3)
        guard case .relayGrant(let g) = Self.operations[0], case .relayRevoke(let rv) = Self.operations[2],
              case .relayEpoch(let e) = Self.operations[3] else { Issue.record("fixtures"); return }
        var moved = g
        moved.addresses = ["relay.example.org:7448"]
        #expect(Membership.relayGrantMessage(household: h, g) != Membership.relayGrantMessage(household: other, g))
        #expect(Membership.relayGrantMessage(household: h, g) != Membership.relayGrantMessage(household: h, moved))
        var streamed = g
        streamed.streamKey[0] ^= 1
        #expect(Membership.relayGrantMessage(household: h, g) != Membership.relayGrantMessage(household: h, streamed))
        #expect(Membership.relayRevocationMessage(household: h, rv) != Membership.relayRevocationMessage(household: other, rv))
        var changed = e
        changed.record[5] ^= 1
        #expect(Membership.relayEpochMessage(household: h, e) != Membership.relayEpochMessage(household: h, changed))
    }
}

import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol

@Suite struct FrameTests {
    @Test func roundTripInRandomChunks() throws {
        var rng = SplitMix64(seed: 7)
        let messages: [Message] = [
            .hello(protocolVersionMin: 1, protocolVersionMax: 1, replica: ReplicaID(42), household: RecordID(high: 1, low: 2)),
            .welcome(protocolVersion: 1, replica: ReplicaID(9)),
            .vector(VectorSummary(vector: [ReplicaID(3): 7, ReplicaID(1): 2],
                                  chains: [ReplicaID(3): [UInt8](repeating: 3, count: 16), ReplicaID(1): [UInt8](repeating: 1, count: 16)],
                                  forked: [ReplicaID(8), ReplicaID(3)])),
            .forked([ReplicaID(2), ReplicaID(9)]),
            .changes([Change(origin: ReplicaID(5), sequence: 1, hlc: HLC(millis: 10, counter: 2),
                             operations: [.createChild(ChildRecord(id: RecordID(high: 3, low: 4), createdAtMillis: 10))])],
                     isLast: true),
            .ack([:]),
            .done,
            .error(code: 3, message: "nope"),
        ]
        let stream = messages.flatMap { $0.frame() }
        var decoder = FrameDecoder()
        var decoded: [Message] = []
        var i = 0
        while i < stream.count {
            let n = Int(rng.next() % 9) + 1
            decoder.push(Array(stream[i..<min(stream.count, i + n)]))
            i += n
            while let f = try decoder.next() { decoded.append(try Message.decode(type: f.type, payload: f.payload)) }
        }
        #expect(decoded == messages)
        #expect(decoder.bufferedBytes == 0)
    }

    @Test func zeroAndOversizedLengthsFailBeforeTheBody() {
        var d = FrameDecoder()
        d.push([0, 0, 0, 0])
        #expect(throws: ProtocolError.emptyFrame) { try d.next() }
        #expect(throws: ProtocolError.emptyFrame) { try d.next() }
        var big = FrameDecoder()
        big.push([0, 0x40, 0, 1])
        #expect(throws: ProtocolError.frameTooLarge(UInt32(frameBytesMax) + 1)) { try big.next() }
        var exact = FrameDecoder()
        exact.push([0, 0x40, 0, 0, 4])
        #expect((try? exact.next()) == nil)
    }

    @Test func decodeRejectsTrailingBytesAndBadVectors() {
        #expect(throws: ProtocolError.self) { try Message.decode(type: 6, payload: [0]) }
        // Vector with origins out of order.
        var w = ByteWriter()
        w.write(varint: 2)
        w.write(bigEndian: UInt64(5)); w.write(varint: 1)
        w.write(bigEndian: UInt64(4)); w.write(varint: 1)
        #expect(throws: ProtocolError.self) { try Message.decode(type: 3, payload: w.bytes) }
        // Zero sequence.
        #expect(throws: ProtocolError.self) { try Message.decode(type: 3, payload: [1, 0, 0, 0, 0, 0, 0, 0, 1, 0]) }
        #expect(throws: ProtocolError.unknownMessageType(99)) { try Message.decode(type: 99, payload: []) }
        // Inverted version range.
        #expect(throws: ProtocolError.self) {
            try Message.decode(type: 1, payload: [0, 2, 0, 1] + [UInt8](repeating: 0, count: 24))
        }
    }
}

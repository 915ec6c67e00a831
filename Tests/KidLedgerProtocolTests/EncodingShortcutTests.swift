import KidLedgerDomain
@testable import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol

/// The shortcuts the session takes on the wire produce the same bytes as the plain encodings.
@Suite struct EncodingShortcutTests {
    static func changes(_ n: Int) -> [Change] {
        var result: [Change] = []
        for i in 0..<n {
            let origin = ReplicaID(UInt64(1 + i % 3))
            let hlc = HLC(millis: Int64(10 + i), counter: UInt32(i % 5))
            let child = ChildRecord(id: RecordID(high: UInt64(i), low: 4), createdAtMillis: Int64(i))
            result.append(Change(origin: origin, sequence: UInt64(1 + i), hlc: hlc, operations: [.createChild(child)]))
        }
        return result
    }

    @Test(arguments: [0, 1, 127, 128, 300])
    func changesFrameEqualsTheEncodedMessage(count: Int) throws {
        let changes = Self.changes(count)
        for isLast in [false, true] {
            let encoded = changes.map { EncodedChange(origin: $0.origin, sequence: $0.sequence, bytes: RecordCodec.encode($0)) }
            let frame = Message.changesFrame(encoded: encoded[...], isLast: isLast)
            #expect(frame == Message.changes(changes, isLast: isLast).frame())
            // A slice that does not start at index 0 encodes the same way.
            let shifted = ([EncodedChange(origin: ReplicaID(9), sequence: 1, bytes: [1, 2, 3])] + encoded)[1...]
            #expect(Message.changesFrame(encoded: shifted, isLast: isLast) == frame)
        }
    }

    @Test func checksPayloadIsSortedWhateverTheInputOrder() throws {
        var checks: [ChildCheck] = []
        for i in 0..<20 {
            let child = RecordID(high: UInt64((i * 7) % 20), low: UInt64(i))
            let sum = Int128(i) * -1_000
            checks.append(ChildCheck(child: child, count: UInt64(i), sumCents: sum, idHash: [UInt8](repeating: UInt8(i), count: 16)))
        }
        let sorted = checks.sorted { $0.child < $1.child }
        #expect(Message.checks(checks).encodePayload() == Message.checks(sorted).encodePayload())
        #expect(Message.checks(sorted.reversed()).encodePayload() == Message.checks(sorted).encodePayload())
        #expect(try Message.decode(type: 9, payload: Message.checks(checks).encodePayload()) == .checks(sorted))
    }

    @Test func decoderTakesWholeAndSplitPushesAlike() throws {
        let frames = [Message.done.frame(), Message.ack([ReplicaID(3): 4]).frame(), Message.changes(Self.changes(3), isLast: true).frame()]
        var whole = FrameDecoder()
        var got: [UInt8] = []
        for frame in frames {
            whole.push(frame)
            while let f = try whole.next() { got.append(f.type) }
            #expect(whole.bufferedBytes == 0)
        }
        #expect(got == [6, 5, 4])
        // Split across pushes, including a push that ends mid-frame and one carrying two frames.
        let stream = frames.flatMap { $0 }
        var split = FrameDecoder()
        var types: [UInt8] = []
        for chunk in [stream[0..<3], stream[3..<7], stream[7..<(stream.count - 2)], stream[(stream.count - 2)...]] {
            split.push(Array(chunk))
            while let f = try split.next() { types.append(f.type) }
        }
        #expect(types == [6, 5, 4])
        #expect(split.bufferedBytes == 0)
    }

    @Test func unexpectedMessageNamesTheState() {
        #expect(SyncSession.name(of: .awaitingPeerStart) == "\(SyncSession.State.awaitingPeerStart)")
        for state in [SyncSession.State.created, .awaitingHello, .awaitingWelcome, .awaitingVector, .awaitingPeerStart,
                      .transferring, .finished, .failed] {
            #expect(SyncSession.name(of: state) == "\(state)")
        }
    }
}

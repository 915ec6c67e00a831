// Targets for the sync protocol's wire format: the frame decoder and every message decoder.
import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerReplica

/// Splits `bytes` into frames, delivered in chunks of `chunk` bytes; returns the frames and the
/// error that stopped the decoder, if any.
private func frames(of bytes: [UInt8], chunk: Int) -> (frames: [(type: UInt8, payload: [UInt8])], error: ProtocolError?) {
    var decoder = FrameDecoder()
    var out: [(type: UInt8, payload: [UInt8])] = []
    var start = 0
    repeat {
        decoder.push(Array(bytes[start..<min(bytes.count, start + chunk)]))
        start += chunk
        while true {
            do {
                guard let frame = try decoder.next() else { break }
                out.append(frame)
            } catch {
                // A failed decoder stays failed with the same error.
                do {
                    _ = try decoder.next()
                    violated("the frame decoder recovered after \(error)")
                } catch let again {
                    check(again == error, "a failed decoder changed its error: \(error) then \(again)")
                }
                return (out, error)
            }
        }
    } while start < bytes.count
    return (out, nil)
}

/// `frame`: input byte 0 chooses a chunk size, the rest is a byte stream. Properties: chunking does
/// not change the frames or the error; the frames re-encode to exactly the bytes they came from; a
/// length of zero or above the limit is refused; every frame's payload either fails to decode as its
/// message or re-encodes canonically.
@Sendable func fuzzFrame(_ data: [UInt8]) {
    guard let first = data.first else { return }
    let stream = Array(data.dropFirst())
    let whole = frames(of: stream, chunk: max(stream.count, 1))
    let chunked = frames(of: stream, chunk: Int(first % 17) + 1)
    check(whole.error == chunked.error, "chunking changed the error: \(String(describing: whole.error)) vs \(String(describing: chunked.error))")
    check(whole.frames.count == chunked.frames.count
          && zip(whole.frames, chunked.frames).allSatisfy { $0.type == $1.type && $0.payload == $1.payload },
          "chunking changed the frames")
    var reencoded: [UInt8] = []
    for frame in whole.frames {
        check(frame.payload.count + 1 <= frameBytesMax, "a frame over the limit was accepted")
        reencoded += Frame.encode(type: frame.type, payload: frame.payload)
        checkMessage(type: frame.type, payload: frame.payload)
    }
    check(stream.starts(with: reencoded), "frames do not re-encode to the bytes they came from")
    if let error = whole.error {
        let rest = stream[reencoded.count...]
        check(rest.count >= 4, "error \(error) before a length prefix was complete")
        let length = rest.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        check(length == 0 || length > UInt32(frameBytesMax), "error \(error) on a valid length \(length)")
    }
}

/// Decodes one message; when it decodes, its encoding must be exactly `payload` (the encoding is
/// canonical) and decoding that again must give the same message.
private func checkMessage(type: UInt8, payload: [UInt8]) {
    guard let message = try? Message.decode(type: type, payload: payload) else { return }
    check(message.type == type, "decoded type \(message.type) from type byte \(type)")
    let encoded = message.encodePayload()
    check(encoded == payload, "\(message.name): decode→encode is not the identity (\(payload.count) → \(encoded.count) bytes)")
    let again = try? Message.decode(type: type, payload: encoded)
    check(again == message, "\(message.name): encode→decode changed the message")
    let frame = message.frame()
    var decoder = FrameDecoder()
    decoder.push(frame)
    let back = try? decoder.next()
    check(back?.type == type && back?.payload == payload && decoder.bufferedBytes == 0, "\(message.name): frame round trip")
}

/// `message`: input byte 0 is the message type, the rest its payload. Properties as in
/// ``checkMessage(type:payload:)``.
@Sendable func fuzzMessage(_ data: [UInt8]) {
    guard let type = data.first else { return }
    checkMessage(type: type, payload: Array(data.dropFirst()))
}

// MARK: - Seeds

/// One of each message, with real changes from a replica.
func sampleMessages() -> [Message] {
    let changes = sampleChanges()
    let origin = changes[0].origin
    let vector: VersionVector = [origin: UInt64(changes.count), ReplicaID(7): 3]
    let child = RecordID(high: 0x0102_0304_0506_0708, low: 0x8090_A0B0_C0D0_E0F0)
    return [
        .hello(protocolVersionMin: 1, protocolVersionMax: 1, replica: ReplicaID(5), household: sampleHousehold.id),
        .hello(protocolVersionMin: 1, protocolVersionMax: 2, replica: ReplicaID(5), household: sampleHousehold.id,
               joinToken: Array(repeating: 0xAB, count: 16)),
        .welcome(protocolVersion: 1, replica: origin),
        .vector(VectorSummary(vector: vector, chains: [origin: Array(repeating: 1, count: 16), ReplicaID(7): Array(repeating: 2, count: 16)],
                              forked: [ReplicaID(9)])),
        .changes(Array(changes.prefix(3)), isLast: false),
        .changes(Array(changes.suffix(2)), isLast: true),
        .changes(Array(changes.suffix(2)), isLast: true, heads: [  // signed heads, one with a branch choice
            SignedHead(origin: changes[changes.count - 2].origin, sequence: changes[changes.count - 2].sequence,
                       signature: Array(repeating: 0x77, count: 64)),
            SignedHead(origin: changes[changes.count - 1].origin, sequence: changes[changes.count - 1].sequence,
                       signature: Array(repeating: 0x88, count: 64),
                       choices: [HeadChoice(sequence: changes[changes.count - 1].sequence, version: 0x0123_4567_89AB_CDEF)]),
        ]),
        .ack(vector),
        .done,
        .error(code: 3, message: "household mismatch"),
        .checks([ChildCheck(child: child, count: 3, sumCents: -125, idHash: Array(repeating: 0x5A, count: 16)),
                 ChildCheck(child: RecordID(high: 0xF000_0000_0000_0000, low: 1), count: 1, sumCents: Int128(Int64.max) * 4,
                            idHash: Array(repeating: 7, count: 16))]),
        .forked([ReplicaID(2), ReplicaID(3)]),
        .checksDigest(children: 2, digest: Array(repeating: 0x3C, count: 16)),
    ]
}

@Sendable func frameSeeds() -> [[UInt8]] {
    let messages = sampleMessages()
    var seeds: [[UInt8]] = messages.map { [1] + $0.frame() }
    seeds.append([5] + messages.prefix(4).flatMap { $0.frame() })
    seeds.append([0, 0, 0, 0, 0])                       // a zero length
    seeds.append([3, 0, 0x40, 0, 1, 4])                 // a length just over the limit
    seeds.append([2] + Array(messages[4].frame().dropLast(3)))  // a truncated frame
    return seeds
}

@Sendable func messageSeeds() -> [[UInt8]] {
    sampleMessages().map { [$0.type] + $0.encodePayload() }
}

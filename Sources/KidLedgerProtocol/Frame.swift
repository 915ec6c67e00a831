import KidLedgerDomain

/// The largest frame, counting its type byte and payload (not the 4-byte length prefix).
public let frameBytesMax = 4 << 20

/// The largest frame a responder accepts before the peer's `hello` (whose frame is at most 94
/// bytes): a peer that is not yet admitted makes it buffer no more than this.
public let helloFrameBytesMax = 256

/// The 4-byte length prefix plus the 1-byte message type.
public let frameHeaderBytes = 5

/// Frame layout: `[u32 big-endian length][u8 message type][payload]`, where length counts the
/// type byte and the payload.
public enum Frame {
    /// The bytes of one frame carrying `payload` as message `type`.
    public static func encode(type: UInt8, payload: [UInt8]) -> [UInt8] {
        precondition(payload.count + 1 <= frameBytesMax, "frame too large")
        var w = ByteWriter(capacity: frameHeaderBytes + payload.count)
        w.write(bigEndian: UInt32(payload.count + 1))
        w.write(type)
        w.write(raw: payload)
        return w.bytes
    }
}

/// Splits a byte stream, delivered in arbitrary chunks, into frames.
///
/// A length of zero or above the limit (``frameBytesMax`` unless ``next(limit:)`` says less) is
/// rejected as soon as the 4 length bytes are in, before any of the body is buffered. After an error the decoder stays failed: every later
/// ``next()`` throws the same error. No input makes it trap.
public struct FrameDecoder: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0
    private var failure: ProtocolError?

    /// Creates an empty decoder.
    public init() {}

    /// Bytes received but not yet returned as frames.
    public var bufferedBytes: Int { buffer.count - start }

    /// Appends received bytes.
    public mutating func push(_ bytes: [UInt8]) {
        guard failure == nil else { return }
        if buffer.isEmpty {
            // Nothing buffered (the usual case: whole frames per read): share the bytes, no copy.
            buffer = bytes
            start = 0
            return
        }
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame, or nil when more bytes are needed. `limit` (at most
    /// ``frameBytesMax``): the longest frame accepted now.
    public mutating func next(limit: Int = frameBytesMax) throws(ProtocolError) -> (type: UInt8, payload: [UInt8])? {
        if let failure { throw failure }
        guard bufferedBytes >= 4 else { return nil }
        var length: UInt32 = 0
        for i in 0..<4 { length = (length << 8) | UInt32(buffer[start + i]) }
        if length == 0 { return try fail(.emptyFrame) }
        let most = min(limit, frameBytesMax)
        if length > UInt32(most) { return try fail(.frameTooLarge(length, limit: most)) }
        let total = 4 + Int(length)
        guard bufferedBytes >= total else { return nil }
        let type = buffer[start + 4]
        let payload = Array(buffer[(start + 5)..<(start + total)])
        start += total
        if start == buffer.count {
            // Released rather than emptied in place: the buffer may be shared with the pushed
            // bytes, and the next push into an empty decoder takes its bytes as they are.
            buffer = []
            start = 0
        }
        return (type, payload)
    }

    private mutating func fail(_ error: ProtocolError) throws(ProtocolError) -> (type: UInt8, payload: [UInt8])? {
        failure = error
        buffer = []
        start = 0
        throw error
    }
}

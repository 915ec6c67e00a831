import KidLedgerDomain

/// The household's stream key (docs/RELAY-DESIGN.md): 32 random bytes, drawn by the owner at
/// `relay add` and carried only inside the ledger, that name the origins' streams on the relay.
///
/// - Warning: ``bytes`` is a household secret; never send it to the relay.
public struct RelayStreamKey: Equatable, Sendable {
    /// Length of a stream key in bytes.
    public static let byteCount = 32

    /// The 32 key bytes (secret).
    public let bytes: [UInt8]

    /// Wraps exactly 32 bytes; throws ``RelaySealError/badKey(_:)`` otherwise.
    public init(bytes: [UInt8]) throws(RelaySealError) {
        guard bytes.count == Self.byteCount else { throw .badKey("a stream key is \(Self.byteCount) bytes, got \(bytes.count)") }
        self.bytes = bytes
    }

    /// A fresh stream key from `random` (injected).
    public static func generate<R: RandomNumberGenerator>(using random: inout R) -> RelayStreamKey {
        // 32 bytes by construction.
        try! RelayStreamKey(bytes: RelayRandom.bytes(byteCount, using: &random))
    }

    /// The tag of `origin`'s stream: BLAKE2b-128 keyed with this key of
    /// `"kidledger relay stream v1" 0 | origin u64 BE`. The relay sees the tag, not the origin.
    public func tag(of origin: ReplicaID) -> RelayStreamTag {
        var w = ByteWriter(capacity: 34)
        w.write(raw: "kidledger relay stream v1".utf8)
        w.write(0)
        w.write(bigEndian: origin.rawValue)
        // 16 bytes by construction.
        return RelayStreamTag(bytes: Sodium.genericHash(w.bytes, key: bytes, outputCount: RelayStreamTag.byteCount))!
    }
}

/// The name of one origin's stream on the relay (``RelayStreamKey/tag(of:)``).
public struct RelayStreamTag: Hashable, Sendable, CustomStringConvertible {
    /// Length of a tag in bytes.
    public static let byteCount = 16

    /// The 16 tag bytes.
    public let bytes: [UInt8]

    /// Wraps exactly 16 bytes; nil otherwise.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// Lowercase hex.
    public var description: String { Hex.encode(bytes) }
}

/// The clear header of an envelope: what the relay files it under, authenticated as the
/// envelope's additional data.
///
/// ```
/// version u8 = 1 | stream tag 16 | first sequence u64 BE | last sequence u64 BE | epoch u32 BE   (37 bytes)
/// 1 ≤ first ≤ last ≤ 2^62 (Limits.sequenceMax)
/// ```
///
/// Fixed-width big-endian, so the relay can use it as a store key in stream and sequence order.
public struct RelayEnvelopeHeader: Hashable, Sendable {
    /// The encoding's version byte.
    public static let version: UInt8 = 1
    /// Bytes of an encoded header.
    public static let byteCount = 1 + RelayStreamTag.byteCount + 8 + 8 + 4

    /// The origin's stream.
    public let stream: RelayStreamTag
    /// The sequence of the envelope's first change.
    public let firstSequence: UInt64
    /// The sequence of its last change.
    public let lastSequence: UInt64
    /// The epoch whose key sealed it.
    public let epoch: UInt32

    /// A header; throws ``RelaySealError/invalidArgument(_:)`` unless
    /// 1 ≤ `firstSequence` ≤ `lastSequence` ≤ ``Limits/sequenceMax``.
    public init(stream: RelayStreamTag, firstSequence: UInt64, lastSequence: UInt64, epoch: UInt32) throws(RelaySealError) {
        if let problem = Self.problem(first: firstSequence, last: lastSequence) { throw .invalidArgument(problem) }
        self.init(checked: stream, firstSequence, lastSequence, epoch)
    }

    private init(checked stream: RelayStreamTag, _ firstSequence: UInt64, _ lastSequence: UInt64, _ epoch: UInt32) {
        self.stream = stream
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.epoch = epoch
    }

    private static func problem(first: UInt64, last: UInt64) -> String? {
        guard first >= 1 else { return "sequences start at 1" }
        guard first <= last else { return "first sequence \(first) after last \(last)" }
        guard last <= Limits.sequenceMax else { return "sequence above 2^62" }
        return nil
    }

    /// The 37 canonical bytes.
    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: Self.byteCount)
        w.write(Self.version)
        w.write(raw: stream.bytes)
        w.write(bigEndian: firstSequence)
        w.write(bigEndian: lastSequence)
        w.write(bigEndian: epoch)
        return w.bytes
    }

    /// Decodes the header at the start of `bytes` (the rest is the envelope's body, not read).
    /// - Throws: ``RelaySealError/malformed(_:)`` for fewer than 37 bytes, another version or
    ///   sequences out of range.
    public static func decode(prefixOf bytes: [UInt8]) throws(RelaySealError) -> RelayEnvelopeHeader {
        do throws(DecodeError) {
            var r = ByteReader(Array(bytes.prefix(byteCount)))
            guard try r.readByte("envelope version") == version else { throw DecodeError.invalid("envelope version") }
            // 16 bytes by construction.
            let stream = RelayStreamTag(bytes: try r.readRaw(count: RelayStreamTag.byteCount, "stream tag"))!
            let first = try r.readBigEndianUInt64("first sequence")
            let last = try r.readBigEndianUInt64("last sequence")
            let epoch = try r.readBigEndianUInt32("epoch")
            if let problem = problem(first: first, last: last) { throw DecodeError.invalid("envelope header (\(problem))") }
            return RelayEnvelopeHeader(checked: stream, first, last, epoch)
        } catch {
            throw RelaySealError(error)
        }
    }
}

/// An envelope: a run of one origin's changes (the payload; its bytes are the caller's) sealed for
/// the relay under an epoch key.
///
/// ```
/// header 37 | nonce 24 | XChaCha20-Poly1305 ciphertext of the payload (1...payloadBytesMax) | tag 16
/// additional data = the header's 37 bytes; key = K_epoch
/// ```
///
/// Moving an envelope to another stream, sequence range or epoch, splicing one header onto
/// another's body, or changing any byte makes it fail to open.
public enum RelayEnvelope {
    /// Most payload bytes in one envelope: 1 MiB (an uploader cuts a longer run into several).
    public static let payloadBytesMax = 1 << 20
    /// Bytes an envelope adds to its payload.
    public static let overheadBytes = RelayEnvelopeHeader.byteCount + RelayAEAD.nonceBytes + RelayAEAD.tagBytes
    /// The largest envelope.
    public static let bytesMax = overheadBytes + payloadBytesMax

    /// `payload` sealed under `key` with `header`, the nonce drawn from `random` (injected).
    /// - Throws: ``RelaySealError/invalidArgument(_:)`` for an empty payload or one above
    ///   ``payloadBytesMax``, ``RelaySealError/wrongEpoch(expected:got:)`` when `key` is not of
    ///   the header's epoch.
    public static func seal<R: RandomNumberGenerator>(_ payload: [UInt8], header: RelayEnvelopeHeader, key: EpochKey,
                                                      using random: inout R) throws(RelaySealError) -> [UInt8] {
        try seal(payload, header: header, key: key, nonce: RelayRandom.bytes(RelayAEAD.nonceBytes, using: &random))
    }

    /// ``seal(_:header:key:using:)`` with a given 24-byte nonce (tests and the fuzzer).
    package static func seal(_ payload: [UInt8], header: RelayEnvelopeHeader, key: EpochKey,
                             nonce: [UInt8]) throws(RelaySealError) -> [UInt8] {
        guard !payload.isEmpty, payload.count <= payloadBytesMax else {
            throw .invalidArgument("an envelope carries 1 to \(payloadBytesMax) bytes, got \(payload.count)")
        }
        guard key.epoch == header.epoch else { throw .wrongEpoch(expected: header.epoch, got: key.epoch) }
        guard nonce.count == RelayAEAD.nonceBytes else { throw .invalidArgument("a nonce is \(RelayAEAD.nonceBytes) bytes") }
        let head = header.encoded
        return head + RelayAEAD.seal(payload, additional: head, key: key.bytes, nonce: nonce)
    }

    /// The header of `envelope`, not authenticated: what the relay reads to file it. Throws
    /// ``RelaySealError/malformed(_:)`` for an envelope of impossible size or a bad header.
    public static func header(of envelope: [UInt8]) throws(RelaySealError) -> RelayEnvelopeHeader {
        guard envelope.count > overheadBytes, envelope.count <= bytesMax else {
            throw .malformed("an envelope is \(overheadBytes + 1) to \(bytesMax) bytes, got \(envelope.count)")
        }
        return try RelayEnvelopeHeader.decode(prefixOf: envelope)
    }

    /// The authenticated header and payload of `envelope`, which must belong to `stream` and be
    /// sealed under a key in `keys`. Nothing is returned unless the whole envelope authenticates.
    /// - Throws: ``RelaySealError/malformed(_:)`` (size, header),
    ///   ``RelaySealError/unknownEpoch(_:)`` (no key for its epoch),
    ///   ``RelaySealError/envelopeDidNotOpen`` (altered, moved, relabelled or spliced),
    ///   ``RelaySealError/wrongStream`` (a genuine envelope of another stream).
    public static func open(_ envelope: [UInt8], stream: RelayStreamTag,
                            keys: EpochKeyring) throws(RelaySealError) -> (header: RelayEnvelopeHeader, payload: [UInt8]) {
        let header = try header(of: envelope)
        guard let key = keys[header.epoch] else { throw .unknownEpoch(header.epoch) }
        let head = Array(envelope[0..<RelayEnvelopeHeader.byteCount])
        guard let payload = RelayAEAD.open(Array(envelope[RelayEnvelopeHeader.byteCount...]), additional: head, key: key.bytes) else {
            throw .envelopeDidNotOpen
        }
        guard header.stream == stream else { throw .wrongStream }
        return (header, payload)
    }
}

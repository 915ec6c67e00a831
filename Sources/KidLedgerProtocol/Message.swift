import KidLedgerDomain
import KidLedgerReplica

/// The lowest protocol version this build speaks.
public let protocolVersionMin: UInt16 = 3
/// The highest protocol version this build speaks.
public let protocolVersionMax: UInt16 = 5

/// Most changes in one `changes` message.
public let changesPerBatchMax = 4096
/// Most entries in one version vector message (or one page of it: ``Message/part(_:)``).
public let vectorEntriesMax = 10_000
/// Most entries in a whole version vector, over all its pages: what a session holds of a peer's
/// vector at once (a few tens of MiB at most).
public let vectorEntriesTotalMax = 250_000
/// Longest join token in `hello`, in bytes.
public let joinTokenBytesMax = 64
/// Most children in one `checks` message (or one page of it).
public let checksMax = 10_000
/// Most children in a whole `checks` message, over all its pages, and in a `checksDigest`.
public let checksTotalMax = 250_000
/// Longest `error` message text, in UTF-8 bytes.
public let errorMessageBytesMax = 1_000

/// One protocol message. See docs/PROTOCOL.md for the byte layout of each.
public enum Message: Equatable, Sendable {
    /// Initiator → responder: the versions it speaks, who it is, which household it syncs,
    /// when joining the household with an invitation, the invitation's secret, and the TCP port
    /// its own daemon accepts peers on (0: none), so the responder can dial it back.
    case hello(protocolVersionMin: UInt16, protocolVersionMax: UInt16, replica: ReplicaID, household: RecordID,
               joinToken: [UInt8] = [], listenPort: UInt16 = 0)
    /// Responder → initiator: the chosen version and who it is.
    case welcome(protocolVersion: UInt16, replica: ReplicaID)
    /// What the sender holds: highest contiguous sequence per origin with the hash chain there,
    /// and the origins whose histories it found forked in the peer's vector.
    case vector(VectorSummary)
    /// A batch of changes in origin/sequence order; `isLast` when the sender has nothing more;
    /// the signed heads that authenticate them (a household with an owner; docs/SECURITY.md).
    case changes([Change], isLast: Bool, heads: [SignedHead] = [])
    /// The receiver's version vector after durably applying a batch.
    case ack(VersionVector)
    /// The sender has sent everything and everything it sent is acknowledged.
    case done
    /// The sender gives up; the session fails on both sides.
    case error(code: UInt16, message: String)
    /// Before `done`, only when the check digests differed: the sender's per-child check (count,
    /// sum, id hash) after the exchange, so each side can name the children that differ.
    case checks([ChildCheck])
    /// After the exchange: how many children the sender's per-child checks cover and the first 16
    /// bytes of SHA-256 over their `checks` payload. Equal digests: every child agrees.
    case checksDigest(children: UInt64, digest: [UInt8])
    /// Responder → initiator, before its first batch: origins whose histories it found forked in
    /// the initiator's vector; the initiator sends every version of them from sequence 1.
    case forked([ReplicaID])
    /// A page of a `vector`, `ack` or `checks` message too large for one (more than
    /// ``vectorEntriesMax`` or ``checksMax`` entries): more pages of the same message follow, and
    /// the message itself, holding the last page, ends it. The receiver joins the pages (at most
    /// ``vectorEntriesTotalMax`` or ``checksTotalMax`` entries in all) before it acts on them.
    indirect case part(Message)

    /// The message type byte.
    public var type: UInt8 {
        switch self {
        case .hello: 1
        case .welcome: 2
        case .vector: 3
        case .changes: 4
        case .ack: 5
        case .done: 6
        case .error: 7
        case .forked: 8
        case .checks: 9
        case .checksDigest: 10
        case .part: 11
        }
    }

    /// A short name for logs and errors.
    public var name: String {
        switch self {
        case .hello: "hello"
        case .welcome: "welcome"
        case .vector: "vector"
        case .changes: "changes"
        case .ack: "ack"
        case .done: "done"
        case .error: "error"
        case .forked: "forked"
        case .checks: "checks"
        case .checksDigest: "checksDigest"
        case .part(let page): "part of \(page.name)"
        }
    }

    /// The payload bytes (without the frame header).
    public func encodePayload() -> [UInt8] {
        var w = ByteWriter(capacity: 32)
        switch self {
        case .hello(let lo, let hi, let replica, let household, let token, let listenPort):
            Self.write(u16: lo, &w)
            Self.write(u16: hi, &w)
            w.write(bigEndian: replica.rawValue)
            w.write(id: household)
            w.write(blob: token)
            Self.write(u16: listenPort, &w)
        case .checks(let checks):
            precondition(checks.count <= checksMax, "too many child checks")
            Self.write(checks: checks, &w)
        case .part(let page):
            precondition([3, 5, 9].contains(page.type), "only vector, ack and checks messages are paged")
            w.write(page.type)
            w.write(raw: page.encodePayload())
        case .checksDigest(let children, let digest):
            precondition(digest.count == 16, "a checks digest has 16 bytes")
            w.write(varint: children)
            w.write(raw: digest)
        case .welcome(let version, let replica):
            Self.write(u16: version, &w)
            w.write(bigEndian: replica.rawValue)
        case .vector(let summary):
            Self.write(vector: summary.vector, &w)
            for origin in summary.vector.filter({ $0.value > 0 }).keys.sorted() {
                w.write(raw: summary.chains[origin] ?? [UInt8](repeating: 0, count: 16))
            }
            Self.write(origins: summary.forked, &w)
        case .forked(let origins):
            Self.write(origins: origins, &w)
        case .ack(let v):
            Self.write(vector: v, &w)
        case .changes(let changes, let isLast, let heads):
            w.write(bool: isLast)
            w.write(varint: UInt64(changes.count))
            for c in changes { RecordCodec.encode(c, into: &w) }
            Self.write(heads: heads.compactMap { head in
                changes.firstIndex { $0.origin == head.origin && $0.sequence == head.sequence }.map { ($0, head) }
            }, &w)
        case .done:
            break
        case .error(let code, let message):
            Self.write(u16: code, &w)
            var text = message
            while text.utf8.count > errorMessageBytesMax { text.removeLast() }
            w.write(string: text)
        }
        return w.bytes
    }

    /// The complete frame for this message.
    public func frame() -> [UInt8] {
        Frame.encode(type: type, payload: encodePayload())
    }

    // long-function: one case per message type of the wire format: a table.
    /// Decodes and validates a message; trailing bytes and out-of-limit counts are errors.
    public static func decode(type: UInt8, payload: [UInt8]) throws(ProtocolError) -> Message {
        var r = ByteReader(payload)
        do {
            let message: Message
            switch type {
            case 1:
                let lo = try readU16(&r, "hello version min")
                let hi = try readU16(&r, "hello version max")
                let replica = ReplicaID(try r.readBigEndianUInt64("hello replica"))
                let household = try r.readID("hello household")
                let token = try r.readBlob(maxCount: joinTokenBytesMax, "hello join token")
                let listenPort = try readU16(&r, "hello listen port")
                guard lo <= hi else { throw DecodeError.invalid("hello version range \(lo)...\(hi)") }
                message = .hello(protocolVersionMin: lo, protocolVersionMax: hi, replica: replica, household: household,
                                 joinToken: token, listenPort: listenPort)
            case 2:
                let version = try readU16(&r, "welcome version")
                message = .welcome(protocolVersion: version, replica: ReplicaID(try r.readBigEndianUInt64("welcome replica")))
            case 3:
                let vector = try readVector(&r)
                var chains: [ReplicaID: [UInt8]] = [:]
                for origin in vector.keys.sorted() { chains[origin] = try r.readRaw(count: 16, "vector chain") }
                message = .vector(VectorSummary(vector: vector, chains: chains, forked: try readOrigins(&r)))
            case 4:
                let isLast = try r.readBool("isLast")
                let count = try r.readVarint("change count")
                guard count <= UInt64(changesPerBatchMax) else { throw DecodeError.invalid("change count \(count)") }
                var changes: [Change] = []
                changes.reserveCapacity(Int(count))
                for _ in 0..<count { changes.append(try RecordCodec.decodeChange(&r)) }
                message = .changes(changes, isLast: isLast, heads: try readHeads(&r, of: changes))
            case 5:
                message = .ack(try readVector(&r))
            case 6:
                message = .done
            case 8:
                message = .forked(try readOrigins(&r))
            case 9:
                let count = try r.readVarint("check count")
                guard count <= UInt64(checksMax) else { throw DecodeError.invalid("check count \(count)") }
                var checks: [ChildCheck] = []
                for _ in 0..<count {
                    let child = try r.readID("check child")
                    if let last = checks.last, child <= last.child { throw DecodeError.invalid("checks not strictly ascending") }
                    let n = try r.readVarint("check count")
                    let high = try r.readBigEndianUInt64("check sum")
                    let low = try r.readBigEndianUInt64("check sum")
                    let hash = try r.readRaw(count: 16, "check hash")
                    checks.append(ChildCheck(child: child, count: n, sumCents: (Int128(Int64(bitPattern: high)) << 64) | Int128(low), idHash: hash))
                }
                message = .checks(checks)
            case 10:
                let children = try r.readVarint("checks digest children")
                guard children <= UInt64(checksTotalMax) else { throw DecodeError.invalid("check count \(children)") }
                message = .checksDigest(children: children, digest: try r.readRaw(count: 16, "checks digest"))
            case 11:
                let pageType = try r.readByte("paged message type")
                guard [3, 5, 9].contains(pageType) else { throw DecodeError.invalid("a part of message type \(pageType)") }
                message = .part(try decode(type: pageType, payload: Array(payload[r.offset...])))
                r = ByteReader([])
            case 7:
                let code = try readU16(&r, "error code")
                message = .error(code: code, message: try r.readString(maxBytes: errorMessageBytesMax, "error message"))
            default:
                throw ProtocolError.unknownMessageType(type)
            }
            try r.expectEnd()
            return message
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw .malformed("\(error)")
        }
    }

    /// A `checks` payload: count, then per child (ascending) id, count, sum (i128 BE) and id
    /// hash. Also what a `checksDigest` hashes, for any number of children (pages or not).
    static func write(checks: [ChildCheck], _ w: inout ByteWriter) {
        w.write(varint: UInt64(checks.count))
        // Usually sorted already (``SyncSession`` keeps its checks sorted): no sorted copy then.
        let ordered = zip(checks, checks.dropFirst()).allSatisfy { $0.child < $1.child }
            ? checks : checks.sorted(by: { $0.child < $1.child })
        for c in ordered {
            w.write(id: c.child)
            w.write(varint: c.count)
            w.write(bigEndian: UInt64(truncatingIfNeeded: c.sumCents >> 64))
            w.write(bigEndian: UInt64(truncatingIfNeeded: c.sumCents))
            w.write(raw: c.idHash)
        }
    }

    /// Canonical origin list: count, then origins (u64 BE) strictly ascending.
    static func write(origins: [ReplicaID], _ w: inout ByteWriter) {
        let sorted = Set(origins).sorted()
        precondition(sorted.count <= vectorEntriesMax, "origin list too large")
        w.write(varint: UInt64(sorted.count))
        for origin in sorted { w.write(bigEndian: origin.rawValue) }
    }

    static func readOrigins(_ r: inout ByteReader) throws(DecodeError) -> [ReplicaID] {
        let count = try r.readVarint("origin count")
        guard count <= UInt64(vectorEntriesMax) else { throw .invalid("origin count \(count)") }
        var origins: [ReplicaID] = []
        for _ in 0..<count {
            let origin = ReplicaID(try r.readBigEndianUInt64("origin"))
            if let last = origins.last, origin <= last { throw .invalid("origins not strictly ascending") }
            origins.append(origin)
        }
        return origins
    }

    static func write(u16: UInt16, _ w: inout ByteWriter) {
        w.write(UInt8(u16 >> 8))
        w.write(UInt8(u16 & 0xff))
    }

    static func readU16(_ r: inout ByteReader, _ what: String) throws(DecodeError) -> UInt16 {
        let hi = try r.readByte(what)
        let lo = try r.readByte(what)
        return UInt16(hi) << 8 | UInt16(lo)
    }

    /// Canonical vector: entry count, then (origin u64 BE, sequence varint) in ascending origin
    /// order, zero sequences omitted.
    static func write(vector: VersionVector, _ w: inout ByteWriter) {
        let entries = vector.filter { $0.value > 0 }.sorted { $0.key < $1.key }
        precondition(entries.count <= vectorEntriesMax, "version vector too large")
        w.write(varint: UInt64(entries.count))
        for (origin, sequence) in entries {
            w.write(bigEndian: origin.rawValue)
            w.write(varint: sequence)
        }
    }

    static func readVector(_ r: inout ByteReader) throws(DecodeError) -> VersionVector {
        let count = try r.readVarint("vector count")
        guard count <= UInt64(vectorEntriesMax) else { throw .invalid("vector count \(count)") }
        var vector: VersionVector = [:]
        var previous: UInt64?
        for _ in 0..<count {
            let origin = try r.readBigEndianUInt64("vector origin")
            if let previous, origin <= previous { throw .invalid("vector origins not strictly ascending") }
            previous = origin
            let sequence = try r.readVarint("vector sequence")
            guard sequence > 0 else { throw .invalid("vector sequence 0") }
            guard sequence <= Limits.sequenceMax else { throw .invalid("vector sequence \(sequence) above \(Limits.sequenceMax)") }
            vector[ReplicaID(origin)] = sequence
        }
        return vector
    }

    /// The frame of `.changes(changes, isLast:heads:)` built from the changes' canonical encodings
    /// (as the log holds them) and the heads ``SignedHead/sent(with:)`` picks: the same bytes,
    /// without decoding and encoding again, written straight into the frame (no separate payload
    /// array).
    static func changesFrame(encoded changes: ArraySlice<EncodedChange>, isLast: Bool) -> [UInt8] {
        let heads = SignedHead.sent(with: changes).map { head in
            (changes.firstIndex { $0.origin == head.origin && $0.sequence == head.sequence }! - changes.startIndex, head)
        }
        var countBytes = 1
        var n = UInt64(changes.count)
        while n >= 0x80 { countBytes += 1; n >>= 7 }
        let payloadCount = 1 + countBytes + changes.reduce(0) { $0 + $1.bytes.count } + headsBytes(heads)
        precondition(payloadCount + 1 <= frameBytesMax, "frame too large")
        var w = ByteWriter(capacity: frameHeaderBytes + payloadCount)
        w.write(bigEndian: UInt32(payloadCount + 1))
        w.write(UInt8(4))
        w.write(bool: isLast)
        w.write(varint: UInt64(changes.count))
        for c in changes { w.write(raw: c.bytes) }
        write(heads: heads, &w)
        precondition(w.bytes.count == frameHeaderBytes + payloadCount, "a changes frame of another size than counted")
        return w.bytes
    }

    /// The encoded size of the heads section.
    static func headsBytes(_ heads: [(Int, SignedHead)]) -> Int {
        var w = ByteWriter(capacity: 0)
        write(heads: heads, &w)
        return w.bytes.count
    }

    /// Heads: varint count, then per head the index (varint) of the batch's change at its
    /// origin and sequence (the first, when several versions are there), signature (64 bytes),
    /// choices varint count, then per choice sequence varint and version u64.
    static func write(heads: [(index: Int, head: SignedHead)], _ w: inout ByteWriter) {
        w.write(varint: UInt64(heads.count))
        for (index, head) in heads {
            w.write(varint: UInt64(index))
            w.write(raw: head.signature)
            w.write(varint: UInt64(head.choices.count))
            for choice in head.choices {
                w.write(varint: choice.sequence)
                w.write(bigEndian: choice.version)
            }
        }
    }

    /// At most one head per change of `changes`, each naming one of them, with a 64-byte
    /// signature and choices strictly ascending up to its sequence.
    static func readHeads(_ r: inout ByteReader, of changes: [Change]) throws(DecodeError) -> [SignedHead] {
        let count = try r.readVarint("head count")
        guard count <= UInt64(changes.count) else { throw DecodeError.invalid("head count \(count) for \(changes.count) changes") }
        var heads: [SignedHead] = []
        heads.reserveCapacity(Int(count))
        // A head names its change by the first index of that origin and sequence in the batch (two
        // versions of a forked change may both be in it), as `encodePayload` writes it: any other
        // index is refused, so the encoding stays canonical.
        var first: [Stamp: Int] = [:]
        if count > 0 {
            for (i, c) in changes.enumerated() where first[Stamp(c.origin, c.sequence)] == nil { first[Stamp(c.origin, c.sequence)] = i }
        }
        for _ in 0..<count {
            let index = try r.readVarint("head index")
            guard index < UInt64(changes.count) else { throw DecodeError.invalid("head index \(index) for \(changes.count) changes") }
            let change = changes[Int(index)]
            guard first[Stamp(change.origin, change.sequence)] == Int(index) else {
                throw DecodeError.invalid("head index \(index) is not the first change of its origin and sequence")
            }
            var head = SignedHead(origin: change.origin, sequence: change.sequence, signature: try r.readRaw(count: 64, "head signature"))
            let choices = try r.readVarint("head choice count")
            guard choices <= head.sequence, choices <= UInt64(r.remaining / 9) else {
                throw DecodeError.invalid("head choice count \(choices)")
            }
            var previous: UInt64 = 0
            for _ in 0..<choices {
                let choice = HeadChoice(sequence: try r.readVarint("head choice sequence"), version: try r.readBigEndianUInt64("head choice version"))
                guard choice.sequence > previous, choice.sequence <= head.sequence else {
                    throw DecodeError.invalid("head choices out of order")
                }
                previous = choice.sequence
                head.choices.append(choice)
            }
            heads.append(head)
        }
        return heads
    }
}

/// The contents of a `vector` message.
public struct VectorSummary: Equatable, Sendable {
    /// Highest contiguous sequence held per origin.
    public var vector: VersionVector
    /// The 16-byte hash chain at each of those sequences.
    public var chains: [ReplicaID: [UInt8]]
    /// Origins whose history the sender found forked in the receiver's vector.
    public var forked: [ReplicaID]

    /// Creates a summary.
    public init(vector: VersionVector, chains: [ReplicaID: [UInt8]] = [:], forked: [ReplicaID] = []) {
        self.vector = vector
        self.chains = chains
        self.forked = Set(forked).sorted()
    }
}

/// One child's check: how many applied transactions, their sum, and a hash of their ids.
public struct ChildCheck: Equatable, Sendable {
    /// The child.
    public var child: RecordID
    /// Applied transactions.
    public var count: UInt64
    /// Their sum in cents.
    public var sumCents: Int128
    /// XOR of the first 16 bytes of SHA-256 of each id.
    public var idHash: [UInt8]

    /// Creates a check.
    public init(child: RecordID, count: UInt64, sumCents: Int128, idHash: [UInt8]) {
        self.child = child
        self.count = count
        self.sumCents = sumCents
        self.idHash = idHash
    }
}

/// A change's origin and sequence, as a dictionary key.
private struct Stamp: Hashable {
    let origin: ReplicaID
    let sequence: UInt64
    init(_ origin: ReplicaID, _ sequence: UInt64) { self.origin = origin; self.sequence = sequence }
}

import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerReplica
import KidLedgerSecurity

// The payloads of the relay's messages (docs/RELAY-DESIGN.md, "Sessions"). Fixed-width integers
// are big-endian, `varint` is canonical LEB128; `opt X` is a flag byte (0 or 1) then X when 1;
// `vector` is count varint (≤ 1,024) then per entry, tags strictly ascending, tag 16 | sequence
// varint (1...2^62; 0...2^62 in `acknowledge`, where 0 forgets the stream). The decoder refuses short, trailing, padded and out-of-range input with
// ``RelaySessionError/malformed(_:)`` and never traps.
extension RelayMessage {
    /// The payload bytes (without the frame header).
    public func encodePayload() -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        switch self {
        case .hello(let lo, let hi):
            Self.write(u16: lo, &w)
            Self.write(u16: hi, &w)
        case .welcome(let version, let list, let acknowledged, let held):
            Self.write(u16: version, &w)
            w.write(bool: list != nil)
            w.write(bigEndian: list ?? 0)
            Self.write(vector: acknowledged, &w)
            Self.write(vector: held, &w)
        case .install(let signed):
            w.write(raw: signed.encoded)
        case .installed(let number):
            w.write(bigEndian: number)
        case .upload(let envelope):
            w.write(raw: envelope)
        case .uploaded(let stored):
            w.write(bool: stored)
        case .acknowledge(let vector):
            Self.write(vector: vector, zeros: true, &w)
        case .acknowledged, .mailboxFetch, .bye:
            break
        case .pendingRequest(let after, let countMax, let bytesMax):
            Self.write(header: after, &w)
            Self.write(u16: countMax, &w)
            w.write(bigEndian: bytesMax)
        case .pendingPage(let envelopes, let next):
            precondition(envelopes.count <= Self.pageEnvelopesMax, "a page above its envelope bound")
            w.write(varint: UInt64(envelopes.count))
            for envelope in envelopes { w.write(blob: envelope) }
            Self.write(header: next, &w)
        case .mailboxPost(let post):
            w.write(raw: post.recipient.bytes)
            w.write(bigEndian: post.epoch)
            w.write(raw: post.box)
        case .mailboxPosted(let filed):
            w.write(bool: filed)
        case .mailbox(let boxes):
            Self.write(boxes: boxes, &w)
        case .ownerMailbox(let statement, let boxes):
            w.write(raw: statement.encoded)
            Self.write(boxes: boxes, &w)
        case .statusRequest(let after):
            Self.write(key: after, &w)
        case .statusPage(let members, let next):
            precondition(members.count <= Self.statusMembersMax, "a status page above its bound")
            w.write(varint: UInt64(members.count))
            for report in members {
                let status = report.status
                w.write(raw: status.key.bytes)
                w.write(bigEndian: status.quotaBytes)
                w.write(bigEndian: status.usedBytes)
                w.write(bool: status.lastSyncMilliseconds != nil)
                w.write(bigEndian: UInt64(bitPattern: status.lastSyncMilliseconds ?? 0))
                Self.write(vector: report.acknowledged, &w)
            }
            Self.write(key: next, &w)
        case .refused(let code, let message), .error(let code, let message):
            Self.write(u16: code, &w)
            var text = message
            while text.utf8.count > Self.textBytesMax { text.removeLast() }
            w.write(string: text)
        }
        return w.bytes
    }

    /// The next whole message in `decoder` (frames of at most `limit` bytes), or nil when more
    /// bytes are needed.
    /// - Throws: ``RelaySessionError/malformed(_:)`` for a bad frame or message.
    static func next(from decoder: inout FrameDecoder, limit: Int = frameBytesMax) throws(RelaySessionError) -> RelayMessage? {
        let frame: (type: UInt8, payload: [UInt8])?
        do { frame = try decoder.next(limit: limit) } catch { throw RelaySessionError(error) }
        guard let frame else { return nil }
        return try decode(type: frame.type, payload: frame.payload)
    }

    // long-function: one case per message type of the wire format: a table.
    /// Decodes and checks one message.
    /// - Throws: ``RelaySessionError/malformed(_:)`` for an unknown type or a payload that is not
    ///   exactly one canonical message within its bounds.
    public static func decode(type: UInt8, payload: [UInt8]) throws(RelaySessionError) -> RelayMessage {
        var r = ByteReader(payload)
        do throws(DecodeError) {
            let message: RelayMessage
            switch type {
            case 1:
                let lo = try readU16(&r, "hello version min"), hi = try readU16(&r, "hello version max")
                guard lo >= 1, lo <= hi else { throw .invalid("hello version range \(lo)...\(hi)") }
                message = .hello(versionMin: lo, versionMax: hi)
            case 2:
                let version = try readU16(&r, "welcome version")
                let hasList = try r.readBool("welcome list flag")
                let number = try r.readBigEndianUInt64("welcome list number")
                guard hasList || number == 0 else { throw .invalid("a list number without its flag") }
                message = .welcome(version: version, accessList: hasList ? number : nil,
                                   acknowledged: try readVector(&r), held: try readVector(&r))
            case 3:
                message = .install(try SignedRelayAccessList.read(&r))
            case 4:
                message = .installed(number: try r.readBigEndianUInt64("installed number"))
            case 5:
                do { _ = try RelayEnvelope.header(of: payload) } catch { throw .invalid("uploaded envelope (\(error))") }
                message = .upload(try r.readRaw(count: payload.count, "envelope"))
            case 6:
                message = .uploaded(stored: try r.readBool("uploaded flag"))
            case 7:
                message = .acknowledge(try readVector(&r, zeros: true))
            case 8, 13, 19:
                message = type == 8 ? .acknowledged : type == 13 ? .mailboxFetch : .bye
            case 9:
                let after = try readHeader(&r)
                let count = try readU16(&r, "page count")
                let bytes = try r.readBigEndianUInt32("page bytes")
                guard count >= 1, Int(count) <= pageEnvelopesMax else { throw .invalid("page count \(count)") }
                guard bytes >= 1, Int(bytes) <= pageBytesMax else { throw .invalid("page bytes \(bytes)") }
                message = .pendingRequest(after: after, countMax: count, bytesMax: bytes)
            case 10:
                message = try readPage(&r)
            case 11:
                let recipient = RelayMemberKey(bytes: try r.readRaw(count: RelayMemberKey.byteCount, "recipient"))!
                let epoch = try r.readBigEndianUInt32("box epoch")
                message = .mailboxPost(RelayMailboxPost(recipient: recipient, epoch: epoch,
                                                        box: try r.readRaw(count: EpochRecord.boxBytes, "box")))
            case 12:
                message = .mailboxPosted(filed: try r.readBool("posted flag"))
            case 14:
                message = .mailbox(try readBoxes(&r))
            case 20:
                let statement = try RelayOwnerStatement.read(&r)
                message = .ownerMailbox(statement: statement, boxes: try readBoxes(&r))
            case 15:
                message = .statusRequest(after: try readKey(&r))
            case 16:
                message = try readStatus(&r)
            case 17, 18:
                let code = try readU16(&r, "code")
                let text = try r.readString(maxBytes: textBytesMax, "message")
                message = type == 17 ? .refused(code: code, message: text) : .error(code: code, message: text)
            default:
                throw DecodeError.invalid("message type \(type)")
            }
            try r.expectEnd()
            return message
        } catch {
            throw .malformed(error.description)
        }
    }

    private static func write(boxes: [RelayMailboxBox], _ w: inout ByteWriter) {
        precondition(boxes.count <= RelayStore.mailboxBoxesMax, "a mailbox above its bound")
        w.write(varint: UInt64(boxes.count))
        for box in boxes {
            w.write(bigEndian: box.epoch)
            w.write(raw: box.box)
        }
    }

    private static func readBoxes(_ r: inout ByteReader) throws(DecodeError) -> [RelayMailboxBox] {
        let count = try r.readVarint("box count")
        guard count <= UInt64(RelayStore.mailboxBoxesMax) else { throw .invalid("box count \(count)") }
        var boxes: [RelayMailboxBox] = []
        for _ in 0..<count {
            let epoch = try r.readBigEndianUInt32("box epoch")
            if let last = boxes.last, epoch <= last.epoch { throw .invalid("box epochs not strictly ascending") }
            boxes.append(RelayMailboxBox(epoch: epoch, box: try r.readRaw(count: EpochRecord.boxBytes, "box")))
        }
        return boxes
    }

    private static func readPage(_ r: inout ByteReader) throws(DecodeError) -> RelayMessage {
        let count = try r.readVarint("envelope count")
        guard count <= UInt64(pageEnvelopesMax) else { throw .invalid("envelope count \(count)") }
        var envelopes: [[UInt8]] = []
        var bytes = 0
        for _ in 0..<count {
            let envelope = try r.readBlob(maxCount: RelayEnvelope.bytesMax, "envelope")
            do { _ = try RelayEnvelope.header(of: envelope) } catch { throw .invalid("envelope in a page (\(error))") }
            bytes += envelope.count
            envelopes.append(envelope)
        }
        guard envelopes.count <= 1 || bytes <= pageBytesMax else { throw .invalid("a page of \(bytes) bytes") }
        return .pendingPage(envelopes: envelopes, next: try readHeader(&r))
    }

    private static func readStatus(_ r: inout ByteReader) throws(DecodeError) -> RelayMessage {
        let count = try r.readVarint("member count")
        guard count <= UInt64(statusMembersMax) else { throw .invalid("member count \(count)") }
        var members: [RelayMemberReport] = []
        for _ in 0..<count {
            let key = RelayMemberKey(bytes: try r.readRaw(count: RelayMemberKey.byteCount, "member key"))!
            if let last = members.last, !(last.status.key < key) { throw .invalid("member keys not strictly ascending") }
            let quota = try r.readBigEndianUInt64("quota"), used = try r.readBigEndianUInt64("used bytes")
            guard quota <= RelayAccessList.quotaBytesMax, used <= RelayAccessList.quotaBytesMax else { throw .invalid("quota or charge above 1 TiB") }
            let hasSync = try r.readBool("sync flag")
            let time = Int64(bitPattern: try r.readBigEndianUInt64("last sync"))
            guard hasSync || time == 0 else { throw .invalid("a sync time without its flag") }
            let status = RelayMemberStatus(key: key, quotaBytes: quota, usedBytes: used, lastSyncMilliseconds: hasSync ? time : nil)
            members.append(RelayMemberReport(status: status, acknowledged: try readVector(&r)))
        }
        return .statusPage(members: members, next: try readKey(&r))
    }

    // MARK: Fields

    static func write(u16: UInt16, _ w: inout ByteWriter) {
        w.write(UInt8(u16 >> 8))
        w.write(UInt8(u16 & 0xff))
    }

    static func readU16(_ r: inout ByteReader, _ what: String) throws(DecodeError) -> UInt16 {
        UInt16(try r.readByte(what)) << 8 | UInt16(try r.readByte(what))
    }

    /// A vector; `zeros`: sequences of 0 too (an acknowledgement's "forget this stream").
    static func write(vector: [RelayStreamTag: UInt64], zeros: Bool = false, _ w: inout ByteWriter) {
        precondition(vector.count <= vectorEntriesMax, "a relay vector above \(vectorEntriesMax) entries")
        w.write(varint: UInt64(vector.count))
        for (tag, sequence) in vector.sorted(by: { KeyBytes.compare($0.key.bytes, $1.key.bytes) < 0 }) {
            precondition(sequence >= (zeros ? 0 : 1) && sequence <= Limits.sequenceMax, "a relay vector sequence out of range")
            w.write(raw: tag.bytes)
            w.write(varint: sequence)
        }
    }

    static func readVector(_ r: inout ByteReader, zeros: Bool = false) throws(DecodeError) -> [RelayStreamTag: UInt64] {
        let count = try r.readVarint("vector count")
        guard count <= UInt64(vectorEntriesMax) else { throw .invalid("vector count \(count)") }
        var vector: [RelayStreamTag: UInt64] = [:]
        var previous: [UInt8]?
        for _ in 0..<count {
            let tag = try r.readRaw(count: RelayStreamTag.byteCount, "stream tag")
            if let previous, KeyBytes.compare(previous, tag) >= 0 { throw .invalid("vector tags not strictly ascending") }
            previous = tag
            let sequence = try r.readVarint("vector sequence")
            guard sequence >= (zeros ? 0 : 1), sequence <= Limits.sequenceMax else { throw .invalid("vector sequence \(sequence)") }
            vector[RelayStreamTag(bytes: tag)!] = sequence
        }
        return vector
    }

    static func write(header: RelayEnvelopeHeader?, _ w: inout ByteWriter) {
        w.write(bool: header != nil)
        if let header { w.write(raw: header.encoded) }
    }

    static func readHeader(_ r: inout ByteReader) throws(DecodeError) -> RelayEnvelopeHeader? {
        guard try r.readBool("header flag") else { return nil }
        let bytes = try r.readRaw(count: RelayEnvelopeHeader.byteCount, "header")
        do { return try RelayEnvelopeHeader.decode(prefixOf: bytes) } catch { throw .invalid("header (\(error))") }
    }

    static func write(key: RelayMemberKey?, _ w: inout ByteWriter) {
        w.write(bool: key != nil)
        if let key { w.write(raw: key.bytes) }
    }

    static func readKey(_ r: inout ByteReader) throws(DecodeError) -> RelayMemberKey? {
        guard try r.readBool("key flag") else { return nil }
        return RelayMemberKey(bytes: try r.readRaw(count: RelayMemberKey.byteCount, "member key"))
    }
}

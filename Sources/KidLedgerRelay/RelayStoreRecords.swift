import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity

/// The relay store's tables and the codecs of what it keeps in them (docs/RELAY-DESIGN.md,
/// "The relay's store"). Every decoder checks lengths, version bytes and ranges and throws
/// ``RelayStoreError/damaged(table:what:)``; none traps.
///
/// ```
/// relay.meta       [1]                       → access list (RelayAccessList.encoded)
///                  [2]                       → collection cursor: the last header visited (37)
/// relay.envelopes  header 37                 → version u8 = 1 | uploader key 32 | envelope after its header
/// relay.usage      uploader key 32           → version u8 = 1 | bytes charged u64
/// relay.members    member key 32             → version u8 = 1 | streams u32 | has sync u8 | last sync ms i64
/// relay.vectors    member key 32 | tag 16    → sequence u64 (1...2^62)
/// relay.mailbox    member key 32 | epoch u32 → box 144
/// ```
enum RelayTables {
    static let meta = Table("relay.meta")
    static let envelopes = Table("relay.envelopes")
    static let usage = Table("relay.usage")
    static let members = Table("relay.members")
    static let vectors = Table("relay.vectors")
    static let mailbox = Table("relay.mailbox")

    static let all = [meta, envelopes, usage, members, vectors, mailbox]

    static let accessListKey: [UInt8] = [1]
    static let collectCursorKey: [UInt8] = [2]
    static let recordVersion: UInt8 = 1

    /// The scan prefix of one stream's envelopes (the header's version byte and tag).
    static func streamPrefix(_ stream: RelayStreamTag) -> [UInt8] { [RelayEnvelopeHeader.version] + stream.bytes }

    static func damaged(_ table: Table, _ what: String) -> RelayStoreError { .damaged(table: table.name, what: what) }
}

/// One stored envelope: who it is charged to and its bytes.
struct StoredEnvelope {
    let header: RelayEnvelopeHeader
    let uploader: RelayMemberKey
    let envelope: [UInt8]

    static func value(uploader: RelayMemberKey, envelope: [UInt8]) -> [UInt8] {
        [RelayTables.recordVersion] + uploader.bytes + envelope[RelayEnvelopeHeader.byteCount...]
    }

    /// Decodes an entry of `relay.envelopes`: the key must be a valid header and the value the
    /// envelope's body at a possible size.
    static func decode(key: [UInt8], value: [UInt8]) throws(RelayStoreError) -> StoredEnvelope {
        let table = RelayTables.envelopes
        guard key.count == RelayEnvelopeHeader.byteCount else { throw RelayTables.damaged(table, "a key of \(key.count) bytes") }
        let header: RelayEnvelopeHeader
        do { header = try RelayEnvelopeHeader.decode(prefixOf: key) } catch { throw RelayTables.damaged(table, "\(error)") }
        let bodyMin = RelayEnvelope.overheadBytes - RelayEnvelopeHeader.byteCount + 1
        let bodyMax = RelayEnvelope.bytesMax - RelayEnvelopeHeader.byteCount
        let body = value.count - 1 - RelayMemberKey.byteCount
        guard value.first == RelayTables.recordVersion else { throw RelayTables.damaged(table, "record version") }
        guard body >= bodyMin, body <= bodyMax else { throw RelayTables.damaged(table, "an envelope body of \(body) bytes") }
        // 32 bytes by construction.
        let uploader = RelayMemberKey(bytes: Array(value[1...RelayMemberKey.byteCount]))!
        return StoredEnvelope(header: header, uploader: uploader, envelope: key + value[(1 + RelayMemberKey.byteCount)...])
    }
}

/// What the relay keeps per member key besides its vector entries.
struct MemberRecord: Equatable {
    var streams: UInt32 = 0
    var lastSyncMilliseconds: Int64?

    var encoded: [UInt8] {
        var w = ByteWriter(capacity: 14)
        w.write(RelayTables.recordVersion)
        w.write(bigEndian: streams)
        w.write(bool: lastSyncMilliseconds != nil)
        w.write(bigEndian: UInt64(bitPattern: lastSyncMilliseconds ?? 0))
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) throws(RelayStoreError) -> MemberRecord {
        do throws(DecodeError) {
            var r = ByteReader(bytes)
            guard try r.readByte("version") == RelayTables.recordVersion else { throw DecodeError.invalid("record version") }
            let streams = try r.readBigEndianUInt32("stream count")
            guard streams <= RelayStore.streamsPerMemberMax else { throw DecodeError.invalid("stream count \(streams)") }
            let hasSync = try r.readBool("sync flag")
            let time = Int64(bitPattern: try r.readBigEndianUInt64("last sync"))
            guard hasSync || time == 0 else { throw DecodeError.invalid("last sync without its flag") }
            try r.expectEnd()
            return MemberRecord(streams: streams, lastSyncMilliseconds: hasSync ? time : nil)
        } catch {
            throw RelayTables.damaged(RelayTables.members, error.description)
        }
    }
}

/// Fixed-width codecs of the small values.
enum RelayValues {
    static func usage(_ bytes: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: 9)
        w.write(RelayTables.recordVersion)
        w.write(bigEndian: bytes)
        return w.bytes
    }

    static func decodeUsage(_ value: [UInt8]) throws(RelayStoreError) -> UInt64 {
        guard value.count == 9, value[0] == RelayTables.recordVersion else { throw RelayTables.damaged(RelayTables.usage, "a usage record of \(value.count) bytes") }
        let bytes = value[1...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard bytes <= RelayAccessList.quotaBytesMax else { throw RelayTables.damaged(RelayTables.usage, "usage \(bytes)") }
        return bytes
    }

    static func sequence(_ value: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: 8)
        w.write(bigEndian: value)
        return w.bytes
    }

    static func decodeSequence(_ value: [UInt8]) throws(RelayStoreError) -> UInt64 {
        guard value.count == 8 else { throw RelayTables.damaged(RelayTables.vectors, "a sequence of \(value.count) bytes") }
        let sequence = value.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard sequence >= 1, sequence <= Limits.sequenceMax else { throw RelayTables.damaged(RelayTables.vectors, "sequence \(sequence)") }
        return sequence
    }

    static func vectorKey(_ member: RelayMemberKey, _ stream: RelayStreamTag) -> [UInt8] { member.bytes + stream.bytes }

    static func mailboxKey(_ member: RelayMemberKey, _ epoch: UInt32) -> [UInt8] {
        var w = ByteWriter(capacity: 36)
        w.write(raw: member.bytes)
        w.write(bigEndian: epoch)
        return w.bytes
    }
}

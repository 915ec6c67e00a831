/// Canonical binary encoding of records, operations and changes.
///
/// The same bytes are stored in LMDB, sent on the wire and hashed into the state digest, so the
/// encoding is canonical: one value has exactly one encoding, and decoding re-validates every
/// field (a hostile peer's bytes go through the same checks as user input).
public enum RecordCodec {
    enum OperationTag: UInt8 {
        case createHousehold = 1, createChild = 2, setField = 3, addTransaction = 4, grant = 5, revoke = 6, claim = 7, transferOwner = 8
        /// An owner transfer naming the exact changes it saw (``OwnerTransfer/seenChanges``,
        /// issue 39). Needs protocol 4: an older peer cannot decode it.
        case transferOwnerSeenChanges = 9
        /// The relay's membership operations (issue 44). Need protocol 5.
        case relayGrant = 10, relayRevoke = 11, relayEpoch = 12, relayMemberKey = 13
    }

    enum ValueTag: UInt8 {
        case text = 1, flag = 2, integer = 3
    }

    // MARK: Field values

    /// Appends a register value.
    public static func encode(_ value: FieldValue, into w: inout ByteWriter) {
        switch value {
        case .text(let s):
            w.write(ValueTag.text.rawValue)
            w.write(string: s)
        case .flag(let b):
            w.write(ValueTag.flag.rawValue)
            w.write(bool: b)
        case .integer(let i):
            w.write(ValueTag.integer.rawValue)
            w.write(zigzag: i)
        }
    }

    /// The canonical bytes of a register value (its last tie-break).
    public static func encode(_ value: FieldValue) -> [UInt8] {
        var w = ByteWriter(capacity: 16)
        encode(value, into: &w)
        return w.bytes
    }

    /// Reads a register value.
    public static func decodeValue(_ r: inout ByteReader) throws(DecodeError) -> FieldValue {
        switch try r.readByte("value tag") {
        case ValueTag.text.rawValue: return .text(try r.readString(maxBytes: Limits.nameBytesMax, "name"))
        case ValueTag.flag.rawValue: return .flag(try r.readBool("flag value"))
        case ValueTag.integer.rawValue: return .integer(try r.readZigzag("integer value"))
        default: throw .invalid("value tag")
        }
    }

    // MARK: Stamps

    /// Appends a register stamp: HLC milliseconds (zigzag), counter (varint), origin (u64 BE).
    public static func encode(_ stamp: Stamp, into w: inout ByteWriter) {
        w.write(zigzag: stamp.hlc.millis)
        w.write(varint: UInt64(stamp.hlc.counter))
        w.write(bigEndian: stamp.origin.rawValue)
    }

    /// Reads a register stamp.
    public static func decodeStamp(_ r: inout ByteReader) throws(DecodeError) -> Stamp {
        let millis = try r.readZigzag("stamp")
        guard millis >= 0, millis <= HLC.millisMax else { throw .invalid("stamp time") }
        let counter = try r.readVarint("stamp counter")
        guard counter <= UInt64(UInt32.max) else { throw .invalid("stamp counter") }
        return Stamp(hlc: HLC(millis: millis, counter: UInt32(counter)), origin: ReplicaID(try r.readBigEndianUInt64("stamp origin")))
    }

    // MARK: Transactions

    /// Appends a transaction.
    public static func encode(_ t: LedgerTransaction, into w: inout ByteWriter) {
        w.write(id: t.id)
        w.write(id: t.childID)
        w.write(zigzag: t.amountCents)
        w.write(zigzag: t.createdAtMillis)
        w.write(string: t.note)
        w.write(string: t.source)
        if let reverses = t.reverses {
            w.write(1)
            w.write(id: reverses)
        } else {
            w.write(0)
        }
    }

    /// The canonical bytes of a transaction.
    public static func encode(_ t: LedgerTransaction) -> [UInt8] {
        var w = ByteWriter(capacity: 64 + t.note.utf8.count)
        encode(t, into: &w)
        return w.bytes
    }

    /// Reads and validates a transaction.
    public static func decodeTransaction(_ r: inout ByteReader) throws(DecodeError) -> LedgerTransaction {
        let id = try r.readID("transaction id")
        let child = try r.readID("child id")
        let amount = try r.readZigzag("amount")
        let created = try r.readZigzag("createdAt")
        let note = try r.readString(maxBytes: Limits.noteBytesMax, "note")
        let source = try r.readString(maxBytes: Limits.sourceBytesMax, "source")
        let reverses: RecordID? = try r.readBool("reverses flag") ? try r.readID("reversed id") : nil
        let t = LedgerTransaction(id: id, childID: child, amountCents: amount, createdAtMillis: created,
                                  note: note, source: source, reverses: reverses)
        if let problem = Validation.problem(with: t) { throw .invalid(problem) }
        return t
    }

    /// Decodes a whole buffer as one transaction.
    public static func decodeTransaction(_ bytes: [UInt8]) throws(DecodeError) -> LedgerTransaction {
        var r = ByteReader(bytes)
        let t = try decodeTransaction(&r)
        try r.expectEnd()
        return t
    }

    // MARK: Operations

    /// Appends an operation.
    public static func encode(_ op: Operation, into w: inout ByteWriter) {
        switch op {
        case .createHousehold(let h):
            w.write(OperationTag.createHousehold.rawValue)
            w.write(raw: encodeRecord(h))
        case .createChild(let c):
            w.write(OperationTag.createChild.rawValue)
            w.write(id: c.id)
            w.write(zigzag: c.createdAtMillis)
        case .setField(let entity, let field, let value, let base):
            w.write(OperationTag.setField.rawValue)
            w.write(id: entity)
            w.write(field.rawValue)
            encode(value, into: &w)
            if let base {
                w.write(1)
                encode(base, into: &w)
            } else {
                w.write(0)
            }
        case .addTransaction(let t):
            w.write(OperationTag.addTransaction.rawValue)
            encode(t, into: &w)
        case .grant(let g):
            w.write(OperationTag.grant.rawValue)
            w.write(blob: g.member)
            w.write(string: g.name)
            w.write(zigzag: g.grantedAtMillis)
            w.write(blob: g.signature)
        case .revoke(let r):
            w.write(OperationTag.revoke.rawValue)
            w.write(blob: r.member)
            w.write(zigzag: r.revokedAtMillis)
            encode(seen: r.seen, into: &w)
            w.write(blob: r.signature)
        case .claim(let c):
            w.write(OperationTag.claim.rawValue)
            w.write(bigEndian: c.origin.rawValue)
            w.write(blob: c.member)
            w.write(bigEndian: c.nonce)
            w.write(blob: c.signature)
        case .transferOwner(let t):
            w.write(t.seenChanges == nil ? OperationTag.transferOwner.rawValue : OperationTag.transferOwnerSeenChanges.rawValue)
            w.write(blob: t.newOwner)
            w.write(varint: t.epoch)
            w.write(zigzag: t.transferredAtMillis)
            encode(seen: t.seen, into: &w)
            if let changes = t.seenChanges { encode(seenChanges: changes, into: &w) }
            w.write(blob: t.signature)
        case .relayGrant(let g):
            w.write(OperationTag.relayGrant.rawValue)
            encodeFields(of: g, into: &w)
            w.write(blob: g.signature)
        case .relayRevoke(let r):
            w.write(OperationTag.relayRevoke.rawValue)
            w.write(blob: r.relay)
            w.write(zigzag: r.revokedAtMillis)
            w.write(blob: r.signature)
        case .relayEpoch(let e):
            w.write(OperationTag.relayEpoch.rawValue)
            w.write(blob: e.record)
            w.write(blob: e.signature)
        case .relayMemberKey(let k):
            w.write(OperationTag.relayMemberKey.rawValue)
            w.write(blob: k.relay)
            w.write(blob: k.key)
        }
    }

    /// A relay grant's fields before its signature (what the signature covers after the domain
    /// and the household): relay key blob, address count varint and strings, stream key blob, time.
    static func encodeFields(of g: RelayGrant, into w: inout ByteWriter) {
        w.write(blob: g.relay)
        w.write(varint: UInt64(g.addresses.count))
        for address in g.addresses { w.write(string: address) }
        w.write(blob: g.streamKey)
        w.write(zigzag: g.grantedAtMillis)
    }

    /// The canonical bytes of one operation.
    public static func encodeOperation(_ op: Operation) -> [UInt8] {
        var w = ByteWriter(capacity: 96)
        encode(op, into: &w)
        return w.bytes
    }

    /// Reads and validates an operation.
    public static func decodeOperation(_ r: inout ByteReader) throws(DecodeError) -> Operation {
        switch try r.readByte("operation tag") {
        case OperationTag.createHousehold.rawValue:
            return .createHousehold(try decodeHousehold(&r))
        case OperationTag.createChild.rawValue:
            return .createChild(ChildRecord(id: try r.readID("child id"), createdAtMillis: try r.readZigzag("createdAt")))
        case OperationTag.setField.rawValue:
            let entity = try r.readID("entity id")
            guard let field = Field(rawValue: try r.readByte("field")) else { throw .invalid("field") }
            let value = try decodeValue(&r)
            guard value.fits(field) else { throw .invalid("value for \(field)") }
            let base: Stamp? = try r.readBool("base flag") ? try decodeStamp(&r) : nil
            return .setField(entity: entity, field: field, value: value, base: base)
        case OperationTag.addTransaction.rawValue:
            return .addTransaction(try decodeTransaction(&r))
        case OperationTag.grant.rawValue:
            let member = try readKey(&r, "grant member")
            let name = try r.readString(maxBytes: Limits.nameBytesMax, "grant name")
            guard Validation.nameProblem(name, what: "grant name", bytesMax: Limits.nameBytesMax) == nil else { throw .invalid("grant name") }
            let at = try r.readZigzag("grant time")
            return .grant(MemberGrant(member: member, name: name, grantedAtMillis: at, signature: try readSignature(&r)))
        case OperationTag.revoke.rawValue:
            let member = try readKey(&r, "revoked member")
            let at = try r.readZigzag("revocation time")
            let seen = try decodeSeen(&r)
            return .revoke(MemberRevocation(member: member, revokedAtMillis: at, seen: seen, signature: try readSignature(&r)))
        case OperationTag.claim.rawValue:
            let origin = ReplicaID(try r.readBigEndianUInt64("claimed origin"))
            let member = try readKey(&r, "claiming member")
            let nonce = try r.readBigEndianUInt64("claim nonce")
            return .claim(OriginClaim(origin: origin, member: member, nonce: nonce, signature: try readSignature(&r)))
        case let tag where tag == OperationTag.transferOwner.rawValue || tag == OperationTag.transferOwnerSeenChanges.rawValue:
            let newOwner = try readKey(&r, "new owner")
            let epoch = try r.readVarint("transfer epoch")
            guard epoch >= 1 else { throw .invalid("transfer epoch 0") }
            let at = try r.readZigzag("transfer time")
            let seen = try decodeSeen(&r)
            let changes = tag == OperationTag.transferOwnerSeenChanges.rawValue ? try decodeSeenChanges(&r) : nil
            return .transferOwner(OwnerTransfer(newOwner: newOwner, epoch: epoch, transferredAtMillis: at, seen: seen,
                                                seenChanges: changes, signature: try readSignature(&r)))
        case OperationTag.relayGrant.rawValue:
            let relay = try readKey(&r, "relay key")
            let count = try r.readVarint("relay address count")
            guard count <= UInt64(Limits.relayAddressesMax) else { throw .invalid("relay address count") }
            var addresses: [String] = []
            for _ in 0..<count { addresses.append(try r.readString(maxBytes: Limits.relayAddressBytesMax, "relay address")) }
            if let problem = RelayAddress.listProblem(addresses) { throw .invalid(problem) }
            let stream = try readKey(&r, "relay stream key")
            let at = try r.readZigzag("relay grant time")
            return .relayGrant(RelayGrant(relay: relay, addresses: addresses, streamKey: stream, grantedAtMillis: at,
                                          signature: try readSignature(&r)))
        case OperationTag.relayRevoke.rawValue:
            let relay = try readKey(&r, "revoked relay key")
            let at = try r.readZigzag("relay revocation time")
            return .relayRevoke(RelayRevocation(relay: relay, revokedAtMillis: at, signature: try readSignature(&r)))
        case OperationTag.relayEpoch.rawValue:
            let record = try r.readBlob(maxCount: Limits.relayEpochRecordBytesMax, "relay epoch record")
            guard !record.isEmpty else { throw .invalid("relay epoch record empty") }
            return .relayEpoch(RelayEpoch(record: record, signature: try readSignature(&r)))
        case OperationTag.relayMemberKey.rawValue:
            let relay = try readKey(&r, "relay key")
            return .relayMemberKey(MemberRelayKey(relay: relay, key: try readKey(&r, "member relay key")))
        default:
            throw .invalid("operation tag")
        }
    }

    // MARK: Membership

    static func readKey(_ r: inout ByteReader, _ what: String) throws(DecodeError) -> [UInt8] {
        let key = try r.readBlob(maxCount: Membership.keyBytes, what)
        guard key.count == Membership.keyBytes else { throw .invalid(what) }
        return key
    }

    static func readSignature(_ r: inout ByteReader) throws(DecodeError) -> [UInt8] {
        let signature = try r.readBlob(maxCount: Membership.signatureBytes, "signature")
        guard signature.count == Membership.signatureBytes else { throw .invalid("signature length") }
        return signature
    }

    /// Appends a version vector: count, then (origin u64, sequence varint) ascending by origin.
    public static func encode(seen: [ReplicaID: UInt64], into w: inout ByteWriter) {
        let entries = seen.filter { $0.value > 0 }.sorted { $0.key < $1.key }
        w.write(varint: UInt64(entries.count))
        for (origin, sequence) in entries {
            w.write(bigEndian: origin.rawValue)
            w.write(varint: sequence)
        }
    }

    /// Appends an owner transfer's ``OwnerTransfer/seenChanges``: count varint, then each
    /// 24-byte entry (the caller keeps them ascending and unique).
    public static func encode(seenChanges: [[UInt8]], into w: inout ByteWriter) {
        w.write(varint: UInt64(seenChanges.count))
        for entry in seenChanges { w.write(raw: entry) }
    }

    /// Reads what ``encode(seenChanges:into:)`` writes: at most ``Limits/cutEntriesMax``
    /// entries of ``Membership/seenChangeBytes``, strictly ascending.
    static func decodeSeenChanges(_ r: inout ByteReader) throws(DecodeError) -> [[UInt8]] {
        let count = try r.readVarint("seen changes count")
        guard count <= UInt64(Limits.cutEntriesMax) else { throw .invalid("seen changes count") }
        var changes: [[UInt8]] = []
        changes.reserveCapacity(Int(count))
        for _ in 0..<count {
            let entry = try r.readRaw(count: Membership.seenChangeBytes, "seen change")
            if let previous = changes.last, !previous.lexicographicallyPrecedes(entry) { throw .invalid("seen changes not ascending") }
            changes.append(entry)
        }
        return changes
    }

    /// Reads what ``encode(seen:into:)`` writes (at most ``Limits/cutEntriesMax`` entries, strictly ascending).
    public static func decodeSeen(_ r: inout ByteReader) throws(DecodeError) -> [ReplicaID: UInt64] {
        let count = try r.readVarint("vector count")
        guard count <= UInt64(Limits.cutEntriesMax) else { throw .invalid("vector count") }
        var seen: [ReplicaID: UInt64] = [:]
        var previous: UInt64?
        for _ in 0..<count {
            let origin = try r.readBigEndianUInt64("vector origin")
            if let previous, origin <= previous { throw .invalid("vector origins not ascending") }
            previous = origin
            let sequence = try r.readVarint("vector sequence")
            guard sequence > 0 else { throw .invalid("vector sequence 0") }
            seen[ReplicaID(origin)] = sequence
        }
        return seen
    }

    // MARK: Changes

    /// Appends a change.
    public static func encode(_ c: Change, into w: inout ByteWriter) {
        w.write(bigEndian: c.origin.rawValue)
        w.write(varint: c.sequence)
        w.write(zigzag: c.hlc.millis)
        w.write(varint: UInt64(c.hlc.counter))
        w.write(varint: UInt64(c.operations.count))
        for op in c.operations { encode(op, into: &w) }
    }

    /// The canonical bytes of a change.
    public static func encode(_ c: Change) -> [UInt8] {
        var w = ByteWriter(capacity: 32 + 80 * c.operations.count)
        encode(c, into: &w)
        return w.bytes
    }

    /// `encode(t)` when `c` is a change of one operation that adds transaction `t` and `encoded`
    /// is `encode(c)`; nil for any other change. That operation ends the change's bytes, after
    /// the header and the operation's tag, so the transaction's bytes are copied from there
    /// instead of encoded again (a received transaction's stored record).
    public static func soleTransaction(of c: Change, encoded: [UInt8]) -> [UInt8]? {
        guard c.operations.count == 1, case .addTransaction = c.operations[0] else { return nil }
        // What `encode(c)` writes before the operation (origin, sequence, clock, operation
        // count), then the tag.
        let start = 8 + ByteWriter.varintCount(c.sequence) + ByteWriter.zigzagCount(c.hlc.millis)
            + ByteWriter.varintCount(UInt64(c.hlc.counter)) + ByteWriter.varintCount(1) + 1
        guard start <= encoded.count else { return nil }
        return Array(encoded[start...])
    }

    /// Reads and validates a change.
    public static func decodeChange(_ r: inout ByteReader) throws(DecodeError) -> Change {
        let origin = ReplicaID(try r.readBigEndianUInt64("origin"))
        let sequence = try r.readVarint("sequence")
        guard sequence >= 1 else { throw .invalid("sequence 0") }
        guard sequence <= Limits.sequenceMax else { throw .invalid("sequence \(sequence) above \(Limits.sequenceMax)") }
        let millis = try r.readZigzag("hlc")
        guard millis >= 0, millis <= HLC.millisMax else { throw .invalid("hlc time \(millis) out of range") }
        let counter = try r.readVarint("hlc counter")
        guard counter <= UInt64(UInt32.max) else { throw .invalid("hlc counter") }
        let count = try r.readVarint("operation count")
        guard count >= 1, count <= UInt64(Limits.operationsPerChangeMax) else { throw .invalid("operation count \(count)") }
        var ops: [Operation] = []
        ops.reserveCapacity(Int(count))
        for _ in 0..<count { ops.append(try decodeOperation(&r)) }
        return Change(origin: origin, sequence: sequence, hlc: HLC(millis: millis, counter: UInt32(counter)), operations: ops)
    }

    /// Decodes a whole buffer as one change.
    public static func decodeChange(_ bytes: [UInt8]) throws(DecodeError) -> Change {
        var r = ByteReader(bytes)
        let c = try decodeChange(&r)
        try r.expectEnd()
        return c
    }
}

/// Domain checks shared by user input and decoded records.
public enum Validation {
    /// The earliest creation time a record may carry: 0000-01-01T00:00:00.000Z.
    public static let createdAtMillisMin: Int64 = -62_167_219_200_000

    /// What is wrong with `name` as a stored name (a child's, the household's, a member's or a
    /// grant's), or nil: empty, longer than `bytesMax` bytes, white space at either end (a name
    /// typed here is trimmed before it is stored) or a control character (C0, DEL, C1: a new
    /// line, an escape sequence). The one rule for a name typed on this laptop and a name in a
    /// record from a peer (``FieldValue/fits(_:)``, the grant decoder), so every replica refuses
    /// the same records. `what` begins the message ("child name", "a member's name").
    public static func nameProblem(_ name: String, what: String, bytesMax: Int) -> String? {
        guard let first = name.unicodeScalars.first, let last = name.unicodeScalars.last else { return "\(what) must not be empty" }
        if name.utf8.count > bytesMax { return "\(what) is longer than \(bytesMax) bytes" }
        if first.properties.isWhitespace || last.properties.isWhitespace { return "\(what) must not start or end with white space" }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "\(what) must not contain control characters"
        }
        return nil
    }

    /// Why `t` is not a valid transaction, or nil.
    public static func problem(with t: LedgerTransaction) -> String? {
        if t.amountCents == 0 { return "transaction amount of zero" }
        if t.amountCents == .min { return "transaction amount out of range" }
        if t.createdAtMillis < Validation.createdAtMillisMin || t.createdAtMillis > HLC.millisMax {
            return "transaction time out of range"
        }
        if t.note.utf8.count > Limits.noteBytesMax { return "note longer than \(Limits.noteBytesMax) bytes" }
        if t.source.isEmpty || t.source.utf8.count > Limits.sourceBytesMax { return "transaction source" }
        if let original = t.reverses, t.id != LedgerTransaction.undoID(for: original) {
            return "undo entry id not derived from the reversed transaction"
        }
        return nil
    }
}

extension RecordCodec {
    /// The canonical stored bytes of a household creation record.
    public static func encodeRecord(_ h: Household) -> [UInt8] {
        var w = ByteWriter(capacity: 144 + h.name.utf8.count)
        w.write(id: h.id)
        w.write(zigzag: h.createdAtMillis)
        w.write(blob: h.owner)
        w.write(blob: h.salt)
        w.write(string: h.name)
        w.write(blob: h.recovery)
        w.write(blob: h.signature)
        return w.bytes
    }

    static func decodeHousehold(_ r: inout ByteReader) throws(DecodeError) -> Household {
        let id = try r.readID("household id")
        let created = try r.readZigzag("createdAt")
        let owner = try r.readBlob(maxCount: Membership.keyBytes, "owner")
        let salt = try r.readBlob(maxCount: 32, "salt")
        let name = try r.readString(maxBytes: Limits.nameBytesMax, "household name")
        let recovery = try r.readBlob(maxCount: Membership.keyBytes, "recovery key")
        let signature = try r.readBlob(maxCount: Membership.signatureBytes, "genesis signature")
        guard owner.isEmpty || owner.count == Membership.keyBytes else { throw .invalid("owner key length") }
        guard signature.isEmpty || signature.count == Membership.signatureBytes else { throw .invalid("genesis signature length") }
        guard recovery.isEmpty || recovery.count == Membership.keyBytes else { throw .invalid("recovery key length") }
        return Household(id: id, createdAtMillis: created, owner: owner, salt: salt, name: name, recovery: recovery,
                         signature: signature)
    }

    /// The canonical stored bytes of a child creation record.
    public static func encodeRecord(_ c: ChildRecord) -> [UInt8] {
        var w = ByteWriter(capacity: 24)
        w.write(id: c.id)
        w.write(zigzag: c.createdAtMillis)
        return w.bytes
    }

    /// Decodes ``encodeRecord(_:)-(Household)``.
    public static func decodeHousehold(_ bytes: [UInt8]) throws(DecodeError) -> Household {
        var r = ByteReader(bytes)
        let h = try decodeHousehold(&r)
        try r.expectEnd()
        return h
    }

    /// Decodes ``encodeRecord(_:)-(ChildRecord)``.
    public static func decodeChild(_ bytes: [UInt8]) throws(DecodeError) -> ChildRecord {
        var r = ByteReader(bytes)
        let c = ChildRecord(id: try r.readID("child id"), createdAtMillis: try r.readZigzag("createdAt"))
        try r.expectEnd()
        return c
    }
}

// Targets for the canonical record encoding (RecordCodec): changes, operations, transactions,
// household and child records, register values, stamps and version vectors.
import KidLedgerDomain
import KidLedgerReplica

/// The record decoders, chosen by input byte 0 (modulo their count).
private enum RecordKind: UInt8, CaseIterable {
    case change, operation, transaction, household, child, value, stamp, seen
}

/// Decodes `bytes` as `kind` from a reader; returns the canonical encoding of what was read and how
/// many bytes were read, or nil when it does not decode.
private func decodeAndEncode(_ kind: RecordKind, _ bytes: [UInt8]) -> (encoded: [UInt8], read: Int)? {
    var r = ByteReader(bytes)
    var w = ByteWriter()
    do {
        switch kind {
        case .change: RecordCodec.encode(try RecordCodec.decodeChange(&r), into: &w)
        case .operation: RecordCodec.encode(try RecordCodec.decodeOperation(&r), into: &w)
        case .transaction:
            let t = try RecordCodec.decodeTransaction(&r)
            check(Validation.problem(with: t) == nil, "a decoded transaction is invalid: \(t)")
            RecordCodec.encode(t, into: &w)
        case .value: RecordCodec.encode(try RecordCodec.decodeValue(&r), into: &w)
        case .stamp: RecordCodec.encode(try RecordCodec.decodeStamp(&r), into: &w)
        case .seen: RecordCodec.encode(seen: try RecordCodec.decodeSeen(&r), into: &w)
        case .household:
            guard let h = try? RecordCodec.decodeHousehold(bytes) else { return nil }
            return (RecordCodec.encodeRecord(h), bytes.count)
        case .child:
            guard let c = try? RecordCodec.decodeChild(bytes) else { return nil }
            return (RecordCodec.encodeRecord(c), bytes.count)
        }
    } catch {
        return nil
    }
    return (w.bytes, r.offset)
}

/// `record`: input byte 0 chooses the decoder, the rest is its input. Properties: whatever decodes
/// re-encodes to exactly the bytes that were read (the encoding is canonical, as the digest and the
/// conflict rules assume); whole-buffer decoders agree with reader-based ones and refuse trailing bytes.
@Sendable func fuzzRecord(_ data: [UInt8]) {
    guard let first = data.first else { return }
    let kind = RecordKind.allCases[Int(first) % RecordKind.allCases.count]
    let bytes = Array(data.dropFirst())
    guard let (encoded, read) = decodeAndEncode(kind, bytes) else { return }
    check(encoded == Array(bytes.prefix(read)), "\(kind): decode→encode is not the identity")
    // Decoding the re-encoding gives the same thing again.
    check(decodeAndEncode(kind, encoded).map { $0.encoded == encoded && $0.read == encoded.count } == true,
          "\(kind): encode→decode→encode changed the bytes")
    switch kind {
    case .change:
        let whole = try? RecordCodec.decodeChange(bytes)
        check((whole != nil) == (read == bytes.count), "change: whole-buffer decoding disagrees about trailing bytes")
        if let whole { check(RecordCodec.encode(whole) == bytes, "change: whole-buffer round trip") }
    case .transaction:
        let whole = try? RecordCodec.decodeTransaction(bytes)
        check((whole != nil) == (read == bytes.count), "transaction: whole-buffer decoding disagrees about trailing bytes")
        if let whole { check(RecordCodec.encode(whole) == bytes, "transaction: whole-buffer round trip") }
    case .operation:
        var r = ByteReader(bytes)
        if let op = try? RecordCodec.decodeOperation(&r) { check(RecordCodec.encodeOperation(op) == encoded, "operation: encodeOperation") }
    case .value:
        var r = ByteReader(bytes)
        if let v = try? RecordCodec.decodeValue(&r) { check(RecordCodec.encode(v) == encoded, "value: encode") }
    default:
        break
    }
}

// MARK: - Seeds

/// The household every sample uses.
let sampleHousehold = Household(id: RecordID(high: 0x1111_2222_3333_4444, low: 0x8555_6666_7777_8888), createdAtMillis: 1_795_000_000_000,
                                owner: Array(repeating: 0x0C, count: 32), salt: Array(repeating: 0x5A, count: 16),
                                name: "Sample", signature: Array(repeating: 0x5E, count: 64))

/// Real changes: a replica creates a household and children, gives, takes, renames, gives to all,
/// undoes and archives; plus a change holding one of each membership operation.
func sampleChanges() -> [Change] {
    do {
        let replica = freshReplica()
        _ = try replica.post("Ava", signedCents: 125, note: "chores", source: "give")
        _ = try replica.post("Ben", signedCents: -25, note: "", source: "take")
        _ = try replica.renameChild("Ben", to: "Benjamin")
        _ = try replica.postAll(signedCents: 500, note: "weekly allowance", source: "give-all")
        _ = try replica.undo()
        _ = try replica.setArchived("Ava", true)
        var changes = try replica.changes(notCoveredBy: [:])
        let key = Array(repeating: UInt8(0x42), count: 32), signature = Array(repeating: UInt8(0x99), count: 64)
        changes.append(Change(origin: ReplicaID(0xFEED), sequence: 1, hlc: HLC(millis: 1_795_000_000_001, counter: 2), operations: [
            .createHousehold(sampleHousehold),
            .grant(MemberGrant(member: key, name: "work laptop", grantedAtMillis: 1_795_000_000_002, signature: signature)),
            .revoke(MemberRevocation(member: key, revokedAtMillis: 1_795_000_000_003, seen: [ReplicaID(0xFEED): 1, ReplicaID(3): 9],
                                     signature: signature)),
            .claim(OriginClaim(origin: ReplicaID(0xFEED), member: key, nonce: 0x5EED, signature: signature)),
            .setField(entity: sampleHousehold.id, field: .householdName, value: .text("Smiths"),
                      base: Stamp(hlc: HLC(millis: 5, counter: 1), origin: ReplicaID(3))),
            .setField(entity: sampleHousehold.id, field: .householdTimeZone, value: .text("America/Los_Angeles")),
        ]))
        return changes
    } catch {
        violated("cannot build the sample changes: \(error)")
    }
}

@Sendable func recordSeeds() -> [[UInt8]] {
    func seed(_ kind: RecordKind, _ bytes: [UInt8]) -> [UInt8] { [kind.rawValue] + bytes }
    let changes = sampleChanges()
    var seeds = changes.map { seed(.change, RecordCodec.encode($0)) }
    let operations = changes.flatMap(\.operations)
    var seenTags = Set<UInt8>()
    for op in operations {
        let bytes = RecordCodec.encodeOperation(op)
        if seenTags.insert(bytes[0]).inserted { seeds.append(seed(.operation, bytes)) }
    }
    for case .addTransaction(let t) in operations where t.isUndo || t.note.isEmpty {
        seeds.append(seed(.transaction, RecordCodec.encode(t)))
    }
    seeds.append(seed(.household, RecordCodec.encodeRecord(sampleHousehold)))
    seeds.append(seed(.child, RecordCodec.encodeRecord(ChildRecord(id: sampleHousehold.id, createdAtMillis: -5))))
    for value in [FieldValue.text("Ava"), .flag(true), .integer(-3)] { seeds.append(seed(.value, RecordCodec.encode(value))) }
    var w = ByteWriter()
    RecordCodec.encode(Stamp(hlc: HLC(millis: 1_795_000_000_000, counter: 300), origin: ReplicaID(77)), into: &w)
    seeds.append(seed(.stamp, w.bytes))
    w = ByteWriter()
    RecordCodec.encode(seen: [ReplicaID(1): 1, ReplicaID(0xFFFF_FFFF_FFFF_FFFF): 1 << 40], into: &w)
    seeds.append(seed(.seen, w.bytes))
    return seeds
}

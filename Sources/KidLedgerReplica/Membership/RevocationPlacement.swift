import KidLedgerDomain

/// Where a revocation sits in the log of the owner that wrote it, and the proof of it: the change
/// that carries it (encoded), the claim's key and nonce its origin derives from, the origin's hash
/// chain link before it, the version at every later sequence up to a signed head of the origin's
/// member, and that head's signature. A refusal's evidence ends with one when the refusing side
/// can build it (``Replica/revocation(of:)``).
///
/// Why: a refused laptop records the revocation it learns as a copy in a change of its own
/// origin. An owner recovery whose transfer saw the owner's change, but not that copy, ends the
/// signer's term before the copy: there the copy is void, while every judge holds the owner's
/// change, which the transfer saw, and keeps refusing (hostile seed 302242). With the placement the
/// refused side judges the revocation where the owner's log holds it
/// (``Replica/isRevokedHere(_:)``).
///
/// It proves the position to whoever holds the origin's member key, and no more: a stolen former
/// owner key can sign a head over a new version of its own origin's change, as it can write one
/// into the log; a replica that holds the real version at that sequence refutes it
/// (``Replica/placedRevocationHolds(_:version:key:_:_:_:_:)``).
struct RevocationPlacement: Equatable {
    /// The byte a placement starts with in a refusal's evidence (no operation tag is this).
    static let marker: UInt8 = 0xE0
    /// The most later versions a placement names: a member signs a head at least every
    /// ``Membership/headInterval`` sequences, and at the end of each commit.
    static let laterVersionsMax = Int(Membership.headInterval)

    /// The key whose claim names the carrier's origin, and the claim's nonce.
    var key: [UInt8]
    var nonce: UInt64
    /// The origin's chain link at the sequence before the carrier (zeros at sequence 1).
    var chainBefore: [UInt8]
    /// The carrier change, canonically encoded.
    var change: [UInt8]
    /// The version hash (8 bytes) at each sequence after the carrier's, up to the head.
    var laterVersions: [[UInt8]]
    /// The key's signature of the head at the last of those sequences (the carrier's without any).
    var headSignature: [UInt8]

    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 160 + change.count + 8 * laterVersions.count)
        w.write(Self.marker)
        w.write(raw: key)
        w.write(bigEndian: nonce)
        w.write(raw: chainBefore)
        w.write(blob: change)
        w.write(varint: UInt64(laterVersions.count))
        for version in laterVersions { w.write(raw: version) }
        w.write(raw: headSignature)
        return w.bytes
    }

    /// Reads a placement (its marker included) up to the end of `r`.
    static func decode(_ r: inout ByteReader) throws(DecodeError) -> RevocationPlacement {
        guard try r.readByte("placement marker") == marker else { throw .invalid("placement marker") }
        let key = try r.readRaw(count: Membership.keyBytes, "placement key")
        let nonce = try r.readBigEndianUInt64("placement nonce")
        let chainBefore = try r.readRaw(count: 16, "placement chain link")
        let change = try r.readBlob(maxCount: Replica.evidenceBytesMax, "placement change")
        let count = try r.readVarint("placement version count")
        guard count <= UInt64(laterVersionsMax) else { throw .invalid("placement version count \(count)") }
        var later: [[UInt8]] = []
        for _ in 0..<count { later.append(try r.readRaw(count: 8, "placement version")) }
        let signature = try r.readRaw(count: 64, "placement head signature")
        try r.expectEnd()
        return RevocationPlacement(key: key, nonce: nonce, chainBefore: chainBefore, change: change,
                                   laterVersions: later, headSignature: signature)
    }
}

extension Replica {
    /// The most bytes a refusal's evidence takes (the `revoked` frame holds 16 KiB, with its
    /// reason): a placement that would pass it is left out.
    static let evidenceBytesMax = 15 << 10

    /// The carrier of `placement` when the placement proves that it holds `revocation` at its
    /// origin and sequence (``placedCarrier(_:of:household:)``) and the claim's key signed a head
    /// over the origin's chain from the link before it through the carrier's version and the
    /// later ones. Nil otherwise.
    func provenCarrier(_ placement: RevocationPlacement, of revocation: MemberRevocation,
                       household: RecordID) -> (change: Change, version: [UInt8])? {
        guard let carrier = Self.placedCarrier(placement, of: revocation, household: household) else { return nil }
        var chain = Replica.chainLink(after: placement.chainBefore, onlyVersion: carrier.version)
        for later in placement.laterVersions { chain = Replica.chainLink(after: chain, onlyVersion: later) }
        let head = SignedHead(origin: carrier.change.origin, sequence: carrier.change.sequence + UInt64(placement.laterVersions.count),
                              signature: placement.headSignature)
        guard Membership.isValid(head, chain: chain, household: household, key: placement.key, verifier: verifier) else { return nil }
        return carrier
    }

    /// The carrier of `placement` and its version when it decodes canonically, carries
    /// `revocation`, and its origin derives from the claim's key and nonce; nil otherwise. No
    /// signature is checked (``provenCarrier(_:of:household:)`` does).
    static func placedCarrier(_ placement: RevocationPlacement, of revocation: MemberRevocation,
                              household: RecordID) -> (change: Change, version: [UInt8])? {
        guard let change = try? RecordCodec.decodeChange(placement.change), RecordCodec.encode(change) == placement.change,
              change.operations.contains(.revoke(revocation)),
              Membership.origin(household: household, member: placement.key, nonce: placement.nonce) == change.origin,
              change.sequence <= Limits.sequenceMax - UInt64(placement.laterVersions.count) else { return nil }
        return (change, Keys.version(placement.change))
    }

    /// Whether `revocation`, carried by `change` (of version `version`) at its origin and
    /// sequence, holds in the log `r` holds, judged as the apply path judges a revocation there:
    /// signed by the owner whose term covers that position, not of the current owner. A version
    /// of that sequence other than `version` in the log counts as a fork there (then no version
    /// vector covers it), and so does a claim of the origin by another key than `key`.
    static func placedRevocationHolds(_ change: Change, version: [UInt8], key: [UInt8], _ revocation: MemberRevocation,
                                      _ r: any KeyValueReader, _ verifier: any SignatureVerifier) throws -> Bool {
        guard let ownership = try ownership(r), revocation.member != ownership.current else { return false }
        if let claimed = try r.get(Tables.claims, Keys.origin(change.origin)), claimed != key { return false }
        var forkedFrom = try Self.forkedFrom(change.origin, r)
        var another = false
        try r.scan(Tables.changes, prefix: Keys.change(change.origin, change.sequence)) { logKey, _ in
            another = Array(logKey.suffix(8)) != version
            return !another
        }
        if another { forkedFrom = min(forkedFrom ?? .max, change.sequence) }
        return ownership.signedByOwner(of: change, forkedFrom: forkedFrom) {
            verifier.isValid(signature: revocation.signature,
                             message: Membership.revocationMessage(household: ownership.household, revocation), key: $0)
        }
    }

    /// The placement of `revocation` in the log `r` holds, or nil when it can't be built: the
    /// first change, in an origin an owner (current or former, not the revoked member) claimed,
    /// that carries it, with a stored signed head at or after it on an unforked stretch of that
    /// origin (at most ``RevocationPlacement/laterVersionsMax`` sequences on). Reads the
    /// changes of those origins until it finds the carrier: a refusal's cost, paid only for a
    /// revoked member.
    static func placement(of revocation: MemberRevocation, _ ownership: Ownership, _ r: any KeyValueReader) throws -> RevocationPlacement? {
        var origins: [(origin: ReplicaID, key: [UInt8])] = []
        try r.scan(Tables.claims) { key, value in
            if let raw = Bytes.u64(key), value != revocation.member, ownership.hasOwned(value) { origins.append((ReplicaID(raw), value)) }
            return true
        }
        for (origin, key) in origins {
            var carrier: (logKey: [UInt8], change: [UInt8])?
            try r.scan(Tables.changes, prefix: Keys.origin(origin)) { logKey, value in
                if Self.bytes(value, contain: revocation.signature), let change = try? RecordCodec.decodeChange(value),
                   change.operations.contains(.revoke(revocation)) {
                    carrier = (logKey, value)
                }
                return carrier == nil
            }
            guard let carrier else { continue }
            if let placement = try placement(at: carrier, origin: origin, key: key, r) { return placement }
        }
        return nil
    }

    /// The placement of the change `carrier` (its log key and value) of `origin`, claimed by `key`.
    private static func placement(at carrier: (logKey: [UInt8], change: [UInt8]), origin: ReplicaID, key: [UInt8],
                                  _ r: any KeyValueReader) throws -> RevocationPlacement? {
        let sequence = Bytes.u64(at: 8, carrier.logKey)
        var head: SignedHead?
        try r.scan(Tables.heads, prefix: Keys.origin(origin), from: Keys.change(origin, sequence), reverse: false) { logKey, value in
            head = try StoredHead.decode(key: logKey, value: value)
            return false
        }
        guard let head, head.choices.isEmpty, head.sequence >= sequence,
              head.sequence - sequence <= UInt64(RevocationPlacement.laterVersionsMax),
              (try forkedFrom(origin, r) ?? .max) > head.sequence else { return nil }
        var later: [[UInt8]] = []
        var at = sequence + 1
        while at <= head.sequence {
            var versions: [[UInt8]] = []
            try r.scan(Tables.changes, prefix: Keys.change(origin, at)) { logKey, _ in
                versions.append(Array(logKey.suffix(8)))
                return true
            }
            guard versions.count == 1 else { return nil }
            later.append(versions[0])
            at += 1
        }
        let chainBefore = sequence > 1 ? try r.get(Tables.chains, Keys.change(origin, sequence - 1)) : zeroLink
        var nonce: UInt64?
        try r.scan(Tables.changes, prefix: Keys.change(origin, 1)) { _, value in
            for case .claim(let c) in (try? RecordCodec.decodeChange(value))?.operations ?? [] where c.member == key { nonce = c.nonce }
            return nonce == nil
        }
        guard let chainBefore, let nonce else { return nil }
        return RevocationPlacement(key: key, nonce: nonce, chainBefore: chainBefore, change: carrier.change,
                                   laterVersions: later, headSignature: head.signature)
    }

    /// Whether `bytes` holds `needle` (a signature: 64 bytes, so a plain scan is quick).
    private static func bytes(_ bytes: [UInt8], contain needle: [UInt8]) -> Bool {
        guard let first = needle.first, needle.count <= bytes.count else { return false }
        var i = 0
        while i <= bytes.count - needle.count {
            if bytes[i] == first && bytes[i ..< i + needle.count].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}

/// Verifies Ed25519 signatures. Injected (libsodium in the product), so the domain and the
/// replica stay free of C libraries.
public protocol SignatureVerifier: Sendable {
    /// Whether `signature` (64 bytes) is `key`'s (32 bytes) signature of `message`.
    func isValid(signature: [UInt8], message: [UInt8], key: [UInt8]) -> Bool
}

/// A verifier that accepts nothing: a replica without one rejects every signed record.
public struct RejectingVerifier: SignatureVerifier {
    /// Creates it.
    public init() {}
    /// Always false.
    public func isValid(signature: [UInt8], message: [UInt8], key: [UInt8]) -> Bool { false }
}

/// The owner's grant of membership to a member's account key.
public struct MemberGrant: Hashable, Sendable {
    /// The member's Ed25519 public key (32 bytes).
    public var member: [UInt8]
    /// A name for people ("Dad's laptop").
    public var name: String
    /// When it was granted.
    public var grantedAtMillis: Int64
    /// The owner's signature over ``Membership/grantMessage(household:_:)``.
    public var signature: [UInt8]

    /// Creates a grant.
    public init(member: [UInt8], name: String, grantedAtMillis: Int64, signature: [UInt8]) {
        self.member = member
        self.name = name
        self.grantedAtMillis = grantedAtMillis
        self.signature = signature
    }
}

/// The owner's revocation of a member. Operations of the member that `seen` covers stay; later
/// ones are rejected on every replica. Permanent: it wins over every grant.
public struct MemberRevocation: Hashable, Sendable {
    /// The revoked member's key.
    public var member: [UInt8]
    /// When.
    public var revokedAtMillis: Int64
    /// The version vector of the revoking replica: what the revocation has seen.
    public var seen: [ReplicaID: UInt64]
    /// The owner's signature over ``Membership/revocationMessage(household:_:)``.
    public var signature: [UInt8]

    /// Creates a revocation.
    public init(member: [UInt8], revokedAtMillis: Int64, seen: [ReplicaID: UInt64], signature: [UInt8]) {
        self.member = member
        self.revokedAtMillis = revokedAtMillis
        self.seen = seen
        self.signature = signature
    }
}

/// A member's claim that a replica id writes on its behalf: every change of that origin is the
/// member's. The first change (sequence 1) of every origin of an owned household carries one, and
/// the origin is derived from the member's key (``Membership/origin(household:member:nonce:)``),
/// so no key can claim an origin derived from another.
public struct OriginClaim: Hashable, Sendable {
    /// The replica id.
    public var origin: ReplicaID
    /// The member's key.
    public var member: [UInt8]
    /// What makes this origin one of the member's many: `origin` is derived from the household,
    /// `member` and this number.
    public var nonce: UInt64
    /// The member's signature over ``Membership/claimMessage(household:_:)``.
    public var signature: [UInt8]

    /// Creates a claim.
    public init(origin: ReplicaID, member: [UInt8], nonce: UInt64, signature: [UInt8]) {
        self.origin = origin
        self.member = member
        self.nonce = nonce
        self.signature = signature
    }
}

/// A member key's signing side, injected into the replica (the CLI's identity, the simulator's
/// accounts): it signs this device's origin claims. The replica sees no secret key.
public struct MemberSigner: Sendable {
    /// The member's public key (32 bytes).
    public let key: [UInt8]
    /// Signs a message with the member's secret key (64-byte Ed25519 signature).
    public let sign: @Sendable ([UInt8]) -> [UInt8]

    /// Creates a signer.
    public init(key: [UInt8], sign: @escaping @Sendable ([UInt8]) -> [UInt8]) {
        self.key = key
        self.sign = sign
    }

    /// This member's claim of the origin derived from `household`, its key and `nonce`.
    public func claim(household: RecordID, nonce: UInt64) -> OriginClaim {
        var c = OriginClaim(origin: Membership.origin(household: household, member: key, nonce: nonce), member: key,
                            nonce: nonce, signature: [])
        c.signature = sign(Membership.claimMessage(household: household, c))
        return c
    }
}

/// A member's signature over its origin's history up to one sequence: a signed chain head
/// (issue 20, point 2; docs/SECURITY.md, "Signed chain heads"). It signs the origin's hash chain
/// at that sequence along the author's branch (``Membership/headMessage(household:origin:sequence:chain:)``),
/// so it authenticates every change below it. The author signs one at the last change of each
/// local commit and at every multiple of ``Membership/headInterval``; a receiver keeps the ones it
/// verified, and passes them on.
public struct SignedHead: Hashable, Sendable {
    /// The origin whose history it covers.
    public var origin: ReplicaID
    /// The sequence it signs the chain at.
    public var sequence: UInt64
    /// The origin's member's Ed25519 signature (64 bytes).
    public var signature: [UInt8]
    /// Where the origin forked up to ``sequence`` (several versions at one sequence), which
    /// version is on this head's branch, ascending by sequence; empty for a history that never
    /// forked there.
    public var choices: [HeadChoice]

    /// Creates a signed head.
    public init(origin: ReplicaID, sequence: UInt64, signature: [UInt8], choices: [HeadChoice] = []) {
        self.origin = origin
        self.sequence = sequence
        self.signature = signature
        self.choices = choices
    }
}

/// The version (``version``: the first 8 bytes of SHA-256 of the change's canonical encoding, as a
/// big-endian u64) a signed head's branch takes at a forked ``sequence``.
public struct HeadChoice: Hashable, Sendable {
    public var sequence: UInt64
    public var version: UInt64

    public init(sequence: UInt64, version: UInt64) {
        self.sequence = sequence
        self.version = version
    }
}

extension MemberSigner {
    /// This member's signed head of `origin` at `sequence`, where its branch's hash chain is `chain`.
    public func head(household: RecordID, origin: ReplicaID, sequence: UInt64, chain: [UInt8]) -> SignedHead {
        SignedHead(origin: origin, sequence: sequence,
                   signature: sign(Membership.headMessage(household: household, origin: origin, sequence: sequence, chain: chain)))
    }
}

/// The household's recovery key makes `newOwner` the owner. Only the recovery key (named by the
/// genesis) signs one, so the set of valid transfers does not depend on which transfers a replica
/// holds, and a stolen owner key can never sign one. The owner is the new owner of the valid
/// transfer with the highest epoch (same epoch: the smaller hash of its encoded operation wins,
/// and `status` shows the conflict). A grant or revocation signed by a former owner counts only
/// if the transfer that ended that owner's term has seen it: its change is one of
/// ``seenChanges`` (a transfer made since issue 39), else (an older transfer, which has none) at
/// or below `seen` and below its origin's lowest fork. Later ones are forged.
public struct OwnerTransfer: Hashable, Sendable {
    /// The new owner's Ed25519 public key (32 bytes).
    public var newOwner: [UInt8]
    /// 1 for the first transfer, then one more than the highest the signer knew of.
    public var epoch: UInt64
    /// When.
    public var transferredAtMillis: Int64
    /// The version vector of the replica that made it: what the previous owner signed that it
    /// covers stays valid.
    public var seen: [ReplicaID: UInt64]
    /// The exact changes carrying owner-signed records (grants, revocations) that the replica
    /// making it held, each as ``Membership/seenChangeKey(origin:encodedChange:)`` (origin, then
    /// 16 bytes of the SHA-256 of the encoded change), ascending, at most
    /// ``Limits/cutEntriesMax``: the ending owner's records in those changes stay valid, and
    /// no other version of them (a thief's fork of the former owner's origin) counts, nor voids
    /// them (issue 39). Nil for a transfer of the older format (operation tag 8), which names
    /// sequences only.
    public var seenChanges: [[UInt8]]?
    /// The recovery key's signature over ``Membership/transferMessage(household:_:)``.
    public var signature: [UInt8]

    /// Creates a transfer.
    public init(newOwner: [UInt8], epoch: UInt64, transferredAtMillis: Int64, seen: [ReplicaID: UInt64],
                seenChanges: [[UInt8]]? = nil, signature: [UInt8]) {
        self.newOwner = newOwner
        self.epoch = epoch
        self.transferredAtMillis = transferredAtMillis
        self.seen = seen
        self.seenChanges = seenChanges
        self.signature = signature
    }
}

/// The exact bytes each membership record's signature covers, and the household-id rule.
public enum Membership {
    /// Key length.
    public static let keyBytes = 32
    /// Signature length.
    public static let signatureBytes = 64

    /// The entity whose registers describe the member with account key `key` (its display name,
    /// ``Field/memberName``): a version-5 id of "member:" and the key.
    public static func memberEntity(_ key: [UInt8]) -> RecordID {
        RecordID.v5(namespace: .namespaceKidLedger, name: [UInt8]("member:".utf8) + key)
    }

    /// `id` (a fresh random or time-ordered id) marked as made by the member with key `maker`: its
    /// high word and the 30 random bits at the top of its low word (below the variant) stay, and the
    /// low 32 bits become a hash of the key, the high word and those bits
    /// (``isEntryID(_:madeBy:)`` checks it). Two members' clients that reuse one id can then be
    /// told apart: only the maker's version carries its mark.
    public static func entryID(_ id: RecordID, madeBy maker: [UInt8]) -> RecordID {
        let kept = id.low & 0xFFFF_FFFF_0000_0000
        return RecordID(high: id.high, low: kept | UInt64(entryMark(high: id.high, kept: kept, maker: maker)))
    }

    /// Whether `id` carries the mark of `maker` (``entryID(_:madeBy:)``). An id made otherwise
    /// (an undo entry's, an import's, a period payment's, an older client's) carries nobody's,
    /// but for one key in 2^32.
    public static func isEntryID(_ id: RecordID, madeBy maker: [UInt8]) -> Bool {
        let kept = id.low & 0xFFFF_FFFF_0000_0000
        return UInt32(truncatingIfNeeded: id.low) == entryMark(high: id.high, kept: kept, maker: maker)
    }

    private static func entryMark(high: UInt64, kept: UInt64, maker: [UInt8]) -> UInt32 {
        var hasher = SHA256Hasher()
        hasher.update(Array("kidledger entry v1".utf8))
        hasher.update(maker)
        var words = (high.bigEndian, kept.bigEndian)
        withUnsafeBytes(of: &words) { hasher.update(Array($0)) }
        let digest = hasher.finalize()
        return UInt32(digest[0]) << 24 | UInt32(digest[1]) << 16 | UInt32(digest[2]) << 8 | UInt32(digest[3])
    }

    /// What is wrong with `name` as a member's display name (stored as given: already trimmed),
    /// or nil: ``Validation/nameProblem(_:what:bytesMax:)`` with at most
    /// ``Limits/memberNameBytesMax`` bytes.
    public static func memberNameProblem(_ name: String) -> String? {
        Validation.nameProblem(name, what: "a member's name", bytesMax: Limits.memberNameBytesMax)
    }

    /// The id of a household owned by `owner`, derived so that no other key can claim it.
    public static func householdID(owner: [UInt8], salt: [UInt8]) -> RecordID {
        RecordID.v5(namespace: .namespaceKidLedger, name: [UInt8]("household:".utf8) + owner + salt)
    }

    /// What a household genesis's signature covers: the record's canonical bytes with an empty
    /// signature (id, createdAt, owner, salt, name), after a domain separator.
    public static func genesisMessage(_ h: Household) -> [UInt8] {
        var unsigned = h
        unsigned.signature = []
        return Array("kidledger genesis v1".utf8) + RecordCodec.encodeRecord(unsigned)
    }

    /// Bytes of ``genesisHash(_:)``.
    public static let genesisHashBytes = 32

    /// What pins a household's one genesis (issue 39): SHA-256 of "kidledger genesis hash v1" and
    /// the record's canonical encoding, signature included. Every replica pins the hash of the
    /// genesis it was created or joined with (the invitation carries it), and every other creation
    /// record of the household, whoever signed it, is forged.
    public static func genesisHash(_ h: Household) -> [UInt8] {
        SHA256.hash(Array("kidledger genesis hash v1".utf8) + RecordCodec.encodeRecord(h))
    }

    /// Why `h` is not a genuine genesis, or nil: an owned one must have an id derived from its
    /// owner key and salt and carry the owner's signature; one without an owner carries neither
    /// salt nor signature (whether a replica accepts it is its pin's business).
    public static func genesisProblem(_ h: Household, verifier: any SignatureVerifier) -> String? {
        guard h.isWellFormed else { return "household id not derived from its owner" }
        if h.owner.isEmpty { return nil }
        guard verifier.isValid(signature: h.signature, message: genesisMessage(h), key: h.owner) else {
            return "household genesis not signed by its owner"
        }
        return nil
    }

    /// The bytes a membership record's signature covers: `domain` (which kind of record, and
    /// its version), the household id, then the record's fields.
    static func message(_ domain: String, household: RecordID, _ fields: (inout ByteWriter) -> Void) -> [UInt8] {
        var w = ByteWriter(capacity: 112)
        w.write(raw: Array(domain.utf8))
        w.write(id: household)
        fields(&w)
        return w.bytes
    }

    /// What a grant's signature covers.
    public static func grantMessage(household: RecordID, _ g: MemberGrant) -> [UInt8] {
        message("kidledger grant v1", household: household) { w in
            w.write(blob: g.member)
            w.write(string: g.name)
            w.write(zigzag: g.grantedAtMillis)
        }
    }

    /// What a revocation's signature covers.
    public static func revocationMessage(household: RecordID, _ r: MemberRevocation) -> [UInt8] {
        message("kidledger revoke v1", household: household) { w in
            w.write(blob: r.member)
            w.write(zigzag: r.revokedAtMillis)
            RecordCodec.encode(seen: r.seen, into: &w)
        }
    }

    /// What an owner transfer's signature covers: v1 for the older format (no
    /// ``OwnerTransfer/seenChanges``), v2 with them.
    public static func transferMessage(household: RecordID, _ t: OwnerTransfer) -> [UInt8] {
        message(t.seenChanges == nil ? "kidledger owner transfer v1" : "kidledger owner transfer v2", household: household) { w in
            w.write(blob: t.newOwner)
            w.write(varint: t.epoch)
            w.write(zigzag: t.transferredAtMillis)
            RecordCodec.encode(seen: t.seen, into: &w)
            if let changes = t.seenChanges { RecordCodec.encode(seenChanges: changes, into: &w) }
        }
    }

    /// Length of an ``OwnerTransfer/seenChanges`` entry: origin (8, big-endian) + 16 bytes of
    /// the SHA-256 of the encoded change.
    public static let seenChangeBytes = 24

    /// How an owner transfer names a change it saw (``OwnerTransfer/seenChanges``).
    public static func seenChangeKey(origin: ReplicaID, encodedChange: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: seenChangeBytes)
        w.write(bigEndian: origin.rawValue)
        w.write(raw: SHA256.hash(encodedChange).prefix(16))
        return w.bytes
    }

    /// The author signs a head at every sequence that is a multiple of this (and at the last
    /// change of each commit), and every replica passes those on, so every replica can end a batch
    /// of an origin at most this many changes further on.
    public static let headInterval: UInt64 = 256

    /// What a signed head's signature covers: "kidledger head v1" ‖ household ‖ origin u64 ‖
    /// sequence u64 ‖ the origin's 16-byte hash chain at that sequence along the head's branch.
    public static func headMessage(household: RecordID, origin: ReplicaID, sequence: UInt64, chain: [UInt8]) -> [UInt8] {
        message("kidledger head v1", household: household) { w in
            w.write(bigEndian: origin.rawValue)
            w.write(bigEndian: sequence)
            w.write(raw: chain)
        }
    }

    /// Whether `head` is `key`'s signature over `chain` (its branch's hash chain at its sequence)
    /// in `household`.
    public static func isValid(_ head: SignedHead, chain: [UInt8], household: RecordID, key: [UInt8],
                               verifier: any SignatureVerifier) -> Bool {
        chain.count == 16 && head.signature.count == 64
            && verifier.isValid(signature: head.signature,
                                message: headMessage(household: household, origin: head.origin, sequence: head.sequence, chain: chain),
                                key: key)
    }

    /// The origin (replica id) that `member`'s claim with `nonce` names in `household`: the first
    /// 8 bytes of SHA-256("kidledger origin v1" ‖ household ‖ member ‖ nonce), odd (so never 0,
    /// like every replica id this code draws). Finding a nonce for another key's origin takes
    /// about 2^63 hashes.
    public static func origin(household: RecordID, member: [UInt8], nonce: UInt64) -> ReplicaID {
        var w = ByteWriter(capacity: 80)
        w.write(raw: Array("kidledger origin v1".utf8))
        w.write(id: household)
        w.write(raw: member)
        w.write(bigEndian: nonce)
        let raw = SHA256.hash(w.bytes).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return ReplicaID(raw | 1)
    }

    /// What a claim's signature covers (its nonce included).
    public static func claimMessage(household: RecordID, _ c: OriginClaim) -> [UInt8] {
        var w = ByteWriter(capacity: 88)
        w.write(raw: Array("kidledger claim v2".utf8))
        w.write(id: household)
        w.write(bigEndian: c.origin.rawValue)
        w.write(blob: c.member)
        w.write(bigEndian: c.nonce)
        return w.bytes
    }

    /// Why `c`, carried by a change of `origin` at `sequence`, is not a valid claim in
    /// `household`, or nil. Valid: at the origin's first change, for that origin, the origin
    /// derived from the member's key and nonce, signed by that key. (Whether the key is a member
    /// is the revocation rule's business: a grant may come later.)
    public static func claimProblem(_ c: OriginClaim, origin: ReplicaID, sequence: UInt64, household: RecordID,
                                    verifier: any SignatureVerifier) -> String? {
        guard c.origin == origin else { return "claim of another origin" }
        guard sequence == 1 else { return "claim after its origin's first change" }
        guard Self.origin(household: household, member: c.member, nonce: c.nonce) == origin else {
            return "claim of an origin not derived from its key"
        }
        guard verifier.isValid(signature: c.signature, message: claimMessage(household: household, c), key: c.member) else {
            return "claim with a bad signature"
        }
        return nil
    }
}

/// The household's recovery secret as people write it on paper: the 32-byte seed of the recovery
/// key and a 3-byte checksum (the first bytes of a SHA-256 of the seed), 280 bits in 56
/// characters of Crockford's base32 (digits and capitals without I, L, O, U) in 14 groups of 4:
/// `K7QM-2D9X-…`. Reading is forgiving: case, spaces and dashes do not matter, and I and L read
/// as 1, O as 0. A mistyped character fails the checksum (it is never taken for another secret,
/// but for one chance in 16.7 million).
public enum RecoverySecret {
    /// Bytes of the seed.
    public static let seedBytes = 32
    static let checksumBytes = 3
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    static func checksum(_ seed: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(Array("kidledger recovery secret v1".utf8) + seed).prefix(checksumBytes))
    }

    /// The paper form of `seed` (32 bytes).
    public static func text(seed: [UInt8]) -> String {
        precondition(seed.count == seedBytes, "a recovery seed is 32 bytes")
        var symbols: [UInt8] = []
        var buffer: UInt32 = 0, bits = 0
        for byte in seed + checksum(seed) {
            buffer = (buffer << 8 | UInt32(byte)) & 0xFFFF
            bits += 8
            while bits >= 5 {
                bits -= 5
                symbols.append(alphabet[Int(buffer >> UInt32(bits) & 31)])
            }
        }
        var text = ""
        for (i, symbol) in symbols.enumerated() {
            if i > 0 && i % 4 == 0 { text += "-" }
            text.unicodeScalars.append(Unicode.Scalar(symbol))
        }
        return text
    }

    /// The seed written as `text`, or nil when it is not one (wrong length, a character outside
    /// the alphabet, or a checksum that does not match).
    public static func seed(text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for scalar in text.uppercased().unicodeScalars {
            guard scalar.isASCII else { return nil }
            var c = UInt8(scalar.value)
            if c == UInt8(ascii: "-") || c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\n") { continue }
            if c == UInt8(ascii: "I") || c == UInt8(ascii: "L") { c = UInt8(ascii: "1") }
            if c == UInt8(ascii: "O") { c = UInt8(ascii: "0") }
            guard let v = alphabet.firstIndex(of: c) else { return nil }
            values.append(UInt8(v))
        }
        guard values.count * 5 == (seedBytes + checksumBytes) * 8 else { return nil }
        var bytes: [UInt8] = []
        var buffer: UInt32 = 0, bits = 0
        for v in values {
            buffer = (buffer << 5 | UInt32(v)) & 0xFFFF
            bits += 5
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(buffer >> UInt32(bits) & 255))
            }
        }
        let seed = Array(bytes.prefix(seedBytes))
        guard Array(bytes.suffix(checksumBytes)) == checksum(seed) else { return nil }
        return seed
    }
}

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
/// member's. The first change of every origin of an owned household carries one.
public struct OriginClaim: Hashable, Sendable {
    /// The replica id.
    public var origin: ReplicaID
    /// The member's key.
    public var member: [UInt8]
    /// The member's signature over ``Membership/claimMessage(household:_:)``.
    public var signature: [UInt8]

    /// Creates a claim.
    public init(origin: ReplicaID, member: [UInt8], signature: [UInt8]) {
        self.origin = origin
        self.member = member
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
    /// or nil: empty, longer than ``Limits/memberNameBytesMax`` bytes, white space at either end,
    /// or a control character.
    public static func memberNameProblem(_ name: String) -> String? {
        guard let first = name.unicodeScalars.first, let last = name.unicodeScalars.last else { return "a member's name must not be empty" }
        if name.utf8.count > Limits.memberNameBytesMax { return "a member's name is longer than \(Limits.memberNameBytesMax) bytes" }
        if first.properties.isWhitespace || last.properties.isWhitespace { return "a member's name must not start or end with white space" }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "a member's name must not contain control characters"
        }
        return nil
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

    /// What a grant's signature covers.
    public static func grantMessage(household: RecordID, _ g: MemberGrant) -> [UInt8] {
        var w = ByteWriter(capacity: 96)
        w.write(raw: Array("kidledger grant v1".utf8))
        w.write(id: household)
        w.write(blob: g.member)
        w.write(string: g.name)
        w.write(zigzag: g.grantedAtMillis)
        return w.bytes
    }

    /// What a revocation's signature covers.
    public static func revocationMessage(household: RecordID, _ r: MemberRevocation) -> [UInt8] {
        var w = ByteWriter(capacity: 96)
        w.write(raw: Array("kidledger revoke v1".utf8))
        w.write(id: household)
        w.write(blob: r.member)
        w.write(zigzag: r.revokedAtMillis)
        RecordCodec.encode(seen: r.seen, into: &w)
        return w.bytes
    }

    /// What a claim's signature covers.
    public static func claimMessage(household: RecordID, _ c: OriginClaim) -> [UInt8] {
        var w = ByteWriter(capacity: 80)
        w.write(raw: Array("kidledger claim v1".utf8))
        w.write(id: household)
        w.write(bigEndian: c.origin.rawValue)
        w.write(blob: c.member)
        return w.bytes
    }
}

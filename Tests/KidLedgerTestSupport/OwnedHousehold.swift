import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerReplica

// Owned households built by hand for the membership rules' tests: a stand-in signature scheme,
// the owner's and spouse's signed records, and owner transfers signed by a recovery key.

/// A stand-in signature scheme for rule tests (the real one is Ed25519 through libsodium, tested
/// in KidLedgerSecurityTests): "signing" with a key is hashing it with the message.
public struct TestVerifier: SignatureVerifier {
    public init() {}
    public static func sign(_ message: [UInt8], key: [UInt8]) -> [UInt8] {
        SHA256.hash(key + message) + SHA256.hash(message + key)
    }
    public func isValid(signature: [UInt8], message: [UInt8], key: [UInt8]) -> Bool {
        signature == Self.sign(message, key: key)
    }
}

/// Builds the changes of an owned household by hand, as the CLI does with real keys.
public struct OwnedHousehold {
    public let ownerKey = [UInt8](repeating: 0xA1, count: 32)
    public let spouseKey = [UInt8](repeating: 0xB2, count: 32)
    public var salt = [UInt8](repeating: 7, count: 16)
    public init() {}
    public init(salt: [UInt8]) { self.salt = salt }
    public var id: RecordID { Membership.householdID(owner: ownerKey, salt: salt) }

    public func replica(_ seed: UInt64, clock: any WallClock = FixedClock(millis: 1_000_000)) throws -> Replica {
        try Replica(store: MemoryStore(), clock: clock, random: SplitMix64(seed: seed), verifier: TestVerifier())
    }

    /// The owner's signed genesis (or, with `signer`, one signed by that key).
    public func genesis(millis: Int64 = 1, name: String = "Home", signer: [UInt8]? = nil) -> Operation {
        var g = Household(id: id, createdAtMillis: millis, owner: ownerKey, salt: salt, name: name)
        g.signature = TestVerifier.sign(Membership.genesisMessage(g), key: signer ?? ownerKey)
        return .createHousehold(g)
    }

    /// The origin `key`'s claim with `nonce` names.
    public func origin(_ key: [UInt8], nonce: UInt64 = 0) -> ReplicaID {
        Membership.origin(household: id, member: key, nonce: nonce)
    }

    /// `key`'s signed claim of `origin`, with the nonce (below 256) that derives it from `key`
    /// when there is one (else nonce 0: a claim of an origin not derived from its key).
    public func claim(_ origin: ReplicaID, key: [UInt8]) -> Operation {
        let nonce = (0..<256).first { self.origin(key, nonce: $0) == origin } ?? 0
        var c = OriginClaim(origin: origin, member: key, nonce: nonce, signature: [])
        c.signature = TestVerifier.sign(Membership.claimMessage(household: id, c), key: key)
        return .claim(c)
    }

    /// The replica's signer for `key` (its claims signed as ``TestVerifier`` checks).
    public func signer(_ key: [UInt8]) -> MemberSigner {
        MemberSigner(key: key) { TestVerifier.sign($0, key: key) }
    }

    public func grant(_ member: [UInt8], name: String, signer: [UInt8]? = nil) -> Operation {
        var g = MemberGrant(member: member, name: name, grantedAtMillis: 5, signature: [])
        g.signature = TestVerifier.sign(Membership.grantMessage(household: id, g), key: signer ?? ownerKey)
        return .grant(g)
    }

    public func revoke(_ member: [UInt8], seen: [ReplicaID: UInt64], signer: [UInt8]? = nil) -> Operation {
        var r = MemberRevocation(member: member, revokedAtMillis: 9, seen: seen, signature: [])
        r.signature = TestVerifier.sign(Membership.revocationMessage(household: id, r), key: signer ?? ownerKey)
        return .revoke(r)
    }

    public func change(_ origin: ReplicaID, _ sequence: UInt64, millis: Int64, _ ops: [Operation]) -> Change {
        Change(origin: origin, sequence: sequence, hlc: HLC(millis: millis), operations: ops)
    }

    /// The child every fixture household starts with.
    public static let ava = RecordID(high: 0xAA, low: 1)

    /// A give of `cents` to Ava; its id and time are made from `id`.
    public func give(_ id: UInt64, _ cents: Int64) -> Operation {
        .addTransaction(LedgerTransaction(id: RecordID(high: id, low: id), childID: Self.ava, amountCents: cents,
                                          createdAtMillis: 1_000 + Int64(id), source: "give"))
    }

    /// The owner's first change (`genesis`, the owner's claim, Ava), one change of `grants` (the
    /// spouse's, "Dad"), and the spouse's first change (its claim and a give of 1.00), each under
    /// the origin its key derives with nonce 0.
    public func founding(genesis: Operation? = nil, grants: [Operation]? = nil) -> [Change] {
        let owner = origin(ownerKey), spouse = origin(spouseKey)
        return [change(owner, 1, millis: 1, [genesis ?? self.genesis(), claim(owner, key: ownerKey),
                                             .createChild(ChildRecord(id: Self.ava, createdAtMillis: 1)),
                                             .setField(entity: Self.ava, field: .childName, value: .text("Ava"))]),
                change(owner, 2, millis: 2, grants ?? [grant(spouseKey, name: "Dad")]),
                change(spouse, 1, millis: 3, [claim(spouse, key: spouseKey), give(1, 100)])]
    }
}

/// An owned household whose genesis names a recovery key, and owner transfers signed by it.
public struct RecoverableHousehold {
    public var h = OwnedHousehold()
    public let recoveryKey = [UInt8](repeating: 0xE5, count: 32)
    public let newKey = [UInt8](repeating: 0xD4, count: 32)
    public let malloryKey = [UInt8](repeating: 0xCC, count: 32)
    public init() {}

    public func genesis() -> Operation {
        var g = Household(id: h.id, createdAtMillis: 1, owner: h.ownerKey, salt: h.salt, name: "Home", recovery: recoveryKey)
        g.signature = TestVerifier.sign(Membership.genesisMessage(g), key: h.ownerKey)
        return .createHousehold(g)
    }

    /// A transfer of the older format (tag 8, sequences only) unless `seenChanges` names the
    /// changes it saw (``seenChanges(_:)``).
    public func transfer(to newOwner: [UInt8], epoch: UInt64, seen: [ReplicaID: UInt64], seenChanges: [[UInt8]]? = nil,
                  signer: [UInt8]? = nil, millis: Int64 = 20) -> Operation {
        var t = OwnerTransfer(newOwner: newOwner, epoch: epoch, transferredAtMillis: millis, seen: seen, seenChanges: seenChanges,
                              signature: [])
        t.signature = TestVerifier.sign(Membership.transferMessage(household: h.id, t), key: signer ?? recoveryKey)
        return .transferOwner(t)
    }

    /// What a transfer made by a replica holding `log` names as the changes it saw: those
    /// carrying a grant or a revocation, ascending (``Replica/transferSeen(_:_:_:)``).
    public static func seenChanges(_ log: [Change]) -> [[UInt8]] {
        log.filter { $0.operations.contains { switch $0 { case .grant, .revoke: true; default: false } } }
            .map { Membership.seenChangeKey(origin: $0.origin, encodedChange: RecordCodec.encode($0)) }
            .sorted { $0.lexicographicallyPrecedes($1) }
    }
}

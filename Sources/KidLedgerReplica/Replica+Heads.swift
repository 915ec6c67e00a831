import KidLedgerDomain

extension Tables {
    /// Signed chain heads (issue 20, point 2): origin (8) + sequence (8) + version hash (8), the
    /// log key of the change a head signs → the 64-byte signature of its origin's member over
    /// ``Membership/headMessage(household:_:)``. Written by the author at commit; part of the log
    /// (not of the merged state, not in the digest, untouched by a rebuild).
    public static let heads = Table("heads")
}

extension Replica {
    /// Signs and stores the heads of `changes` (just committed under one origin, in sequence
    /// order; `encoded` holds their canonical encodings): at the last one and at every sequence
    /// that is a multiple of ``Membership/headInterval``. Only in an owned household, and only
    /// when the origin is `signer`'s (its claim names the key): an origin of a household
    /// without an owner, or one this key did not claim, has no member key to authenticate to.
    static func signHeads(of changes: [Change], encoded: [[UInt8]], versions: [[UInt8]], signer: MemberSigner?,
                          in w: any KeyValueWriter) throws {
        guard let signer, let last = changes.last,
              let pin = try pinnedHousehold(w), !pin.owner.isEmpty,
              try w.get(Tables.claims, Keys.origin(last.origin)) == signer.key else { return }
        for (i, change) in changes.enumerated() where i == changes.count - 1 || change.sequence % Membership.headInterval == 0 {
            let head = signer.head(household: pin.id, origin: change.origin, sequence: change.sequence, encoded: encoded[i])
            try w.put(Tables.heads, Keys.change(change.origin, change.sequence, version: versions[i]), head.signature)
        }
    }

    /// The signed heads this replica holds for `origin`, in sequence order (each with the hash
    /// of the change it names, read from the log).
    public func signedHeads(of origin: ReplicaID) throws -> [SignedHead] {
        try store.read { r in
            var heads: [SignedHead] = []
            try r.scan(Tables.heads, prefix: Keys.origin(origin)) { key, signature in
                guard key.count == 24, let change = try r.get(Tables.changes, key) else {
                    throw LedgerError.corrupted("signed head without its change")
                }
                let sequence = key.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
                heads.append(SignedHead(origin: origin, sequence: sequence, changeHash: Membership.changeHash(change),
                                        signature: signature))
                return true
            }
            return heads
        }
    }

    /// ``verify()``'s check of the signed heads: each names a change the log holds and is the
    /// signature, over that change, of the key its origin's claim names.
    func verifyHeads(_ r: any KeyValueReader, problem: (String) -> Void) throws {
        var household: RecordID?
        try r.scan(Tables.households) { key, _ in
            if key.count == 16 { household = Keys.id(in: key, at: 0) }
            return false
        }
        try r.scan(Tables.heads) { key, signature in
            guard key.count == 24 else {
                problem("a signed head's key is damaged")
                return true
            }
            let (origin, sequence) = key.withUnsafeBytes {
                (ReplicaID(UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 0, as: UInt64.self))),
                 UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            }
            guard let change = try r.get(Tables.changes, key) else {
                problem("signed head of \(origin) at \(sequence) names no change of the log")
                return true
            }
            let head = SignedHead(origin: origin, sequence: sequence, changeHash: Membership.changeHash(change), signature: signature)
            guard let household, let member = try r.get(Tables.claims, Keys.origin(origin)),
                  Membership.isValid(head, of: change, household: household, key: member, verifier: verifier) else {
                problem("signed head of \(origin) at \(sequence) is not its member's signature over that change")
                return true
            }
            return true
        }
    }
}

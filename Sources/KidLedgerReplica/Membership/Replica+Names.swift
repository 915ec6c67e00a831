import KidLedgerDomain

/// Members' display names.
///
/// A member's name is the ``Field/memberName`` register of its entity
/// (``Membership/memberEntity(_:)``), written through the ordinary register merge (a `setField`
/// change). Only the member itself may write it: of the register's writes (its history, which
/// keeps every write), the name is the newest (the register order: stamp, then value bytes) of
/// those whose stamp's origin that member claimed. A write under another origin is kept in the
/// log and the history like any change, but never shown. Decided when read, from the writes and
/// the claims held, so the answer does not depend on whether a claim arrived before or after the
/// write; a write the revocation rule rejects never reaches the history.
extension Replica {
    /// The display name the member with key `member` chose, or nil when it chose none (then
    /// ``members()`` shows the name its grant gave, "owner" for the owner).
    public func memberName(of member: [UInt8]) throws -> String? {
        try store.read { r in try Self.chosenName(of: member, r) }
    }

    /// ``memberName(of:)`` in a read.
    static func chosenName(of member: [UInt8], _ r: any KeyValueReader) throws -> String? {
        var best: StoredRegister?
        try r.scan(Tables.registerHistory, prefix: Keys.register(Membership.memberEntity(member), .memberName)) { key, value in
            let (_, field, write) = try RegisterWrite.decode(key: key, value: value)
            guard field == .memberName, try r.get(Tables.claims, Keys.origin(write.stamp.origin)) == member else { return true }
            let candidate = StoredRegister(stamp: write.stamp, value: write.value)
            if best.map({ candidate.wins(over: $0) }) ?? true { best = candidate }
            return true
        }
        guard case .text(let name)? = best?.value else { return nil }
        return name
    }

    /// The name shown for `member`: the one it chose, else its grant's name, else "owner" for
    /// the owner; nil for a key that is neither.
    static func shownName(of member: [UInt8], _ r: any KeyValueReader) throws -> String? {
        if let chosen = try chosenName(of: member, r) { return chosen }
        var granted: String?
        try r.scan(Tables.grants, prefix: member) { _, value in
            granted = try storedGrant(value).name
            return false
        }
        if let granted { return granted }
        if let pin = try pinnedHousehold(r), pin.owner == member { return "owner" }
        return nil
    }

    /// Sets the display name of `member`, the member this device writes as (its claimed origin),
    /// as a local change; returns the name as stored (trimmed).
    ///
    /// - Throws: ``LedgerError/badName(_:)`` for an empty name, one longer than
    ///   ``Limits/memberNameBytesMax`` bytes or with control characters;
    ///   ``LedgerError/noHousehold`` before `init`/`join`; ``LedgerError/invalid(_:)`` when this
    ///   device's origin belongs to another member (the write would never count).
    @discardableResult
    public func setMemberName(_ raw: String, of member: [UInt8]) throws -> String {
        let name = Text.trimmed(raw)
        if let problem = Membership.memberNameProblem(name) { throw LedgerError.badName(problem) }
        let entity = Membership.memberEntity(member)
        let (_, stored) = try commitLocal { r, _ -> ([Operation], String) in
            _ = try Self.requireHousehold(r)
            if let claimed = try r.get(Tables.claims, Keys.origin(try Self.currentReplicaID(r))), claimed != member {
                throw LedgerError.invalid("this device writes as another member")
            }
            let base = try r.get(Tables.registers, Keys.register(entity, .memberName)).map { try StoredRegister.decode($0).stamp }
            return ([.setField(entity: entity, field: .memberName, value: .text(name), base: base)], name)
        }
        return stored
    }
}

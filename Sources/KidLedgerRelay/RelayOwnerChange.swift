import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerSecurity

/// Who a relay takes access lists from (docs/RELAY-DESIGN.md, "Running a relay"): the owner key it
/// pinned, the household's recovery public key the owner handed it at adoption (nil for a relay
/// adopted before it was handed one: it never changes owner), and the owner term (0 at adoption,
/// then the epoch of the owner transfer whose statement re-pinned it), and that statement, which
/// the relay hands members with their mailbox. Kept in the relay's home as `relay-owner`: the
/// owner's key in hex, then (when held) the recovery key in hex and the term, then (after an owner
/// change) the statement's bytes in hex, one per line.
public struct RelayPin: Equatable, Sendable {
    /// The owner key the relay verifies access lists with.
    public var owner: PublicKey
    /// The household's recovery public key, when the owner handed it.
    public var recovery: PublicKey?
    /// The owner term: 0 at adoption, then the transfer epoch of the last accepted statement.
    public var term: UInt64
    /// The recovery-signed statement that re-pinned it (nil at adoption).
    public var statement: RelayOwnerStatement?

    /// A pin.
    public init(owner: PublicKey, recovery: PublicKey?, term: UInt64 = 0, statement: RelayOwnerStatement? = nil) {
        self.owner = owner
        self.recovery = recovery
        self.term = term
        self.statement = statement
    }

    /// The file's text.
    public var text: String {
        var lines = [owner.hex]
        if let recovery { lines += [recovery.hex, String(term)] }
        if recovery != nil, let statement { lines.append(Hex.encode(statement.encoded)) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Reads ``text`` (one line: a relay adopted without a recovery key; three: no owner change
    /// yet); nil when it is not one.
    public init?(text: String) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        guard (1...4).contains(lines.count) && lines.count != 2,
              let owner = Hex.decode(lines[0]).flatMap(PublicKey.init(bytes:)) else { return nil }
        guard lines.count >= 3 else {
            self.init(owner: owner, recovery: nil)
            return
        }
        guard let recovery = Hex.decode(lines[1]).flatMap(PublicKey.init(bytes:)), let term = UInt64(lines[2]) else { return nil }
        var statement: RelayOwnerStatement?
        if lines.count == 4 {
            guard let bytes = Hex.decode(lines[3]), let decoded = try? RelayOwnerStatement.decode(bytes),
                  decoded.newOwner == owner && decoded.term == term else { return nil }
            statement = decoded
        }
        self.init(owner: owner, recovery: recovery, term: term, statement: statement)
    }
}

/// A statement signed by the household's recovery key that `newOwner` owns the household from
/// owner term `term` on (the epoch of the owner transfer that made it the owner), for one relay:
///
/// ```
/// new owner 32 | term u64 | signature 64
/// signature = the recovery key's Ed25519 signature of
///             "kidledger relay owner v1" 0 | relay key 32 | new owner 32 | term u64
/// ```
///
/// `kidledger recover` signs one per granted relay while it holds the recovery secret; the relay,
/// which pinned the recovery public key at adoption, re-pins its owner with it. It names no
/// household and nothing else of it.
public struct RelayOwnerStatement: Equatable, Sendable {
    /// The encoding's length.
    public static let bytes = 32 + 8 + Identity.signatureByteCount
    static let domain = "kidledger relay owner v1"

    /// The new owner's identity key.
    public let newOwner: PublicKey
    /// The owner term it starts.
    public let term: UInt64
    /// The recovery key's signature.
    public let signature: [UInt8]

    private init(newOwner: PublicKey, term: UInt64, signature: [UInt8]) {
        self.newOwner = newOwner
        self.term = term
        self.signature = signature
    }

    /// The statement for `relay`, signed with `recovery` (the key pair of the recovery secret).
    public static func sign(relay: PublicKey, newOwner: PublicKey, term: UInt64, recovery: Identity) -> RelayOwnerStatement {
        RelayOwnerStatement(newOwner: newOwner, term: term, signature: recovery.sign(message(relay: relay, newOwner: newOwner, term: term)))
    }

    /// The bytes the recovery key signs.
    static func message(relay: PublicKey, newOwner: PublicKey, term: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: domain.utf8.count + 1 + 72)
        w.write(raw: domain.utf8)
        w.write(0)
        w.write(raw: relay.bytes)
        w.write(raw: newOwner.bytes)
        w.write(bigEndian: term)
        return w.bytes
    }

    /// Whether `recovery` signed this statement for `relay`.
    public func verifies(relay: PublicKey, recovery: PublicKey) -> Bool {
        Identity.verify(signature: signature, message: Self.message(relay: relay, newOwner: newOwner, term: term), key: recovery)
    }

    /// The canonical bytes.
    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: Self.bytes)
        w.write(raw: newOwner.bytes)
        w.write(bigEndian: term)
        w.write(raw: signature)
        return w.bytes
    }

    static func read(_ r: inout ByteReader) throws(DecodeError) -> RelayOwnerStatement {
        guard let owner = PublicKey(bytes: try r.readRaw(count: 32, "new owner")) else { throw .invalid("new owner key") }
        let term = try r.readBigEndianUInt64("owner term")
        return RelayOwnerStatement(newOwner: owner, term: term, signature: try r.readRaw(count: Identity.signatureByteCount, "statement signature"))
    }

    /// Decodes ``encoded``; refuses short and trailing input. Never traps.
    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> RelayOwnerStatement {
        var r = ByteReader(bytes)
        let statement = try read(&r)
        try r.expectEnd()
        return statement
    }
}

/// The owner change (docs/RELAY-DESIGN.md, "Running a relay"): after a recovery, the new owner's
/// laptop dials an adopted relay as its identity key and sends, in place of a session, one
/// `ownerChange` frame (type 42: statement | the new owner's signed access list); the relay answers
/// `ownerChanged` (type 43: term u64) or a relay `error` (type 18) and closes. Outside
/// ``RelayMessage``, as the adoption.
public enum RelayOwnerChange {
    /// The frame type of `ownerChange`.
    public static let changeType: UInt8 = 42
    /// The frame type of `ownerChanged`.
    public static let changedType: UInt8 = 43
    /// The wire code of a refused owner change.
    public static let refusedCode: UInt16 = 22
    /// The longest `ownerChange` frame accepted.
    public static let frameBytesMax = 5 + RelayOwnerStatement.bytes + SignedRelayAccessList.bytesMax

    /// The `ownerChange` frame.
    public static func frame(_ statement: RelayOwnerStatement, list: SignedRelayAccessList) -> [UInt8] {
        Frame.encode(type: changeType, payload: statement.encoded + list.encoded)
    }

    /// The `ownerChanged` frame.
    public static func changedFrame(term: UInt64) -> [UInt8] {
        var w = ByteWriter(capacity: 8)
        w.write(bigEndian: term)
        return Frame.encode(type: changedType, payload: w.bytes)
    }

    /// Decodes an `ownerChange` payload. - Throws: ``RelaySessionError/malformed(_:)``.
    public static func decode(_ payload: [UInt8]) throws(RelaySessionError) -> (statement: RelayOwnerStatement, list: SignedRelayAccessList) {
        var r = ByteReader(payload)
        do {
            let statement = try RelayOwnerStatement.read(&r)
            let list = try SignedRelayAccessList.read(&r)
            try r.expectEnd()
            return (statement, list)
        } catch {
            throw .malformed("owner change: \(error)")
        }
    }

    /// Applies an `ownerChange` payload from `peer` to the relay `relay` pinned as `pin`: the
    /// statement must verify under the pinned recovery key for this relay, start a term above the
    /// pinned one, and name `peer` as the new owner; the list must verify under the new owner. Then
    /// the list is installed whatever the number of the one held (a former owner's list numbered
    /// at the maximum gives way), and the new pin persisted, before the answer. A repeated
    /// statement already applied (same owner and term: its answer was lost) changes nothing and
    /// is answered again. Anything else throws with nothing changed.
    /// - Returns: the pin now held.
    public static func apply(_ payload: [UInt8], relay: PublicKey, pin: RelayPin, peer: PublicKey, store: RelayStore,
                             persist: (RelayPin) throws -> Void) throws(RelaySessionError) -> RelayPin {
        let request = try decode(payload)
        func refused(_ why: String) -> RelaySessionError { .refusedByPeer(code: refusedCode, message: "owner change refused: " + why) }
        let statement = request.statement
        guard let recovery = pin.recovery else {
            throw refused("this relay was adopted without the household's recovery key, so it can't follow a recovery; wipe its home and add it again")
        }
        guard statement.verifies(relay: relay, recovery: recovery) else {
            throw refused("the statement is not signed by this household's recovery key for this relay")
        }
        guard statement.newOwner == peer else { throw refused("the statement names another key than the one that dialled") }
        if statement.term == pin.term && statement.newOwner == pin.owner { return pin }
        guard statement.term > pin.term else {
            throw refused("owner term \(statement.term) is not above the relay's term \(pin.term)")
        }
        let list = try request.list.verified(relay: relay, owner: statement.newOwner)
        let next = RelayPin(owner: statement.newOwner, recovery: recovery, term: statement.term, statement: statement)
        do {
            _ = try store.install(list, overridingHeld: true)
            try persist(next)
        } catch let error as RelaySessionError {
            throw error
        } catch {
            throw .storage("\(error)")
        }
        return next
    }
}

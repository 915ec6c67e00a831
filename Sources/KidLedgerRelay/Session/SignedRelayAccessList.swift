import KidLedgerDomain
import KidLedgerSecurity

/// An access list signed by the household's owner for one relay (docs/RELAY-DESIGN.md,
/// "Sessions"): the relay pins the owner's key when it is added and installs only a list that
/// verifies with it for its own key, and whose number is above the one it holds.
///
/// ```
/// version u8 = 1 | list length varint (13...40,013) | list (RelayAccessList.encoded) | signature 64
/// signature = the owner's Ed25519 signature of
///             "kidledger relay access list v1" 0 | relay key 32 | list bytes
/// ```
///
/// The relay key is not sent (both sides know it): a list signed for another relay fails to verify.
public struct SignedRelayAccessList: Equatable, Sendable {
    /// The encoding's version byte.
    public static let version: UInt8 = 1
    /// The longest encoded list: 13 bytes and 40 per key.
    public static let listBytesMax = 13 + RelayAccessList.membersMax * 40
    /// The longest encoding.
    public static let bytesMax = 1 + 3 + listBytesMax + Identity.signatureByteCount
    static let domain = "kidledger relay access list v1"

    /// The list's canonical bytes (as signed).
    public let listBytes: [UInt8]
    /// The owner's 64-byte signature.
    public let signature: [UInt8]

    private init(listBytes: [UInt8], signature: [UInt8]) {
        self.listBytes = listBytes
        self.signature = signature
    }

    /// `list` signed by `owner` for the relay whose key is `relay`.
    public static func sign(_ list: RelayAccessList, relay: PublicKey, owner: Identity) -> SignedRelayAccessList {
        let bytes = list.encoded
        return SignedRelayAccessList(listBytes: bytes, signature: owner.sign(message(relay: relay, list: bytes)))
    }

    /// The bytes the owner signs.
    static func message(relay: PublicKey, list: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: domain.utf8.count + 33 + list.count)
        w.write(raw: domain.utf8)
        w.write(0)
        w.write(raw: relay.bytes)
        w.write(raw: list)
        return w.bytes
    }

    /// The list, once the signature verifies with `owner` for the relay `relay`.
    /// - Throws: ``RelaySessionError/notSignedByOwner`` when it does not;
    ///   ``RelaySessionError/malformed(_:)`` when the signed bytes are not a list.
    public func verified(relay: PublicKey, owner: PublicKey) throws(RelaySessionError) -> RelayAccessList {
        guard Identity.verify(signature: signature, message: Self.message(relay: relay, list: listBytes), key: owner) else {
            throw .notSignedByOwner
        }
        do { return try RelayAccessList.decode(listBytes) } catch { throw .malformed("signed access list: \(error)") }
    }

    /// The list's number, read without checking the signature (what a member compares with the
    /// relay's before it offers the list); nil when the bytes are not a list.
    public var number: UInt64? { try? RelayAccessList.decode(listBytes).number }

    /// The canonical bytes.
    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 4 + listBytes.count + signature.count)
        w.write(Self.version)
        w.write(blob: listBytes)
        w.write(raw: signature)
        return w.bytes
    }

    /// Reads ``encoded`` from `r` (the list's bytes are checked when verified, not here).
    static func read(_ r: inout ByteReader) throws(DecodeError) -> SignedRelayAccessList {
        guard try r.readByte("signed list version") == version else { throw .invalid("signed list version") }
        let list = try r.readBlob(maxCount: listBytesMax, "access list")
        guard list.count >= 13 else { throw .invalid("access list of \(list.count) bytes") }
        return SignedRelayAccessList(listBytes: list, signature: try r.readRaw(count: Identity.signatureByteCount, "list signature"))
    }

    /// Decodes ``encoded``; refuses short, trailing and out-of-range input. Never traps.
    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> SignedRelayAccessList {
        var r = ByteReader(bytes)
        let signed = try read(&r)
        try r.expectEnd()
        return signed
    }
}

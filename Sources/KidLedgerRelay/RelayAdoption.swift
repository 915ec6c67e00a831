import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerSecurity

/// The one-time code a relay prints until an owner adopts it (docs/RELAY-DESIGN.md, "Adoption"):
/// `KLR1-` then base64url (no padding, as ``InviteCode``) of version u8 (1) | relay key 32 |
/// secret 16...32 (blob) | address count varint (1...4) | addresses as strings ("host:port").
public struct RelayCode: Equatable, Sendable {
    /// The relay's device key: the owner pins it when dialling.
    public var relay: [UInt8]
    /// The one-time secret the owner proves in `adopt`.
    public var secret: [UInt8]
    /// Where the relay listens.
    public var addresses: [String]

    /// The format version written and read.
    public static let version: UInt8 = 1
    /// The text prefix.
    public static let prefix = "KLR1-"
    /// Secret length bounds.
    public static let secretBytes = 16...32

    /// A code.
    public init(relay: [UInt8], secret: [UInt8], addresses: [String]) {
        self.relay = relay
        self.secret = secret
        self.addresses = addresses
    }

    /// The text to hand to the owner.
    public var text: String {
        var w = ByteWriter(capacity: 96)
        w.write(Self.version)
        w.write(raw: relay)
        w.write(blob: secret)
        w.write(varint: UInt64(addresses.count))
        for address in addresses { w.write(string: address) }
        return Self.prefix + Base64URL.encode(w.bytes)
    }

    /// Parses a code; nil for anything that is not a well-formed relay code (never traps).
    public init?(text raw: String) {
        guard let bytes = Base64URL.decode(code: raw, prefix: Self.prefix) else { return nil }
        var r = ByteReader(bytes)
        guard (try? r.readByte()) == Self.version,
              let relay = try? r.readRaw(count: 32),
              let secret = try? r.readBlob(maxCount: Self.secretBytes.upperBound), Self.secretBytes.contains(secret.count),
              let count = try? r.readVarint(), (1...UInt64(Limits.relayAddressesMax)).contains(count) else { return nil }
        var addresses: [String] = []
        for _ in 0..<count {
            guard let a = try? r.readString(maxBytes: Limits.relayAddressBytesMax), !a.isEmpty else { return nil }
            addresses.append(a)
        }
        guard r.isAtEnd, RelayAddress.listProblem(addresses) == nil else { return nil }
        self.init(relay: relay, secret: secret, addresses: addresses)
    }
}

/// Adoption: the first connection of the owner to a relay no owner adopted yet. Inside the
/// `SecureChannel` (which authenticated the owner's identity key and the relay's key pinned from
/// the code) the owner sends one `adopt` frame (type 40: secret blob | signed access list |
/// the household's recovery public key 32, absent from an older owner's frame); the
/// relay answers `adopted` (type 41, empty) or a relay `error` (type 18) and closes. These frame
/// types are outside ``RelayMessage`` (an adopted relay never reads them; an unadopted one reads
/// nothing else).
public enum RelayAdoption {
    /// The frame type of `adopt`.
    public static let adoptType: UInt8 = 40
    /// The frame type of `adopted`.
    public static let adoptedType: UInt8 = 41
    /// The longest `adopt` frame accepted.
    public static let frameBytesMax = 5 + 1 + RelayCode.secretBytes.upperBound + SignedRelayAccessList.bytesMax + 32 + 8

    /// The `adopt` frame; `recovery` is the household's recovery public key (nil: a household without one).
    public static func adoptFrame(secret: [UInt8], list: SignedRelayAccessList, recovery: PublicKey? = nil) -> [UInt8] {
        var w = ByteWriter(capacity: 256)
        w.write(blob: secret)
        w.write(raw: list.encoded)
        if let recovery { w.write(raw: recovery.bytes) }
        return Frame.encode(type: adoptType, payload: w.bytes)
    }

    /// The `adopted` frame.
    public static var adoptedFrame: [UInt8] { Frame.encode(type: adoptedType, payload: []) }

    /// Decodes an `adopt` payload. - Throws: ``RelaySessionError/malformed(_:)``.
    public static func decodeAdopt(_ payload: [UInt8]) throws(RelaySessionError) -> (secret: [UInt8], list: SignedRelayAccessList, recovery: PublicKey?) {
        var r = ByteReader(payload)
        do {
            let secret = try r.readBlob(maxCount: RelayCode.secretBytes.upperBound, "secret")
            guard RelayCode.secretBytes.contains(secret.count) else { throw RelaySessionError.malformed("adopt: a secret of \(secret.count) bytes") }
            let list = try SignedRelayAccessList.read(&r)
            guard r.isAtEnd else {
                guard let recovery = PublicKey(bytes: try r.readRaw(count: 32, "recovery key")) else { throw RelaySessionError.malformed("adopt: a bad recovery key") }
                try r.expectEnd()
                return (secret, list, recovery)
            }
            return (secret, list, nil)
        } catch let error as RelaySessionError {
            throw error
        } catch {
            throw .malformed("adopt: \(error)")
        }
    }

    /// Whether `a` equals `b`, in time independent of where they differ (lengths are public).
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

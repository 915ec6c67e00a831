/// The relay's membership records (issue 44; docs/RELAY-DESIGN.md, "Membership operations").
///
/// The owner grants a relay (``RelayGrant``), revokes it (``RelayRevocation``) and writes the
/// household's epoch records (``RelayEpoch``); each carries the owner's signature and counts under
/// exactly the rule a member grant does (the owner whose term covers the change signed it). A
/// member publishes the public half of its relay key pair for one relay (``MemberRelayKey``) under
/// its own origin, as it writes its display name: no signature, the change's signed head
/// authenticates it, and only writes under origins that member claimed count.

/// The owner's grant of a relay: its device key, where members dial it, and the key that names
/// the household's streams on it (a secret of the members: the relay never sees it).
public struct RelayGrant: Hashable, Sendable {
    /// The relay's Ed25519 device key (32 bytes), pinned when members dial it.
    public var relay: [UInt8]
    /// Where members dial it, in the owner's order of preference: 0 to ``Limits/relayAddressesMax``
    /// distinct "host:port" strings (``RelayAddress/problem(_:)``).
    public var addresses: [String]
    /// 32 random bytes: streams on the relay are tagged with a keyed hash of the origin under it.
    public var streamKey: [UInt8]
    /// When.
    public var grantedAtMillis: Int64
    /// The owner's signature over ``Membership/relayGrantMessage(household:_:)``.
    public var signature: [UInt8]

    /// Creates a grant.
    public init(relay: [UInt8], addresses: [String], streamKey: [UInt8], grantedAtMillis: Int64, signature: [UInt8]) {
        self.relay = relay
        self.addresses = addresses
        self.streamKey = streamKey
        self.grantedAtMillis = grantedAtMillis
        self.signature = signature
    }
}

/// The owner's removal of a relay. Permanent for that relay key, like a member's revocation:
/// it wins over every grant of the key (a replacement relay is a new key).
public struct RelayRevocation: Hashable, Sendable {
    /// The relay's device key.
    public var relay: [UInt8]
    /// When.
    public var revokedAtMillis: Int64
    /// The owner's signature over ``Membership/relayRevocationMessage(household:_:)``.
    public var signature: [UInt8]

    /// Creates a revocation.
    public init(relay: [UInt8], revokedAtMillis: Int64, signature: [UInt8]) {
        self.relay = relay
        self.revokedAtMillis = revokedAtMillis
        self.signature = signature
    }
}

/// An epoch record (KidLedgerSecurity's `EpochRecord`, by its canonical bytes) signed by the
/// owner. The domain checks only its length; the replica decodes it with `EpochRecord.decode`,
/// and one that does not decode never counts (docs/RELAY-DESIGN.md).
public struct RelayEpoch: Hashable, Sendable {
    /// The record's bytes (at most ``Limits/relayEpochRecordBytesMax``).
    public var record: [UInt8]
    /// The owner's signature over ``Membership/relayEpochMessage(household:_:)``.
    public var signature: [UInt8]

    /// Creates one.
    public init(record: [UInt8], signature: [UInt8]) {
        self.record = record
        self.signature = signature
    }
}

/// A member's relay public key for one relay, written under the member's own origin (the member
/// is whoever claimed the change's origin). Per (member, relay) the newest write counts: the
/// change's stamp (HLC, then origin), then the key's bytes.
public struct MemberRelayKey: Hashable, Sendable {
    /// The relay's device key.
    public var relay: [UInt8]
    /// The member's Ed25519 public key for that relay (derived from its identity and the relay).
    public var key: [UInt8]

    /// Creates one.
    public init(relay: [UInt8], key: [UInt8]) {
        self.relay = relay
        self.key = key
    }
}

/// The rule for a relay's address in a grant.
public enum RelayAddress {
    /// What is wrong with `address` as a relay address, or nil: "host:port" of printable ASCII
    /// without spaces, at most ``Limits/relayAddressBytesMax`` bytes, a non-empty host (an IPv6
    /// host in brackets, any other without a colon) and a port 1...65535 without leading zeros.
    public static func problem(_ address: String) -> String? {
        let bytes = Array(address.utf8)
        guard !bytes.isEmpty, bytes.count <= Limits.relayAddressBytesMax else {
            return "a relay address has 1 to \(Limits.relayAddressBytesMax) bytes"
        }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return "a relay address is printable ASCII without spaces" }
        guard let colon = bytes.lastIndex(of: UInt8(ascii: ":")) else { return "a relay address is host:port" }
        let host = bytes[..<colon], port = bytes[(colon + 1)...]
        guard !host.isEmpty else { return "a relay address needs a host" }
        if host.first == UInt8(ascii: "[") {
            guard host.count > 2, host.last == UInt8(ascii: "]"),
                  !host.dropFirst().dropLast().contains(where: { $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "]") }) else {
                return "a relay address's bracketed host is not closed"
            }
        } else if host.contains(UInt8(ascii: ":")) || host.contains(UInt8(ascii: "]")) {
            return "a relay address's IPv6 host goes in brackets"
        }
        guard !port.isEmpty, port.count <= 5, port.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), port.first != UInt8(ascii: "0"),
              let number = Int(String(decoding: port, as: UTF8.self)), number <= 65_535 else {
            return "a relay address's port is 1 to 65535"
        }
        return nil
    }

    /// What is wrong with `addresses` as a grant's list, or nil: at most
    /// ``Limits/relayAddressesMax``, each valid, no two equal.
    public static func listProblem(_ addresses: [String]) -> String? {
        guard addresses.count <= Limits.relayAddressesMax else { return "a relay grant names at most \(Limits.relayAddressesMax) addresses" }
        for (i, address) in addresses.enumerated() {
            if let problem = problem(address) { return problem }
            if addresses[..<i].contains(address) { return "a relay address is listed twice" }
        }
        return nil
    }
}

extension Membership {
    /// What a relay grant's signature covers.
    public static func relayGrantMessage(household: RecordID, _ g: RelayGrant) -> [UInt8] {
        message("kidledger relay grant v1", household: household) { w in
            RecordCodec.encodeFields(of: g, into: &w)
        }
    }

    /// What a relay revocation's signature covers.
    public static func relayRevocationMessage(household: RecordID, _ r: RelayRevocation) -> [UInt8] {
        message("kidledger relay revoke v1", household: household) { w in
            w.write(blob: r.relay)
            w.write(zigzag: r.revokedAtMillis)
        }
    }

    /// What an epoch record's outer signature covers (the boxes inside carry their own).
    public static func relayEpochMessage(household: RecordID, _ e: RelayEpoch) -> [UInt8] {
        message("kidledger relay epoch v1", household: household) { w in
            w.write(blob: e.record)
        }
    }
}

import KidLedgerDomain
import Testing
@testable import KidLedgerSecurity

/// A member's relay key pair (``RelayMemberIdentity``): the same identity and relay give the same
/// pair on every laptop; another relay or another identity gives an unrelated one, and none is the
/// identity's own key.
@Suite struct RelayMemberIdentityTests {
    static func identity(_ byte: UInt8) -> Identity { try! Identity(seed: [UInt8](repeating: byte, count: 32)) }

    @Test func derivationIsDeterministicAndDiffersPerRelayAndMember() throws {
        let me = Self.identity(1), other = Self.identity(2)
        let relayA = Self.identity(8).publicKey.bytes, relayB = Self.identity(9).publicKey.bytes
        let a1 = try RelayMemberIdentity.derive(from: me, relay: relayA)
        let a2 = try RelayMemberIdentity.derive(from: try Identity(seed: me.seed), relay: relayA)
        #expect(a1.publicKey == a2.publicKey && a1.seed == a2.seed)
        let b = try RelayMemberIdentity.derive(from: me, relay: relayB)
        let otherA = try RelayMemberIdentity.derive(from: other, relay: relayA)
        let keys = [me.publicKey, a1.publicKey, b.publicKey, otherA.publicKey]
        #expect(Set(keys).count == keys.count)
        // It signs like any identity.
        let message = Array("access".utf8)
        #expect(Identity.verify(signature: a1.sign(message), message: message, key: a1.publicKey))
        #expect(throws: RelaySealError.self) { try RelayMemberIdentity.derive(from: me, relay: [1, 2, 3]) }
    }

    /// The seed is the keyed BLAKE2b-256 the design names: a vector computed apart (Python's
    /// `hashlib.blake2b(b"kidledger relay member key v1\\x00" + relay, key=seed, digest_size=32)`),
    /// and the key pair is that seed's (a change of derivation would orphan every published key).
    @Test func derivationIsTheDocumentedHash() throws {
        let me = Self.identity(1), relay = [UInt8](repeating: 0x42, count: 32)
        let derived = try RelayMemberIdentity.derive(from: me, relay: relay)
        #expect(Hex.encode(derived.seed) == "074fd8ccaef1caff9d0c5689606b883917dfd60db76904945fe33b04e301cea4")
        #expect(derived.publicKey == (try Identity(seed: derived.seed)).publicKey)
        #expect(derived.publicKey.hex == "b974453b82b41b1e69f29bc07f47b4f7b5251265fe016077715e2b3f07d23e19")
    }
}

import KidLedgerDomain
import Testing
@testable import KidLedgerSecurity

/// Seeds drawn from a seeded generator so every run is the same.
enum Seeds {
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var g = SplitMix64(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: g.next()) }
    }

    static func identity(_ n: UInt64) -> Identity {
        try! Identity(seed: bytes(32, seed: 0x1D_0000 &+ n))
    }
}

@Suite("Ed25519 identities")
struct IdentityTests {
    @Test func signAndVerify() {
        let id = Seeds.identity(1)
        let message = Array("pay 3 EUR to Ada".utf8)
        let signature = id.sign(message)
        #expect(signature.count == 64)
        #expect(Identity.verify(signature: signature, message: message, key: id.publicKey))
        #expect(Identity.verify(signature: id.sign([]), message: [], key: id.publicKey))
    }

    @Test func tamperedMessageSignatureOrKeyIsRejected() {
        let id = Seeds.identity(1), other = Seeds.identity(2)
        let message = Array("pay 3 EUR to Ada".utf8)
        let signature = id.sign(message)
        for i in 0..<message.count {
            var m = message
            m[i] ^= 0x01
            #expect(!Identity.verify(signature: signature, message: m, key: id.publicKey))
        }
        for i in 0..<signature.count {
            var s = signature
            s[i] ^= 0x80
            #expect(!Identity.verify(signature: s, message: message, key: id.publicKey))
        }
        #expect(!Identity.verify(signature: signature, message: message, key: other.publicKey))
        #expect(!Identity.verify(signature: Array(signature.dropLast()), message: message, key: id.publicKey))
        #expect(!Identity.verify(signature: [], message: message, key: id.publicKey))
        // A garbage (non-point) key never verifies and never crashes.
        let garbage = PublicKey(bytes: [UInt8](repeating: 0xFF, count: 32))!
        #expect(!Identity.verify(signature: signature, message: message, key: garbage))
    }

    @Test func keysAreDeterministicFromTheSeed() throws {
        let seed = Seeds.bytes(32, seed: 7)
        let a = try Identity(seed: seed), b = try Identity(seed: seed)
        #expect(a.publicKey == b.publicKey)
        #expect(a.seed == seed)
        #expect(a.sign([1, 2, 3]) == b.sign([1, 2, 3])) // Ed25519 signatures are deterministic
        #expect(Seeds.identity(1).publicKey != Seeds.identity(2).publicKey)
        // RFC 8032 test vector 1: all-zero-ish seed 9d61b1...; public key d75a98...
        let rfc = try Identity(seed: Hex.decode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")!)
        #expect(rfc.publicKey.hex == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        #expect(Hex.encode(rfc.sign([])) == "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
            + "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
    }

    @Test func badSeedLengthThrows() {
        #expect(throws: SecurityError.self) { try Identity(seed: [1, 2, 3]) }
        #expect(throws: SecurityError.self) { try Identity(seed: [UInt8](repeating: 0, count: 33)) }
    }

    @Test func generateGivesDistinctKeys() {
        #expect(Identity.generate().publicKey != Identity.generate().publicKey)
    }

    @Test func publicKeyTextForms() {
        let key = Seeds.identity(3).publicKey
        #expect(key.hex.count == 64)
        #expect(PublicKey(hex: key.hex) == key)
        #expect(PublicKey(hex: key.hex.uppercased()) == key)
        #expect(PublicKey(hex: "abc") == nil)
        #expect(PublicKey(hex: String(repeating: "zz", count: 32)) == nil)
        #expect(PublicKey(bytes: [1, 2]) == nil)
        #expect(key.description == key.fingerprint)
        #expect(key.fingerprint.count == 19)
        #expect(String(key.fingerprint.filter { $0 != "-" }) == String(key.hex.prefix(16)))
        let a = PublicKey(bytes: [UInt8](repeating: 1, count: 32))!, b = PublicKey(bytes: [UInt8](repeating: 2, count: 32))!
        #expect(a < b && !(b < a))
    }
}

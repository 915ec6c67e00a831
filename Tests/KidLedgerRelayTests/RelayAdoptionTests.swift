import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerSecurity
import KidLedgerTestSupport
import Testing

@Suite("Relay codes and adoption frames")
struct RelayAdoptionTests {
    let key = [UInt8](repeating: 0x5A, count: 32)
    let secret = [UInt8](repeating: 0xC3, count: 16)

    @Test func codeRoundTrips() throws {
        let code = RelayCode(relay: key, secret: secret, addresses: ["relay.example:4718", "[::1]:4718"])
        #expect(code.text.hasPrefix("KLR1-"))
        #expect(RelayCode(text: code.text) == code)
        #expect(RelayCode(text: " " + code.text.prefix(20) + "\n" + code.text.dropFirst(20)) == code, "whitespace is forgiven")
    }

    @Test func malformedCodesAreRefusedWithoutTrapping() {
        let good = RelayCode(relay: key, secret: secret, addresses: ["127.0.0.1:1"]).text
        #expect(RelayCode(text: "") == nil)
        #expect(RelayCode(text: "KL1-" + good.dropFirst(5)) == nil)
        #expect(RelayCode(text: "KLR1-") == nil)
        #expect(RelayCode(text: "KLR1-!!!") == nil)
        for cut in 5..<good.count { _ = RelayCode(text: String(good.prefix(cut))) }
        #expect(RelayCode(text: String(good.dropLast(3))) == nil)
        #expect(RelayCode(text: RelayCode(relay: key, secret: [1, 2], addresses: ["127.0.0.1:1"]).text) == nil, "a short secret")
        #expect(RelayCode(text: RelayCode(relay: key, secret: secret, addresses: []).text) == nil, "no address")
        #expect(RelayCode(text: RelayCode(relay: key, secret: secret, addresses: ["no port"]).text) == nil, "a bad address")
        #expect(RelayCode(text: RelayCode(relay: key, secret: secret, addresses: Array(repeating: "a:1", count: 5)).text) == nil)
        var random = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            let bytes = (0..<Int(random.next() % 120)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            _ = RelayCode(text: "KLR1-" + Base64URL.encode(bytes))
        }
    }

    @Test func adoptFrameRoundTripsAndRefusesGarbage() throws {
        let owner = try Identity(seed: [UInt8](repeating: 0x11, count: 32))
        let relay = try Identity(seed: [UInt8](repeating: 0x12, count: 32))
        let list = SignedRelayAccessList.sign(try RelayAccessList(number: 3, quotas: [RelayMemberKey(bytes: key)!: 1 << 20]),
                                              relay: relay.publicKey, owner: owner)
        var decoder = FrameDecoder()
        decoder.push(RelayAdoption.adoptFrame(secret: secret, list: list))
        let frame = try #require(try decoder.next(limit: RelayAdoption.frameBytesMax))
        #expect(frame.type == RelayAdoption.adoptType)
        let decoded = try RelayAdoption.decodeAdopt(frame.payload)
        #expect(decoded.secret == secret && decoded.list == list)
        #expect(try decoded.list.verified(relay: relay.publicKey, owner: owner.publicKey).number == 3)
        #expect(throws: RelaySessionError.self) { try RelayAdoption.decodeAdopt([]) }
        #expect(throws: RelaySessionError.self) { try RelayAdoption.decodeAdopt([2, 1, 2]) }
        #expect(throws: RelaySessionError.self) { try RelayAdoption.decodeAdopt(frame.payload.dropLast(1).map { $0 }) }
        for cut in 0..<frame.payload.count { _ = try? RelayAdoption.decodeAdopt(Array(frame.payload.prefix(cut))) }
        // With the household's recovery key (after the list), and without it (an older owner's frame).
        var withKey = FrameDecoder()
        withKey.push(RelayAdoption.adoptFrame(secret: secret, list: list, recovery: owner.publicKey))
        let keyed = try RelayAdoption.decodeAdopt(try #require(try withKey.next(limit: RelayAdoption.frameBytesMax)).payload)
        #expect(keyed.list == list && keyed.recovery == owner.publicKey)
        #expect(decoded.recovery == nil)
        #expect(throws: RelaySessionError.self) { try RelayAdoption.decodeAdopt(frame.payload + [1, 2, 3]) }
    }

    @Test func secretsCompareInConstantTimeShape() {
        #expect(RelayAdoption.constantTimeEqual(secret, secret))
        #expect(!RelayAdoption.constantTimeEqual(secret, secret.dropLast(1) + [0]))
        #expect(!RelayAdoption.constantTimeEqual(secret, Array(secret.prefix(15))))
    }
}

import KidLedgerDomain
import Synchronization
import Testing
@testable import KidLedgerSecurity

@Suite("Short codes and CPace")
struct ShortCodeTests {
    static func codes(_ count: Int, seed: UInt64) -> [ShortCode] {
        var g = SplitMix64(seed: seed)
        return (0..<count).map { i in ShortCode(slot: UInt8(i % ShortCode.slots), using: &g) }
    }

    @Test func encodesAndParsesBackWithForgivingNormalisation() throws {
        for code in Self.codes(200, seed: 1) {
            let text = code.text
            #expect(text.count == 14 && text.split(separator: "-").count == 3)
            #expect(try ShortCode.parse(text).get() == code)
            // Lower case, no dashes, spaces, and look-alike letters are forgiven.
            let sloppy = text.lowercased().replacingOccurrences("-", " ").replacingOccurrences("0", "o").replacingOccurrences("1", "l")
            #expect(try ShortCode.parse("  " + sloppy + " ").get() == code)
            #expect(try ShortCode.parse(text.replacingOccurrences("-", "")).get() == code)
        }
        #expect(ShortCode(slot: 15, secret: .max).secret == (1 << 46) - 1)
    }

    @Test func checksumCatchesEverySingleSymbolErrorAndAdjacentTransposition() {
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        for code in Self.codes(300, seed: 2) {
            let symbols = Array(code.text.filter { $0 != "-" })
            for i in 0..<symbols.count {
                for replacement in alphabet where replacement != symbols[i] {
                    var typo = symbols
                    typo[i] = replacement
                    guard case .failure(.mistyped) = ShortCode.parse(String(typo)) else {
                        Issue.record("\(String(typo)) (from \(code.text)) was not caught")
                        return
                    }
                }
                if i + 1 < symbols.count, symbols[i] != symbols[i + 1] {
                    var swapped = symbols
                    swapped.swapAt(i, i + 1)
                    guard case .failure(.mistyped) = ShortCode.parse(String(swapped)) else {
                        Issue.record("\(String(swapped)) (from \(code.text)) was not caught")
                        return
                    }
                }
            }
        }
    }

    @Test func aDroppedOrBadCharacterIsMistypedAndGarbageIsNoCode() {
        let text = Self.codes(1, seed: 3)[0].text
        guard case .failure(.mistyped(let why)) = ShortCode.parse(String(text.dropLast())) else { Issue.record("dropped"); return }
        #expect(why.contains("12 characters"))
        guard case .failure(.mistyped(let bad)) = ShortCode.parse("U" + text.dropFirst()) else { Issue.record("U"); return }
        #expect(bad.contains("\"U\""))
        #expect(ShortCode.parse("hello") == .failure(.notAShortCode))
        #expect(ShortCode.parse("KL1-" + String(repeating: "A", count: 100)) == .failure(.notAShortCode))
    }

    @Test func passwordsDifferPerCodeAndLocatorMatchesOnlyItsCode() {
        let codes = Self.codes(50, seed: 4)
        #expect(Set(codes.map(\.password)).count == codes.count)
        let a = InvitationAnnouncement(slot: codes[0].slot, password: codes[0].password, port: 4717)
        let parsed = InvitationAnnouncement.parse(a.packet)
        #expect(parsed == a && parsed!.matches(codes[0]) && a.packet.count == InvitationAnnouncement.packetBytes)
        #expect(!codes.dropFirst().contains { a.matches($0) })
        #expect(InvitationAnnouncement.parse(Array(a.packet.dropLast())) == nil)
        #expect(InvitationAnnouncement.parse(Announcement.magic + Array(a.packet.dropFirst(4))) == nil)
    }

    @Test func cpaceAgreesOnOneCodeAndNotOnAnother() {
        let right = Self.codes(2, seed: 5)
        let sid = Seeds.bytes(33, seed: 6)
        let x = CPace.scalar(seed: Seeds.bytes(32, seed: 7)), y = CPace.scalar(seed: Seeds.bytes(32, seed: 8))
        let ya = CPace.element(scalar: x, password: right[0].password, sid: sid)
        let yb = CPace.element(scalar: y, password: right[0].password, sid: sid)
        let ka = CPace.sessionKey(scalar: x, peerElement: yb, sid: sid, initiatorElement: ya, responderElement: yb)
        let kb = CPace.sessionKey(scalar: y, peerElement: ya, sid: sid, initiatorElement: ya, responderElement: yb)
        #expect(ka != nil && ka == kb)
        // The responder runs it with another code's password: no shared key.
        let wrong = CPace.element(scalar: y, password: right[1].password, sid: sid)
        let kw = CPace.sessionKey(scalar: y, peerElement: ya, sid: sid, initiatorElement: ya, responderElement: wrong)
        let ka2 = CPace.sessionKey(scalar: x, peerElement: wrong, sid: sid, initiatorElement: ya, responderElement: wrong)
        #expect(kw != nil && ka2 != nil && kw != ka2)
        // Another session id: another generator, no shared key either.
        let other = CPace.element(scalar: y, password: right[0].password, sid: Seeds.bytes(33, seed: 9))
        #expect(CPace.sessionKey(scalar: x, peerElement: other, sid: sid, initiatorElement: ya, responderElement: other)
                != CPace.sessionKey(scalar: y, peerElement: ya, sid: sid, initiatorElement: ya, responderElement: other))
        // The identity and a non-canonical encoding are refused.
        #expect(CPace.multiply(x, [UInt8](repeating: 0, count: 32)) == nil)
        #expect(CPace.multiply(x, [UInt8](repeating: 0xFF, count: 32)) == nil)
    }

    /// A responder with one short invitation in slot 3 and `tries` tries; counts what the hook was asked.
    final class Invitations: Sendable {
        let password: [UInt8]
        let tries: Mutex<Int>
        init(password: [UInt8], tries: Int) {
            self.password = password
            self.tries = Mutex(tries)
        }
        func take(_ slot: UInt8) -> [UInt8]? {
            tries.withLock { left in
                guard slot == 3, left > 0 else { return nil }
                left -= 1
                return password
            }
        }
    }

    static func pair(joiner: ShortCode, inviter: Invitations, seed: UInt64) -> ChannelPair {
        let a = try! SecureChannel(role: .initiator, identity: Seeds.identity(1), household: .zero, seed: Seeds.bytes(64, seed: seed),
                                   mode: .shortCode(slot: joiner.slot, password: joiner.password), authorize: { _, _, _, _ in nil })
        let b = try! SecureChannel(role: .responder, identity: Seeds.identity(2), household: ChannelPair.household,
                                   seed: Seeds.bytes(64, seed: seed + 1), shortInvitations: { inviter.take($0) },
                                   authorize: { _, _, _, _ in "members only" })
        return ChannelPair(a: a, b: b, seed: seed)
    }

    @Test func channelWithTheRightCodeEstablishesWithTheOwnersKey() {
        let code = ShortCode(slot: 3, secret: 0x1234_5678_9ABC)
        let inviter = Invitations(password: code.password, tries: 5)
        let p = Self.pair(joiner: code, inviter: inviter, seed: 10)
        p.start()
        #expect(p.a.isEstablished && p.b.isEstablished)
        #expect(p.a.peerKey == Seeds.identity(2).publicKey && p.b.peerKey == Seeds.identity(1).publicKey)
        #expect(p.b.mode == .shortCode(slot: 3, password: code.password))
        #expect(inviter.tries.withLock { $0 } == 4)
        // The hello is 67 bytes: version, mode 2, the CPace element, the nonce, the slot.
        #expect(p.wire[0].bytes.count == 4 + 1 + 67 && p.wire[0].bytes[6] == 2 && p.wire[0].bytes.last == 3)
        #expect(p.send(Array("KL1-invitation".utf8), fromA: false))
        p.run()
        #expect(p.plaintextA == Array("KL1-invitation".utf8))
    }

    @Test func aWrongCodeIsRefusedAsMismatchCountedAndBurnedAfterItsTries() {
        let code = ShortCode(slot: 3, secret: 0x1234_5678_9ABC)
        let inviter = Invitations(password: code.password, tries: 5)
        for attempt in 0..<6 {
            let wrong = ShortCode(slot: 3, secret: UInt64(attempt) + 1)
            let p = Self.pair(joiner: wrong, inviter: inviter, seed: 20 + UInt64(attempt) * 2)
            p.start()
            #expect(!p.a.isEstablished && !p.b.isEstablished)
            guard case .refused(let why)? = p.failureA else { Issue.record("not refused: \(String(describing: p.failureA))"); return }
            #expect(why.contains(SecureChannel.codeMismatch))
            // The responder never sent its key: only hello, reply and the refusal crossed.
            #expect(!p.wire.contains { ChannelPair.contains($0.bytes, Seeds.identity(2).publicKey.bytes) })
        }
        #expect(inviter.tries.withLock { $0 } == 0)
        // Burned: the right code gets nowhere now either.
        let p = Self.pair(joiner: code, inviter: inviter, seed: 40)
        p.start()
        #expect(!p.a.isEstablished)
        guard case .refused(let why)? = p.failureA else { Issue.record("not refused"); return }
        #expect(why.contains(SecureChannel.codeMismatch))
    }

    @Test func anotherSlotIsRefusedWithoutCountingATry() {
        let code = ShortCode(slot: 4, secret: 99)
        let inviter = Invitations(password: code.password, tries: 5)
        let p = Self.pair(joiner: code, inviter: inviter, seed: 50)
        p.start()
        #expect(!p.a.isEstablished && inviter.tries.withLock { $0 } == 5)
    }
}

extension String {
    fileprivate func replacingOccurrences(_ a: String, _ b: String) -> String {
        split(separator: Character(a), omittingEmptySubsequences: false).joined(separator: b)
    }
}

import KidLedgerDomain
import Testing
@testable import KidLedgerSecurity

/// Issue 22, point 1: a LAN announcement says nothing a non-member can link to a household or to a
/// device across time, and only the household's key opens it.
@Suite("LAN announcements")
struct AnnouncementTests {
    static let member = Seeds.identity(7).publicKey.bytes
    static let household = Household(id: RecordID(bytes: Seeds.bytes(16, seed: 1)), createdAtMillis: 5, owner: Seeds.bytes(32, seed: 2),
                                     salt: Seeds.bytes(16, seed: 3), signature: Seeds.bytes(64, seed: 4))

    @Test func sealedUnderTheHouseholdKeyOpensToTheSameAnnouncement() throws {
        let key = try #require(DiscoveryKey(household: Self.household))
        let sent = Announcement(member: Self.member, port: 4717, sentAtMillis: 1_764_000_000_123)
        let packet = sent.sealed(key: key, nonce: Seeds.bytes(24, seed: 9))
        #expect(packet.count == Announcement.packetBytes && Array(packet.prefix(4)) == Announcement.magic)
        #expect(Announcement.open(packet, key: key) == sent)
    }

    @Test func anotherHouseholdOrADamagedPacketOpensToNothing() throws {
        let key = try #require(DiscoveryKey(household: Self.household))
        var other = Self.household
        other.signature = Seeds.bytes(64, seed: 5)  // another genesis: another key
        let otherKey = try #require(DiscoveryKey(household: other))
        #expect(otherKey != key)
        let packet = Announcement(member: Self.member, port: 4717, sentAtMillis: 1).sealed(key: key, nonce: Seeds.bytes(24, seed: 9))
        #expect(Announcement.open(packet, key: otherKey) == nil)
        for i in packet.indices {
            var damaged = packet
            damaged[i] ^= 0x01
            #expect(Announcement.open(damaged, key: key) == nil, "byte \(i) flipped")
        }
        #expect(Announcement.open(Array(packet.dropLast()), key: key) == nil)
        #expect(Announcement.open(packet + [0], key: key) == nil)
        #expect(Announcement.open([], key: key) == nil)
    }

    @Test func aHouseholdWithoutAnOwnersSignatureHasNoKey() {
        #expect(DiscoveryKey(household: Household(id: Self.household.id, createdAtMillis: 5)) == nil)
    }

    /// What a stranger sees: no byte run of the member key, the household id, its owner key or the
    /// port, and two announcements of one daemon share nothing but the magic.
    @Test func twoAnnouncementsOfOneDaemonShareOnlyTheMagicAndCarryNoIdentifierInClear() throws {
        let key = try #require(DiscoveryKey(household: Self.household))
        let announcement = Announcement(member: Self.member, port: 4717, sentAtMillis: 1_764_000_000_000)
        let first = announcement.sealed(key: key, nonce: Seeds.bytes(24, seed: 10))
        let second = announcement.sealed(key: key, nonce: Seeds.bytes(24, seed: 11))
        for secret in [Self.member, Self.household.id.bytes, Self.household.owner, key.bytes] {
            for start in stride(from: 0, through: secret.count - 4, by: 1) {
                let run = Array(secret[start..<(start + 4)])
                #expect(!Self.contains(first, run), "4 bytes of an identifier appear in the packet")
            }
        }
        #expect(!Self.contains(first, [0x12, 0x6D]))  // 4717 big-endian
        let shared = zip(first.dropFirst(4), second.dropFirst(4)).filter { $0 == $1 }.count
        #expect(shared < 10, "\(shared) of \(first.count - 4) bytes equal by position")
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}

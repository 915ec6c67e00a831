import KidLedgerDomain
import Testing
@testable import KidLedgerSecurity

/// Issue 22, point 1: a LAN announcement says nothing a non-member (a stranger, a revoked member)
/// can link to a household or to a device across time, and only a current member it was sealed
/// for opens it.
@Suite("LAN announcements")
struct AnnouncementTests {
    static let household = RecordID(bytes: Seeds.bytes(16, seed: 1))
    static let mom = Seeds.identity(7), dad = Seeds.identity(8), gran = Seeds.identity(9), stranger = Seeds.identity(10)

    /// `me`'s keys with each of `others` in the household.
    static func keys(_ me: Identity, _ others: [Identity], household: RecordID = household) throws -> [AnnouncementKeys] {
        try others.map { try #require(AnnouncementKeys(identity: me, member: $0.publicKey.bytes, household: household)) }
    }

    static func random(_ seed: UInt64) -> [UInt8] { Seeds.bytes(Announcement.randomBytes, seed: seed) }

    /// Mom's announcement with boxes for `recipients`.
    static func packet(to recipients: [Identity], seed: UInt64 = 9, sentAt: Int64 = 1_764_000_000_123) throws -> [UInt8] {
        try Announcement(member: mom.publicKey.bytes, port: 4717, sentAtMillis: sentAt).sealed(to: keys(mom, recipients), random: random(seed))
    }

    @Test func theKeysOfTwoMembersMatchInEachDirectionAndDifferBetweenDirections() throws {
        let momToDad = try #require(try Self.keys(Self.mom, [Self.dad]).first)
        let dadToMom = try #require(try Self.keys(Self.dad, [Self.mom]).first)
        #expect(momToDad.send == dadToMom.receive && momToDad.receive == dadToMom.send)
        #expect(momToDad.send != momToDad.receive)
        let elsewhere = try #require(try Self.keys(Self.mom, [Self.dad], household: RecordID(bytes: Seeds.bytes(16, seed: 2))).first)
        #expect(elsewhere.send != momToDad.send, "the keys are bound to the household")
        #expect(AnnouncementKeys(identity: Self.mom, member: Self.mom.publicKey.bytes, household: Self.household) == nil)
        #expect(AnnouncementKeys(identity: Self.mom, member: [0, 1, 2], household: Self.household) == nil)
        // A small-order point (the identity) has no usable shared secret.
        #expect(AnnouncementKeys(identity: Self.mom, member: [1] + Array(repeating: 0, count: 31), household: Self.household) == nil)
    }

    @Test func aMemberItWasSealedForOpensIt() throws {
        let packet = try Self.packet(to: [Self.dad, Self.gran])
        #expect(packet.count == Announcement.packetBytes && Array(packet.prefix(4)) == Announcement.magic)
        let expected = Announcement(member: Self.mom.publicKey.bytes, port: 4717, sentAtMillis: 1_764_000_000_123)
        #expect(Announcement.open(packet, from: try Self.keys(Self.dad, [Self.gran, Self.mom])) == expected)
        #expect(Announcement.open(packet, from: try Self.keys(Self.gran, [Self.mom])) == expected)
    }

    /// The revocation story: Mom's daemon learns that Gran is revoked and stops sealing a box for
    /// her; Gran, who opened Mom's announcements until then, opens none from then on, and neither
    /// does a stranger; Dad still does.
    @Test func aRevokedMemberAndAStrangerCannotOpenANewAnnouncement() throws {
        let before = try Self.packet(to: [Self.dad, Self.gran], seed: 20)
        let granKeys = try Self.keys(Self.gran, [Self.mom, Self.dad])
        #expect(Announcement.open(before, from: granKeys)?.member == Self.mom.publicKey.bytes)
        let after = try Self.packet(to: [Self.dad], seed: 21)
        #expect(Announcement.open(after, from: granKeys) == nil)
        #expect(Announcement.open(after, from: try Self.keys(Self.stranger, [Self.mom, Self.dad, Self.gran])) == nil)
        #expect(Announcement.open(after, from: try Self.keys(Self.dad, [Self.mom]))?.port == 4717)
        // Gran cannot forge one either: a box from Mom to Dad needs Mom's or Dad's secret key.
        let forged = try Announcement(member: Self.mom.publicKey.bytes, port: 9, sentAtMillis: 1)
            .sealed(to: Self.keys(Self.gran, [Self.dad]), random: Self.random(22))
        #expect(Announcement.open(forged, from: try Self.keys(Self.dad, [Self.mom]))?.member != Self.mom.publicKey.bytes)
        // Mom's own packet reflected back to her does not open as Dad's.
        #expect(Announcement.open(after, from: try Self.keys(Self.mom, [Self.dad])) == nil)
    }

    @Test func everyPacketHasOneSizeWhateverTheHouseholdsSize() throws {
        let everyone = (0..<Announcement.recipientsMax).map { Seeds.identity(100 + UInt64($0)) }
        let sizes = try [[], [Self.dad], [Self.dad, Self.gran], everyone].map { try Self.packet(to: $0).count }
        #expect(Set(sizes) == [Announcement.packetBytes], "\(sizes)")
        #expect(Announcement.packetBytes == 572 && Announcement.packetBytes <= 1_232, "fits an IPv6 minimum-MTU datagram")
        // The last of a full household opens its box wherever the shuffle put it.
        let full = try Self.packet(to: everyone, seed: 30)
        for member in everyone {
            #expect(Announcement.open(full, from: try Self.keys(member, [Self.mom]))?.member == Self.mom.publicKey.bytes)
        }
    }

    @Test func aDamagedTruncatedOrPaddedPacketOpensToNothing() throws {
        let packet = try Self.packet(to: [Self.dad])
        let dadKeys = try Self.keys(Self.dad, [Self.mom])
        #expect(Announcement.open(packet, from: dadKeys) != nil)
        // Flipping any byte of the magic, the nonce or Dad's box breaks it; find Dad's box by flipping.
        var broken = 0
        for i in packet.indices {
            var damaged = packet
            damaged[i] ^= 0x01
            if Announcement.open(damaged, from: dadKeys) == nil { broken += 1 }
        }
        #expect(broken == 4 + Announcement.nonceBytes + Announcement.boxBytes, "\(broken)")
        #expect(Announcement.open(Array(packet.dropLast()), from: dadKeys) == nil)
        #expect(Announcement.open(packet + [0], from: dadKeys) == nil)
        #expect(Announcement.open([], from: dadKeys) == nil)
        #expect(Announcement.open(packet, from: []) == nil)
        // The old format (KLd1, a household-wide key) is not read.
        #expect(Announcement.open(Array("KLd1".utf8) + packet.dropFirst(4), from: dadKeys) == nil)
    }

    /// What a stranger (or a revoked member) sees: no byte run of any member key, the household id
    /// or the port, and two announcements of one daemon share nothing but the magic.
    @Test func twoAnnouncementsOfOneDaemonShareOnlyTheMagicAndCarryNoIdentifierInClear() throws {
        let first = try Self.packet(to: [Self.dad, Self.gran], seed: 10, sentAt: 1_764_000_000_000)
        let second = try Self.packet(to: [Self.dad, Self.gran], seed: 11, sentAt: 1_764_000_000_000)
        for secret in [Self.mom.publicKey.bytes, Self.dad.publicKey.bytes, Self.gran.publicKey.bytes, Self.household.bytes] {
            for start in stride(from: 0, through: secret.count - 4, by: 1) {
                #expect(!Self.contains(first, Array(secret[start..<(start + 4)])), "4 bytes of an identifier appear in the packet")
            }
        }
        let shared = zip(first.dropFirst(4), second.dropFirst(4)).filter { $0 == $1 }.count
        #expect(shared < 12, "\(shared) of \(first.count - 4) bytes equal by position")
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}

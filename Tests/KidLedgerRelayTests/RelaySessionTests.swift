import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerTestSupport
import Testing

/// Issue 44's sessions on real LMDB and real libsodium: Mom's and Dad's laptops never sync
/// directly; everything goes through one relay store, each session wired in memory.
@Suite("Relay sessions")
struct RelaySessionTests {
    /// Syncs Mom, Dad, Mom, Dad through the relay: each session honest.
    func roundTrip(_ family: RelayFamily) throws {
        for laptop in [family.mom, family.dad, family.mom, family.dad] {
            let run = try family.sync(laptop)
            #expect(run.finished, "\(String(describing: run.memberFailure)) \(String(describing: run.serverFailure))")
            #expect(run.member.envelopesRefused == 0, "\(run.member.refusals)")
        }
    }

    @Test("two laptops that never meet converge through the relay")
    func convergeThroughTheRelay() throws {
        let family = try RelayFamily()
        try family.installList(number: 1)
        for cents: Int64 in [100, 250, -50] { try family.mom.replica.give(cents) }
        let first = try family.sync(family.mom)
        #expect(first.finished)
        #expect(first.member.envelopesUploaded >= 1)
        let join = try family.sync(family.dad)
        #expect(join.finished)
        #expect(join.member.changesApplied == (try family.mom.replica.versionVector().values.reduce(0, +)).asInt)
        #expect(try family.dad.replica.digest() == family.mom.replica.digest())
        // Both write while the other is away, then meet only through the relay.
        try family.dad.replica.give(700)
        try family.mom.replica.give(-20)
        try roundTrip(family)
        #expect(try family.dad.replica.digest() == family.mom.replica.digest())
        #expect(try family.dad.replica.versionVector() == family.mom.replica.versionVector())
        #expect(try family.mom.replica.balance(of: try #require(try family.mom.replica.children().first?.id)) == 980)
        // Status: each sees the other's acknowledgement and sync time.
        let status = try family.sync(family.mom)
        #expect(status.member.members.count == 2)
        #expect(status.member.members.allSatisfy { $0.status.lastSyncMilliseconds != nil })
        // The relay's files hold none of the household's names.
        let stored = try rawEntries(family.relayEnvironment, "relay.envelopes").flatMap { $0.key + $0.value }
        for name in ["Ann", "Home", "Dad"] { #expect(!occurs(in: stored, Array(name.utf8)), "\(name) in the relay's store") }
    }

    @Test("2,000 transactions go through the relay at under 70 bytes each, and are collected once taken")
    func bytesPerTransaction() throws {
        let family = try RelayFamily()
        try family.installList(number: 1)
        for i in 1...2_000 { try family.mom.replica.give(Int64(i)) }
        let upload = try family.sync(family.mom)
        let stored = try family.relay.storedBytes()
        // 2,003 changes (the genesis, the grant, Ann and the gives): 132,958 bytes on this build.
        #expect(upload.member.changesUploaded == 2_003)
        #expect(stored < 70 * 2_003)
        let download = try family.sync(family.dad)
        #expect(download.member.changesApplied == 2_003)
        #expect(try family.dad.replica.digest() == family.mom.replica.digest())
        #expect(try family.relay.storedBytes() == 0)
    }

    @Test("an upload over the key's quota is refused, stores nothing, and ends the session's uploads")
    func overQuotaEndsUploads() throws {
        let family = try RelayFamily()
        let install = try family.sync(family.mom, as: RelayFamily.owner, setup: family.setup(list: try family.list(number: 1, quota: 1_000)))
        #expect(install.member.installedAccessList == 1)
        for cents: Int64 in 1...30 { try family.mom.replica.give(cents) }
        var small = family.setup()
        small.limits = RelayMemberLimits(changesPerEnvelope: 1)
        let run = try family.sync(family.mom, setup: small)
        #expect(run.finished)
        #expect(run.member.requestsRefused >= 1)
        #expect(run.member.refusals.contains { $0.contains("quota") && $0.contains(RelayFamily.relayIdentity.publicKey.fingerprint) })
        // Only the uploads in flight at the first refusal are refused; none is sent after it.
        #expect(run.member.requestsRefused <= RelayMemberLimits().uploadsInFlightMax)
        #expect(try family.relay.storedBytes() <= 1_000)
        #expect(try family.relay.storedBytes() == UInt64(run.server.bytesStored))
    }

    @Test("the owner posts each member's epoch box; the member fetches it, opens it and sees the others' status")
    func mailboxAndStatus() throws {
        let family = try RelayFamily()
        try family.installList(number: 1)
        var random = SplitMix64(seed: 5)
        let record = try EpochRecord.seal(key: family.epochs[1], previous: family.epochs[0],
                                          members: [RelayFamily.owner.publicKey, RelayFamily.dadIdentity.publicKey],
                                          owner: RelayFamily.owner, household: family.household, using: &random)
        let dadKey = RelayMemberKey(bytes: family.dad.relayKey.publicKey.bytes)!
        var posting = family.setup()
        posting.posts = [RelayMailboxPost(recipient: dadKey, epoch: 1, box: try #require(record.box(for: RelayFamily.dadIdentity.publicKey)))]
        let posted = try family.sync(family.mom, setup: posting)
        #expect(posted.member.boxesPosted == 1)
        // Posted again: a replay, not filed twice.
        #expect(try family.sync(family.mom, setup: posting).member.boxesPosted == 0)
        let dadSession = RelayMemberSession(replica: family.dad.replica, setup: family.setup(keysThrough: 0))
        let fetched = try drive(dadSession, RelayServerSession(store: family.relay, relay: RelayFamily.relayIdentity.publicKey,
                                                               owner: RelayFamily.owner.publicKey, peer: family.dad.relayKey.publicKey),
                                now: 9_000_000, random: &random)
        let box = try #require(fetched.member.mailbox.first)
        #expect(box.epoch == 1)
        #expect(try EpochRecord.openBox(box.box, epoch: 1, as: RelayFamily.dadIdentity, owner: RelayFamily.owner.publicKey,
                                        household: family.household) == family.epochs[1])
        // Status: Mom's acknowledgement, mapped back to her origins through the ledger Dad now holds.
        let mom = try #require(fetched.member.members.first { $0.status.key != dadKey })
        #expect(try dadSession.versionVector(of: mom.acknowledged) == family.mom.replica.versionVector())
        #expect(fetched.member.members.first { $0.status.key == dadKey }?.status.lastSyncMilliseconds == 9_000_000)
    }

    @Test("a byte flipped in a stored envelope is refused, naming the relay, and nothing of it applied")
    func flippedByteIsRefused() throws {
        let family = try RelayFamily()
        try family.installList(number: 1)
        #expect(try family.sync(family.mom).finished)
        let entries = try rawEntries(family.relayEnvironment, "relay.envelopes")
        try #require(!entries.isEmpty)
        for entry in entries {
            var value = entry.value
            value[value.count - 20] ^= 0x01
            try family.relayEnvironment.write { try $0.put(Table("relay.envelopes"), entry.key, value) }
        }
        let run = try family.sync(family.dad)
        #expect(run.finished)
        #expect(run.member.envelopesRefused == entries.count)
        #expect(run.member.changesApplied == 0)
        #expect(try family.dad.replica.versionVector().isEmpty)
        #expect(run.member.refusals.first?.contains("relay \(RelayFamily.relayIdentity.publicKey.fingerprint)") == true)
        #expect(run.member.refusals.first?.contains("nothing of it was applied") == true)
    }

    @Test("a relay that withholds, replays or reorders delays convergence but never diverges")
    func hostileRelayOnlyDelays() throws {
        let family = try RelayFamily()
        try family.installList(number: 1)
        for cents: Int64 in 1...40 { try family.mom.replica.give(cents) }
        // Small envelopes, so there are several to play with.
        var small = family.setup()
        small.limits = RelayMemberLimits(changesPerEnvelope: 1, payloadBytes: 1 << 10)
        #expect(try family.sync(family.mom, setup: small).member.envelopesUploaded > 3)
        // Withheld: every page empty.
        let withheld = try family.sync(family.dad) { message in
            if case .pendingPage(_, let next) = message { return .pendingPage(envelopes: [], next: next) }
            return message
        }
        #expect(withheld.finished && withheld.member.changesApplied == 0)
        // Replayed and reordered: each page backwards and twice over.
        var seen: [[UInt8]] = []
        let replayed = try family.sync(family.dad) { message in
            guard case .pendingPage(let envelopes, let next) = message else { return message }
            seen += envelopes
            return .pendingPage(envelopes: Array((envelopes + seen.prefix(3)).reversed().prefix(RelayMessage.pageEnvelopesMax)), next: next)
        }
        #expect(replayed.finished)
        #expect(replayed.member.envelopesRefused == 0)
        #expect(replayed.member.duplicates > 0 || replayed.member.changesDeferred > 0)
        // Whatever was applied is a prefix of Mom's log: never anything she does not hold.
        let dadHolds = try family.dad.replica.versionVector(), momHolds = try family.mom.replica.versionVector()
        #expect(dadHolds.allSatisfy { $0.value <= momHolds[$0.key] ?? 0 })
        // Honest sessions then converge.
        for _ in 0..<3 { _ = try family.sync(family.dad) }
        #expect(try family.dad.replica.digest() == family.mom.replica.digest())
    }

    @Test("a key not on the access list is refused and stores nothing")
    func strangerIsRefused() throws {
        let family = try RelayFamily()
        try family.installList(number: 1)
        try family.mom.replica.give(5)
        let run = try family.sync(family.mom, as: RelayFamily.stranger)
        #expect(run.memberFailure == .peer(code: 10, message: RelayStoreError.notOnAccessList.description))
        #expect(run.serverFailure == .store(.notOnAccessList))
        #expect(try family.relay.storedBytes() == 0)
        // Every request of a key not listed is refused too (here past its hello, by the owner's key).
        let replies = try answers(family.relay, peer: RelayFamily.owner.publicKey, [
            .hello(versionMin: 1, versionMax: 1), .upload(try envelope(1, 1, 1)), .acknowledge([stream(1): 1]), .mailboxFetch, .bye,
        ])
        #expect(replies.filter { if case .refused(10, _) = $0 { true } else { false } }.count == 3)
        #expect(try family.relay.storedBytes() == 0)
    }

    @Test("a relay that followed a recovery hands its owner statement with the mailbox")
    func ownerMailboxCarriesTheStatement() throws {
        let family = try RelayFamily()
        try family.installList(number: 1)
        let dad = family.dad.relayKey.publicKey
        let statement = RelayOwnerStatement.sign(relay: RelayFamily.relayIdentity.publicKey, newOwner: RelayFamily.dadIdentity.publicKey,
                                                 term: 1, recovery: RelayFamily.stranger)
        let plain = try answers(family.relay, peer: dad, [.hello(versionMin: 1, versionMax: 1), .mailboxFetch, .bye])
        #expect(plain.dropFirst().first == .mailbox([]))
        let followed = try answers(family.relay, peer: dad, [.hello(versionMin: 1, versionMax: 1), .mailboxFetch, .bye], ownerStatement: statement)
        #expect(followed.dropFirst().first == .ownerMailbox(statement: statement, boxes: []))
        // The member's session keeps it in its summary, for its driver to check.
        let run = try family.sync(family.dad, ownerStatement: statement)
        #expect(run.member.ownerStatement == statement)
    }

    @Test("a stale, replayed or non-owner-signed access list is not installed")
    func listsNeedTheOwnerAndANewerNumber() throws {
        let family = try RelayFamily()
        try family.installList(number: 2)
        let owner = RelayFamily.owner.publicKey
        let stale = try family.list(number: 1, extra: [RelayFamily.stranger])
        let forged = try family.list(number: 3, signer: RelayFamily.dadIdentity, extra: [RelayFamily.stranger])
        let otherRelay = try family.list(number: 3, for: RelayFamily.stranger.publicKey, extra: [RelayFamily.stranger])
        let replies = try answers(family.relay, peer: owner, [
            .hello(versionMin: 1, versionMax: 1), .install(stale), .install(forged), .install(otherRelay),
            .install(try family.list(number: 2)),
        ])
        #expect(replies.count == 5)
        #expect(replies[1] == .refused(code: 21, message: RelaySessionError.staleAccessList(held: 2, offered: 1).description))
        #expect(replies[2] == .refused(code: 20, message: RelaySessionError.notSignedByOwner.description))
        #expect(replies[3] == .refused(code: 20, message: RelaySessionError.notSignedByOwner.description))
        #expect(replies[4] == .refused(code: 21, message: RelaySessionError.staleAccessList(held: 2, offered: 2).description))
        #expect(try family.relay.accessList()?.number == 2)
        #expect(try family.relay.accessList()?.quotas[RelayMemberKey(bytes: RelayFamily.stranger.publicKey.bytes)!] == nil)
        // A listed member may hand on the owner's newer list.
        let newer = try family.list(number: 4)
        let run = try family.sync(family.dad, setup: family.setup(list: newer))
        #expect(run.member.installedAccessList == 4)
        #expect(try family.relay.accessList()?.number == 4)
    }

    @Test("collection frees the relay's storage once both laptops acknowledged")
    func collectionAfterBothAcknowledged() throws {
        let family = try RelayFamily()
        try family.installList(number: 1)
        for cents: Int64 in 1...10 { try family.mom.replica.give(cents) }
        let upload = try family.sync(family.mom)
        #expect(upload.member.bytesUploaded > 0)
        #expect(try family.relay.storedBytes() == UInt64(upload.member.bytesUploaded))
        let download = try family.sync(family.dad)
        #expect(download.finished)
        #expect(download.server.collected == upload.member.envelopesUploaded)
        #expect(try family.relay.storedBytes() == 0)
        #expect(try rawEntries(family.relayEnvironment, "relay.envelopes").isEmpty)
        // A wiped relay is refilled by the members.
        try family.mom.replica.give(1)
        _ = try family.sync(family.mom)
        #expect(try family.relay.storedBytes() > 0)
    }

    @Test("a revoked member's laptop opens nothing sealed under an epoch it was not given")
    func revokedMemberReadsNothingNew() throws {
        let family = try RelayFamily()
        try family.installList(number: 1)
        #expect(try family.sync(family.mom).finished)
        // Dad, holding epoch 0's key only, takes what was sealed under it.
        let before = try family.sync(family.dad, setup: family.setup(epoch: 0, keysThrough: 0))
        #expect(before.member.changesApplied > 0)
        #expect(try family.dad.replica.digest() == family.mom.replica.digest())
        // Mom writes under epoch 1, whose key Dad never got.
        try family.mom.replica.give(999)
        let sealed = try family.sync(family.mom, setup: family.setup(epoch: 1))
        #expect(sealed.member.envelopesUploaded == 1)
        let dadVector = try family.dad.replica.versionVector()
        let after = try family.sync(family.dad, setup: family.setup(epoch: 0, keysThrough: 0))
        #expect(after.member.envelopesRefused == 1)
        #expect(after.member.changesApplied == 0)
        #expect(after.member.refusals.first?.contains(RelaySealError.unknownEpoch(1).description) == true)
        #expect(try family.dad.replica.versionVector() == dadVector)
    }

    @Test("a member restored from an older copy says what it holds and gets the rest again")
    func restoredMemberIsServedAgain() throws {
        let family = try RelayFamily()
        try family.installList(number: 1)
        try family.mom.replica.give(10)
        _ = try family.sync(family.mom)
        // Dad's relay key acknowledged more than this (fresh) laptop holds: another laptop of his, wiped since.
        let tags = try family.mom.replica.versionVector().mapValues { _ in UInt64(0) }.keys.map { family.streamKey.tag(of: $0) }
        let ackd = Dictionary(uniqueKeysWithValues: tags.map { ($0, UInt64(50)) })
        try family.relay.acknowledge(ackd, from: RelayMemberKey(bytes: family.dad.relayKey.publicKey.bytes)!, atMilliseconds: 1)
        let run = try family.sync(family.dad)
        #expect(run.finished)
        #expect(try family.dad.replica.digest() == family.mom.replica.digest())
    }
}

extension UInt64 {
    var asInt: Int { Int(self) }
}

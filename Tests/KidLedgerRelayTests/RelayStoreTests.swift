import Testing
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity

@Suite("Relay store")
struct RelayStoreTests {
    @Test func uploadsNeedTheAccessList() throws {
        try withRelayStore { relay, _ throws in
            #expect(throws: RelayStoreError.notOnAccessList) { try relay.upload(try envelope(1, 1, 1), from: member(1)) }
            #expect(try relay.install(try list(1, [1: 10_000])))
            #expect(throws: RelayStoreError.notOnAccessList) { try relay.upload(try envelope(1, 1, 1), from: member(2)) }
            #expect(throws: RelayStoreError.notOnAccessList) { try relay.pending(for: member(2)) }
            #expect(throws: RelayStoreError.notOnAccessList) { try relay.acknowledge([stream(1): 1], from: member(2), atMilliseconds: 5) }
            #expect(try relay.storedBytes() == 0)
        }
    }

    @Test func malformedEnvelopesAreRefused() throws {
        try withRelayStore { relay, _ throws in
            try #require(try relay.install(try list(1, [1: 10_000])))
            var bad = try envelope(1, 1, 1)
            bad[0] = 2  // another version
            #expect(throws: RelayStoreError.self) { try relay.upload(bad, from: member(1)) }
            #expect(throws: RelayStoreError.self) { try relay.upload(Array(try envelope(1, 1, 1).prefix(77)), from: member(1)) }
            #expect(try relay.storedBytes() == 0)
        }
    }

    @Test func overQuotaIsRefusedWithNothingStored() throws {
        try withRelayStore { relay, env throws in
            try #require(try relay.install(try list(1, [1: 300, 2: 10_000])))
            #expect(try relay.upload(try envelope(1, 1, 2, bodyBytes: 100), from: member(1)) == .stored)  // 137 bytes
            #expect(try relay.upload(try envelope(1, 3, 4, bodyBytes: 100), from: member(1)) == .stored)  // 274
            let over = try envelope(1, 5, 6, bodyBytes: 100)
            #expect(throws: RelayStoreError.overQuota(quotaBytes: 300, usedBytes: 274, envelopeBytes: 137)) {
                try relay.upload(over, from: member(1))
            }
            #expect(try relay.usedBytes(of: member(1)) == 274)
            #expect(try rawEntries(env, "relay.envelopes").count == 2)
            #expect(try !allPending(relay, member(2)).envelopes.contains(over))
            // Another key's quota is its own.
            #expect(try relay.upload(over, from: member(2)) == .stored)
            #expect(try relay.storedBytes() == 274 + 137)
        }
    }

    @Test func replaysAreIdempotent() throws {
        try withRelayStore { relay, _ throws in
            try #require(try relay.install(try list(1, [1: 10_000, 2: 10_000])))
            let first = try envelope(1, 1, 5)
            #expect(try relay.upload(first, from: member(1)) == .stored)
            #expect(try relay.upload(first, from: member(1)) == .alreadyHeld)
            #expect(try relay.upload(first, from: member(2)) == .alreadyHeld)
            // Another sealing of the same range: the first is kept, nothing charged.
            #expect(try relay.upload(try envelope(1, 1, 5, fill: 0xcd), from: member(2)) == .alreadyHeld)
            #expect(try relay.usedBytes(of: member(1)) == UInt64(first.count))
            #expect(try relay.usedBytes(of: member(2)) == 0)
            // Overlapping ranges are stored as given.
            #expect(try relay.upload(try envelope(1, 3, 8), from: member(2)) == .stored)
            #expect(try allPending(relay, member(2)).envelopes == [first, try envelope(1, 3, 8)])
        }
    }

    @Test func pagingServesEverythingAboveTheVectorInOrder() throws {
        try withRelayStore { relay, _ throws in
            try #require(try relay.install(try list(1, [1: 100_000, 2: 100_000])))
            var expected: [[UInt8]] = []
            for tag: UInt8 in [3, 1] {
                for i: UInt64 in 0..<10 { _ = try relay.upload(try envelope(tag, 2 * i + 1, 2 * i + 2), from: member(1)) }
            }
            for tag: UInt8 in [1, 3] { for i: UInt64 in 0..<10 { expected.append(try envelope(tag, 2 * i + 1, 2 * i + 2)) } }
            let whole = try allPending(relay, member(2))
            #expect(whole.envelopes == expected)
            #expect(whole.pages == 1)
            let paged = try allPending(relay, member(2), countMax: 3)
            #expect(paged.envelopes == expected)
            #expect(paged.pages == 7)
            // The byte bound: two 97-byte envelopes fit in 200, three don't; one is always served.
            #expect(try allPending(relay, member(2), bytesMax: 200).pages == 10)
            #expect(try relay.pending(for: member(2), bytesMax: 1).envelopes.count == 1)
            // Above the vector only: stream 1 through 10, stream 3 through 19 (the envelope 19...20 is still due).
            try relay.acknowledge([stream(1): 10, stream(3): 19], from: member(2), atMilliseconds: 1_000)
            let rest = try allPending(relay, member(2), countMax: 4).envelopes
            #expect(rest == (5..<10).map { try! envelope(1, 2 * $0 + 1, 2 * $0 + 2) } + [try envelope(3, 19, 20)])
            #expect(try relay.vector(of: member(2)) == [stream(1): 10, stream(3): 19])
            #expect(throws: RelayStoreError.self) { try relay.pending(for: member(2), countMax: 0) }
            #expect(throws: RelayStoreError.self) { try relay.pending(for: member(2), countMax: RelayStore.pendingCountMax + 1) }
        }
    }

    @Test func collectionWaitsForEveryCurrentKey() throws {
        try withRelayStore { relay, env throws in
            try #require(try relay.install(try list(1, [1: 10_000, 2: 10_000])))
            let e = try envelope(1, 1, 4)
            #expect(try relay.upload(e, from: member(1)) == .stored)
            try relay.acknowledge([stream(1): 4], from: member(1), atMilliseconds: 10)
            #expect(try collectAll(relay) == 0)
            try relay.acknowledge([stream(1): 3], from: member(2), atMilliseconds: 20)
            #expect(try collectAll(relay) == 0)
            try relay.acknowledge([stream(1): 4], from: member(2), atMilliseconds: 30)
            #expect(try collectAll(relay) == 1)
            #expect(try rawEntries(env, "relay.envelopes").isEmpty)
            #expect(try relay.usedBytes(of: member(1)) == 0)
            #expect(try relay.storedBytes() == 0)
            // A replay of a collected range is not stored again.
            #expect(try relay.upload(e, from: member(2)) == .alreadyHeld)
            #expect(try relay.members().map(\.lastSyncMilliseconds) == [10, 30])
        }
    }

    @Test func collectionIsBoundedPerCallAndResumes() throws {
        try withRelayStore { relay, _ throws in
            try #require(try relay.install(try list(1, [1: 1_000_000])))
            for i: UInt64 in 1...30 { _ = try relay.upload(try envelope(1, i, i), from: member(1)) }
            try relay.acknowledge([stream(1): 30], from: member(1), atMilliseconds: 1)
            var calls = 0, deleted = 0
            for _ in 0..<100 {
                let done = try relay.collect(visitingAtMost: 7)
                calls += 1
                deleted += done.deleted
                #expect(done.deleted <= 7)
                if done.reachedEnd { break }
            }
            #expect(deleted == 30)
            #expect(calls == 5)
            #expect(throws: RelayStoreError.self) { try relay.collect(visitingAtMost: RelayStore.collectVisitsMax + 1) }
        }
    }

    @Test func removalFromTheListReleasesCollection() throws {
        try withRelayStore { relay, env throws in
            try #require(try relay.install(try list(1, [1: 10_000, 2: 10_000, 3: 10_000])))
            #expect(try relay.upload(try envelope(1, 1, 4), from: member(3)) == .stored)
            try relay.acknowledge([stream(1): 4], from: member(1), atMilliseconds: 1)
            try relay.acknowledge([stream(1): 4], from: member(2), atMilliseconds: 1)
            try relay.acknowledge([stream(2): 9], from: member(3), atMilliseconds: 1)
            #expect(try relay.post(box: [UInt8](repeating: 7, count: EpochRecord.boxBytes), epoch: 0, to: member(3), from: member(1)))
            #expect(try collectAll(relay) == 0)
            #expect(try relay.install(try list(2, [1: 10_000, 2: 10_000])))
            #expect(try relay.vector(of: member(3)).isEmpty)
            #expect(try relay.mailbox(of: member(3)).isEmpty)
            #expect(try rawEntries(env, "relay.members").count == 2)
            // Its envelope stays charged to it until collected, then the charge is gone.
            #expect(try relay.usedBytes(of: member(3)) == 97)
            #expect(try collectAll(relay) == 1)
            #expect(try relay.storedBytes() == 0)
            #expect(throws: RelayStoreError.notOnAccessList) { try relay.upload(try envelope(1, 5, 5), from: member(3)) }
        }
    }

    @Test func aStaleAccessListIsIgnored() throws {
        try withRelayStore { relay, _ throws in
            #expect(try relay.install(try list(5, [1: 10_000, 2: 10_000])))
            #expect(try !relay.install(try list(4, [1: 10_000, 3: 10_000])))
            #expect(try !relay.install(try list(5, [3: 10_000])))
            #expect(try relay.accessList()?.number == 5)
            #expect(try relay.accessList()?.members == [member(1), member(2)])
            #expect(throws: RelayStoreError.notOnAccessList) { try relay.upload(try envelope(1, 1, 1), from: member(3)) }
        }
    }

    @Test func aWipedRelayReportsEmptyVectors() throws {
        try withRelayStore { relay, _ throws in
            #expect(try relay.accessList() == nil)
            #expect(try relay.vector(of: member(1)).isEmpty)
            #expect(try relay.members().isEmpty)
            #expect(try relay.storedBytes() == 0)
            #expect(try relay.collect() == RelayCollection(deleted: 0, freedBytes: 0, reachedEnd: true))
            try #require(try relay.install(try list(1, [1: 10_000])))
            #expect(try relay.vector(of: member(1)).isEmpty)
            #expect(try relay.pending(for: member(1)) == RelayPage(envelopes: [], next: nil))
            #expect(try relay.members() == [RelayMemberStatus(key: member(1), quotaBytes: 10_000, usedBytes: 0, lastSyncMilliseconds: nil)])
        }
    }

    @Test func mailboxesAreBounded() throws {
        try withRelayStore { relay, _ throws in
            try #require(try relay.install(try list(1, [1: 10_000, 2: 10_000])))
            func box(_ n: UInt8) -> [UInt8] { [UInt8](repeating: n, count: EpochRecord.boxBytes) }
            #expect(try relay.post(box: box(1), epoch: 1, to: member(2), from: member(1)))
            #expect(try !relay.post(box: box(1), epoch: 1, to: member(2), from: member(1)))
            #expect(throws: RelayStoreError.mailboxSlotTaken(epoch: 1)) { try relay.post(box: box(2), epoch: 1, to: member(2), from: member(1)) }
            #expect(throws: RelayStoreError.self) { try relay.post(box: [1, 2], epoch: 2, to: member(2), from: member(1)) }
            #expect(throws: RelayStoreError.notOnAccessList) { try relay.post(box: box(1), epoch: 2, to: member(3), from: member(1)) }
            for epoch: UInt32 in 2...20 { _ = try relay.post(box: box(UInt8(epoch)), epoch: epoch, to: member(2), from: member(1)) }
            let held = try relay.mailbox(of: member(2))
            #expect(held.count == RelayStore.mailboxBoxesMax)
            #expect(held.map(\.epoch) == Array(5...20))
            #expect(try !relay.post(box: box(3), epoch: 3, to: member(2), from: member(1)))  // older than all held
        }
    }

    @Test func sealedEnvelopeRoundTrip() throws {
        try withRelayStore { relay, _ throws in
            try #require(try relay.install(try list(1, [1: 10_000, 2: 10_000])))
            var random = SplitMix64(seed: 44)
            let key = EpochKey.generate(epoch: 0, using: &random)
            let streamKey = RelayStreamKey.generate(using: &random)
            let tag = streamKey.tag(of: ReplicaID(7))
            let header = try RelayEnvelopeHeader(stream: tag, firstSequence: 1, lastSequence: 3, epoch: 0)
            let sealed = try RelayEnvelope.seal(Array("three changes".utf8), header: header, key: key, using: &random)
            #expect(try relay.upload(sealed, from: member(1)) == .stored)
            let served = try relay.pending(for: member(2)).envelopes
            #expect(served == [sealed])
            let opened = try RelayEnvelope.open(served[0], stream: tag, keys: EpochKeyring([key]))
            #expect(opened.payload == Array("three changes".utf8))
        }
    }
}

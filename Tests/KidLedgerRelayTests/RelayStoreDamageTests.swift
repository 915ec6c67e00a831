import Testing
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity

/// A byte flipped or cut in the relay's own store is refused with ``RelayStoreError/damaged(table:what:)``,
/// never a trap, and nothing is served from it.
@Suite("Relay store damage")
struct RelayStoreDamageTests {
    /// A store with one of everything: list, envelope, charge, member record, vector, box.
    func filled(_ relay: RelayStore) throws {
        try #require(try relay.install(try list(1, [1: 10_000, 2: 10_000])))
        #expect(try relay.upload(try envelope(1, 1, 2), from: member(1)) == .stored)
        try relay.acknowledge([stream(1): 1], from: member(2), atMilliseconds: 7)
        #expect(try relay.post(box: [UInt8](repeating: 3, count: EpochRecord.boxBytes), epoch: 0, to: member(2), from: member(1)))
    }

    /// Every read and a write of the store, each allowed to succeed or to throw a ``RelayStoreError``;
    /// returns whether any threw `damaged`.
    func exercise(_ relay: RelayStore) throws -> Bool {
        var damaged = false
        let calls: [() throws -> Void] = [
            { _ = try relay.accessList() },
            { _ = try relay.storedBytes() },
            { _ = try relay.usedBytes(of: member(1)) },
            { _ = try relay.members() },
            { _ = try relay.vector(of: member(2)) },
            { _ = try relay.mailbox(of: member(2)) },
            { _ = try relay.pending(for: member(2)) },
            { _ = try relay.upload(try envelope(1, 3, 3), from: member(1)) },
            { try relay.acknowledge([stream(1): 2], from: member(1), atMilliseconds: 9) },
            { _ = try relay.collect() },
        ]
        for call in calls {
            do { try call() } catch let error as RelayStoreError {
                if case .damaged = error { damaged = true }
            }
        }
        return damaged
    }

    func put(_ env: LMDBEnvironment, _ table: String, _ key: [UInt8], _ value: [UInt8]) throws {
        try env.write { try $0.put(Table(table), key, value) }
    }

    @Test(arguments: ["relay.meta", "relay.envelopes", "relay.usage", "relay.members", "relay.vectors", "relay.mailbox"])
    func everyFlippedOrCutByteIsRefusedOrHarmless(table: String) throws {
        try withRelayStore { relay, env throws in
            try filled(relay)
            let entry = try #require(try rawEntries(env, table).first)
            // An envelope's body and a box are ciphertext to the relay: a flip there, or a cut
            // that leaves an envelope body of a possible size, only the members can refuse.
            let isEnvelope = table == "relay.envelopes"
            let cutsRefused = isEnvelope ? 1 + RelayMemberKey.byteCount + RelayEnvelope.overheadBytes - RelayEnvelopeHeader.byteCount + 1
                                         : entry.value.count
            var refused = 0
            for offset in 0..<entry.value.count {
                for change in [UInt8(0x01), 0x80, 0xff] {
                    var value = entry.value
                    value[offset] ^= change
                    try put(env, table, entry.key, value)
                    if try exercise(relay) { refused += 1 }
                }
                try put(env, table, entry.key, Array(entry.value.prefix(offset)))
                let cutRefused = try exercise(relay)
                if offset < cutsRefused { #expect(cutRefused, "cut at \(offset) in \(table)") }
                try put(env, table, entry.key, entry.value)
            }
            if table != "relay.mailbox" { #expect(refused > 0) }
        }
    }

    @Test func damagedEntriesNameTheirTable() throws {
        try withRelayStore { relay, env throws in
            try filled(relay)
            let stored = try #require(try rawEntries(env, "relay.envelopes").first)
            try put(env, "relay.envelopes", stored.key, [9] + stored.value.dropFirst())
            #expect(throws: RelayStoreError.damaged(table: "relay.envelopes", what: "record version")) { try relay.pending(for: member(2)) }
            try put(env, "relay.envelopes", stored.key, stored.value)
            try put(env, "relay.vectors", member(2).bytes + stream(1).bytes, [0, 0, 0, 0, 0, 0, 0, 0])
            #expect(throws: RelayStoreError.damaged(table: "relay.vectors", what: "sequence 0")) { try relay.vector(of: member(2)) }
            try put(env, "relay.meta", [2], [1, 2, 3])
            #expect(throws: RelayStoreError.damaged(table: "relay.meta", what: "a collection cursor of 3 bytes")) { try relay.collect() }
            try put(env, "relay.envelopes", [1, 2], stored.value)
            #expect(throws: RelayStoreError.self) { try relay.pending(for: member(1)) }
        }
    }
}

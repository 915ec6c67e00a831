import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerTestSupport

/// Runs `body` with a relay store on a fresh LMDB environment (and the environment, to reach
/// under the store in corruption tests).
func withRelayStore<T>(_ body: (RelayStore, LMDBEnvironment) throws -> T) throws -> T {
    try withTemporaryDirectory(prefix: "kidledger-relay") { dir in
        let env = try LMDBEnvironment(directory: dir.path, tables: RelayStore.tables, durable: false)
        return try body(RelayStore(store: env), env)
    }
}

/// Member relay key number `n`.
func member(_ n: UInt8) -> RelayMemberKey { RelayMemberKey(bytes: [UInt8](repeating: n, count: 32))! }

/// Stream tag number `n`.
func stream(_ n: UInt8) -> RelayStreamTag { RelayStreamTag(bytes: [UInt8](repeating: n, count: 16))! }

/// A list numbered `number` serving `quotas`.
func list(_ number: UInt64, _ quotas: [UInt8: UInt64]) throws -> RelayAccessList {
    try RelayAccessList(number: number, quotas: Dictionary(uniqueKeysWithValues: quotas.map { (member($0.key), $0.value) }))
}

/// An envelope as the relay sees it: a valid header and `bodyBytes` opaque bytes (the relay
/// never opens one, so the body need not be ciphertext; `RelayStoreTests.sealedEnvelopeRoundTrip`
/// uses a sealed one).
func envelope(_ tag: UInt8, _ first: UInt64, _ last: UInt64, bodyBytes: Int = 60, fill: UInt8 = 0xab) throws -> [UInt8] {
    let header = try RelayEnvelopeHeader(stream: stream(tag), firstSequence: first, lastSequence: last, epoch: 0)
    return header.encoded + [UInt8](repeating: fill, count: bodyBytes)
}

/// Every envelope of a member's pending set, read page by page (`countMax` per page).
func allPending(_ relay: RelayStore, _ key: RelayMemberKey, countMax: Int = RelayStore.pendingCountMax,
                bytesMax: Int = RelayEnvelope.bytesMax) throws -> (envelopes: [[UInt8]], pages: Int) {
    var all: [[UInt8]] = []
    var after: RelayEnvelopeHeader?
    for page in 1...10_000 {
        let got = try relay.pending(for: key, after: after, countMax: countMax, bytesMax: bytesMax)
        all += got.envelopes
        guard let next = got.next else { return (all, page) }
        after = next
    }
    Issue.record("paging did not end")
    return (all, 0)
}

/// Collects until a sweep reaches the end of the store; the envelopes deleted.
@discardableResult
func collectAll(_ relay: RelayStore) throws -> Int {
    var deleted = 0
    for _ in 0..<1_000 {
        let done = try relay.collect()
        deleted += done.deleted
        if done.reachedEnd { return deleted }
    }
    Issue.record("collection did not end")
    return deleted
}

/// The raw entries of one of the relay's tables.
func rawEntries(_ env: LMDBEnvironment, _ name: String) throws -> [(key: [UInt8], value: [UInt8])] {
    try env.read { r in
        var all: [(key: [UInt8], value: [UInt8])] = []
        try r.scan(Table(name)) { key, value in all.append((key, value)); return true }
        return all
    }
}

import Testing

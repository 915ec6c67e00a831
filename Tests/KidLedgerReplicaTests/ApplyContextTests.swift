@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerInMemory

/// A writer that records the puts and deletes passed to it, then makes them.
private final class RecordingWriter: KeyValueWriter {
    let base: any KeyValueWriter
    var log: [(table: String, key: [UInt8], value: [UInt8]?)] = []
    init(_ base: any KeyValueWriter) { self.base = base }
    func get(_ table: Table, _ key: [UInt8]) throws -> [UInt8]? { try base.get(table, key) }
    func scan(_ table: Table, prefix: [UInt8], from start: [UInt8]?, reverse: Bool,
              _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        try base.scan(table, prefix: prefix, from: start, reverse: reverse, body)
    }
    func count(_ table: Table) throws -> Int { try base.count(table) }
    func put(_ table: Table, _ key: [UInt8], _ value: [UInt8]) throws {
        log.append((table.name, key, value))
        try base.put(table, key, value)
    }
    func delete(_ table: Table, _ key: [UInt8]) throws {
        log.append((table.name, key, nil))
        try base.delete(table, key)
    }
}

@Suite("The apply context writes back what it holds")
struct ApplyContextFlushTests {
    /// Random reads and writes of the written-back entries (few origins: the short list; many:
    /// the dictionary) in one context per round: nothing reaches the store before the context
    /// ends, then exactly the entries changed, each once with its last value, table by table in
    /// name order and in key order; the store then matches a model.
    @Test("the flush writes what changed, once, in key order, and only at the end")
    func flushOrder() throws {
        var rng = SplitMix64(seed: 11)
        for originRange in [UInt64(4), 40] {
            let store = MemoryStore()
            var vector: [UInt64: UInt64] = [:], claims: [UInt64: [UInt8]] = [:]
            var digest = Digest256.zero, hlc = HLC.zero
            for round in 0..<30 {
                try store.write { w in
                    let recorder = RecordingWriter(w)
                    var changedVector: [UInt64: UInt64] = [:], changedClaims: [UInt64: [UInt8]] = [:]
                    var newDigest: Digest256?, newHLC: HLC?
                    try Replica.withApplyContext(recorder, now: 0, verifier: RejectingVerifier(), preparer: PlainPreparer()) { context in
                        for n in 0..<Int.random(in: 0...(originRange < 10 ? 25 : 120), using: &rng) {
                            let origin = ReplicaID(UInt64.random(in: 1...originRange, using: &rng))
                            switch Int.random(in: 0..<6, using: &rng) {
                            case 0:
                                let held = try context.heldSequence(origin), claim = try context.claim(origin)
                                #expect(held == changedVector[origin.rawValue] ?? vector[origin.rawValue] ?? 0)
                                #expect(claim == changedClaims[origin.rawValue] ?? claims[origin.rawValue])
                            case 1:
                                let member = [UInt8(truncatingIfNeeded: round), UInt8(truncatingIfNeeded: n)]
                                context.setClaim(member, of: origin)
                                changedClaims[origin.rawValue] = member
                            case 2:
                                let value = Digest256(rng.next(), rng.next(), rng.next(), rng.next())
                                let current = try context.stateDigest()
                                #expect(current == newDigest ?? digest)
                                context.setStateDigest(value)
                                newDigest = value
                            case 3:
                                let value = HLC(millis: Int64(rng.next() % 1_000_000), counter: UInt32(n))
                                let current = try context.lastHLC()
                                #expect(current == newHLC ?? hlc)
                                context.setLastHLC(value)
                                newHLC = value
                            default:
                                let sequence = UInt64(n + 1)
                                context.setHeldSequence(sequence, of: origin)
                                changedVector[origin.rawValue] = sequence
                            }
                        }
                        #expect(recorder.log.isEmpty)  // nothing written before the flush
                    }
                    var expected: [(String, [UInt8], [UInt8]?)] = []
                    for (origin, member) in changedClaims.sorted(by: { $0.key < $1.key }) {
                        expected.append(("claims", Keys.origin(ReplicaID(origin)), member))
                        claims[origin] = member
                    }
                    if let newDigest {
                        expected.append(("meta", Keys.digest, newDigest.bytes))
                        digest = newDigest
                    }
                    if let newHLC {
                        expected.append(("meta", Keys.hlc, Replica.encodeHLC(newHLC)))
                        hlc = newHLC
                    }
                    for (origin, sequence) in changedVector.sorted(by: { $0.key < $1.key }) {
                        expected.append(("vector", Keys.origin(ReplicaID(origin)), Bytes.u64(sequence)))
                        vector[origin] = sequence
                    }
                    #expect(recorder.log.map(\.table) == expected.map(\.0))
                    #expect(recorder.log.map(\.key) == expected.map(\.1))
                    #expect(recorder.log.map(\.value) == expected.map(\.2))
                }
                try store.read { r in
                    var stored: [UInt64: UInt64] = [:]
                    try r.scan(Tables.vector) { key, value in stored[Bytes.u64(key)!] = Bytes.u64(value); return true }
                    #expect(stored == vector)
                    #expect(try Replica.lastHLC(r) == hlc)
                    #expect(Digest256(bytes: try r.get(Tables.meta, Keys.digest)) ?? .zero == digest)
                }
            }
        }
    }

    /// A body that throws aborts the transaction: the context is dropped with its writes, which
    /// reach neither the store nor the precondition against a dirty context.
    @Test("a throwing body drops the context's writes")
    func throwingBody() throws {
        struct Stop: Error {}
        let store = MemoryStore()
        #expect(throws: Stop.self) {
            try store.write { w in
                try Replica.withApplyContext(w, now: 0, verifier: RejectingVerifier(), preparer: PlainPreparer()) { context in
                    context.setHeldSequence(3, of: ReplicaID(7))
                    throw Stop()
                }
            }
        }
        #expect(try store.read { try $0.count(Tables.vector) } == 0)
    }
}

@Suite("The apply context's map of few keys")
struct FewMapTests {
    /// Random sets, removals, updates in place and reads against a dictionary, across the switch
    /// from the short list to the dictionary.
    @Test("behaves as a dictionary, below and past the short list's size")
    func matchesDictionary() {
        var rng = SplitMix64(seed: 5)
        for keyRange in [3, 8, UInt64(FewMap<UInt64, Int>.smallMax) * 3] {
            var map = FewMap<UInt64, Int>()
            var model: [UInt64: Int] = [:]
            for step in 0..<600 {
                let key = UInt64.random(in: 0..<keyRange, using: &rng)
                switch Int.random(in: 0..<6, using: &rng) {
                case 0:
                    map[key] = nil
                    model[key] = nil
                case 1:
                    #expect(map[key] == model[key])
                case 2:
                    // In place: a present value changed, an absent one added.
                    map.update(key) { $0 = $0.map { $0 + 1 } ?? step }
                    model[key] = model[key].map { $0 + 1 } ?? step
                case 3:
                    map.update(key) { $0 = nil }
                    model[key] = nil
                default:
                    map[key] = step
                    model[key] = step
                }
                #expect(Set(map.keys) == Set(model.keys) && map.keys.count == model.count)
            }
            for key in 0..<keyRange { #expect(map[key] == model[key]) }
        }
    }
}

import Testing
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity

/// A seeded random run of uploads, acknowledgements, collections, access lists and pages against a
/// plain model of what the store must hold.
@Suite("Relay store against a model")
struct RelayStoreModelTests {
    struct Model {
        var number: UInt64?
        var quotas: [UInt8: UInt64] = [:]
        var quotaEver: [UInt8: UInt64] = [:]
        var envelopes: [[UInt8]: (uploader: UInt8, bytes: [UInt8])] = [:]
        var usage: [UInt8: UInt64] = [:]
        var vectors: [UInt8: [UInt8: UInt64]] = [:]

        func horizon(_ tag: UInt8) -> UInt64 { quotas.keys.map { vectors[$0]?[tag] ?? 0 }.min() ?? 0 }

        mutating func collect() {
            for (key, held) in envelopes {
                let header = try! RelayEnvelopeHeader.decode(prefixOf: key)
                if header.lastSequence <= horizon(header.stream.bytes[0]) {
                    envelopes[key] = nil
                    usage[held.uploader]! -= UInt64(held.bytes.count)
                    if usage[held.uploader] == 0 { usage[held.uploader] = nil }
                }
            }
        }
    }

    @Test(arguments: [UInt64(1), 2, 3, 44])
    func randomOperations(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        func draw(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
        try withRelayStore { relay, env throws in
            var model = Model()
            var seen: [String: Int] = [:]  // how often each outcome came up, so the run is known to reach them
            for step in 0..<300 {
                let what = draw(0...99)
                let who = UInt8(draw(1...5))
                if what < 6 {
                    let base = model.number ?? 0
                    let number = UInt64(max(0, Int(base) + draw(-1...2)))
                    var quotas: [UInt8: UInt64] = [:]
                    for key: UInt8 in 1...4 where draw(0...2) > 0 { quotas[key] = UInt64(draw(200...2_000)) }
                    if quotas.isEmpty { quotas[1] = 500 }
                    let installed = try relay.install(try list(number, quotas))
                    #expect(installed == (model.number.map { number > $0 } ?? true), "step \(step)")
                    if installed {
                        for key in model.quotas.keys where quotas[key] == nil { model.vectors[key] = nil }
                        model.number = number
                        model.quotas = quotas
                        for (key, quota) in quotas { model.quotaEver[key] = max(model.quotaEver[key] ?? 0, quota) }
                        try collectAll(relay)
                        model.collect()
                    }
                } else if what < 56 {
                    let tag = UInt8(draw(1...3))
                    let first = UInt64(draw(1...20))
                    let e = try envelope(tag, first, first + UInt64(draw(0...3)), bodyBytes: draw(41...200), fill: UInt8(draw(0...255)))
                    let key = Array(e.prefix(RelayEnvelopeHeader.byteCount))
                    let size = UInt64(e.count)
                    let header = try RelayEnvelopeHeader.decode(prefixOf: e)
                    if model.quotas[who] == nil {
                        #expect(throws: RelayStoreError.notOnAccessList) { try relay.upload(e, from: member(who)) }
                    } else if model.envelopes[key] != nil || header.lastSequence <= model.horizon(tag) {
                        #expect(try relay.upload(e, from: member(who)) == .alreadyHeld)
                        seen["held", default: 0] += 1
                    } else if (model.usage[who] ?? 0) + size > model.quotas[who]! {
                        #expect(throws: RelayStoreError.overQuota(quotaBytes: model.quotas[who]!, usedBytes: model.usage[who] ?? 0, envelopeBytes: size)) {
                            try relay.upload(e, from: member(who))
                        }
                        seen["over quota", default: 0] += 1
                    } else {
                        #expect(try relay.upload(e, from: member(who)) == .stored)
                        model.envelopes[key] = (who, e)
                        model.usage[who, default: 0] += size
                        seen["stored", default: 0] += 1
                    }
                } else if what < 80 {
                    var vector: [UInt8: UInt64] = [:]
                    for _ in 0..<draw(1...2) { vector[UInt8(draw(1...3))] = UInt64(draw(0...24)) }
                    let sent = Dictionary(uniqueKeysWithValues: vector.map { (stream($0.key), $0.value) })
                    if model.quotas[who] == nil {
                        #expect(throws: RelayStoreError.notOnAccessList) { try relay.acknowledge(sent, from: member(who), atMilliseconds: Int64(step)) }
                    } else {
                        try relay.acknowledge(sent, from: member(who), atMilliseconds: Int64(step))
                        for (tag, sequence) in vector { model.vectors[who, default: [:]][tag] = sequence == 0 ? nil : sequence }
                    }
                } else if what < 92 {
                    seen["collected", default: 0] += try collectAll(relay)
                    model.collect()
                } else if model.quotas[who] != nil {
                    let vector = model.vectors[who] ?? [:]
                    let expected = model.envelopes.keys.sorted { KeyBytes.compare($0, $1) < 0 }.filter { key in
                        let header = try! RelayEnvelopeHeader.decode(prefixOf: key)
                        return header.lastSequence > vector[header.stream.bytes[0]] ?? 0
                    }.map { model.envelopes[$0]!.bytes }
                    #expect(try allPending(relay, member(who), countMax: draw(1...5)).envelopes == expected, "step \(step)")
                    seen["paged", default: 0] += expected.count
                }

                // What is stored is exactly the model's, charged as the model charges it.
                let stored = try rawEntries(env, "relay.envelopes").map(\.key)
                #expect(Set(stored) == Set(model.envelopes.keys), "step \(step)")
                for key: UInt8 in 1...5 {
                    let used = try relay.usedBytes(of: member(key))
                    #expect(used == model.usage[key] ?? 0, "step \(step) key \(key)")
                    #expect(used <= model.quotaEver[key] ?? 0)
                    #expect(try relay.vector(of: member(key)).count == (model.vectors[key] ?? [:]).count)
                }
                #expect(try relay.storedBytes() <= model.quotaEver.values.reduce(0, +))
            }
            for outcome in ["stored", "held", "over quota", "collected", "paged"] { #expect(seen[outcome, default: 0] > 0, "\(outcome) never came up") }
        }
    }
}

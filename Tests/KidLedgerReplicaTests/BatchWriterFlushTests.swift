@testable import KidLedgerReplica
import KidLedgerDomain
import Testing

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

@Suite("BatchWriter writes back pending entries")
struct BatchWriterFlushTests {
    /// Random puts, deletes and reads of the write-back tables (few keys: the short list; many:
    /// the dictionary), each followed by a flush: the flush must write exactly the keys changed
    /// since the last one, each once with its last value, in key order, table by table; a second
    /// flush writes nothing; the store then matches a dictionary model.
    @Test("each flush writes what changed since the last, once, in key order")
    func flushOrder() throws {
        var rng = SplitMix64(seed: 11)
        let tables = [Tables.meta, Tables.vector, Tables.claims]
        for keyRange in [4, 40] {
            let store = MemoryStore()
            var model: [String: [[UInt8]: [UInt8]]] = [:]
            for round in 0..<30 {
                try store.write { w in
                    let recorder = RecordingWriter(w)
                    let batch = BatchWriter(recorder)
                    var pending: [String: [[UInt8]: [UInt8]?]] = [:]
                    for n in 0..<Int.random(in: 0...(keyRange < 10 ? 25 : 120), using: &rng) {
                        let t = tables[Int.random(in: 0..<tables.count, using: &rng)]
                        let key: [UInt8] = [UInt8.random(in: 0..<UInt8(keyRange), using: &rng), 7]
                        switch Int.random(in: 0..<4, using: &rng) {
                        case 0:
                            try batch.delete(t, key)
                            pending[t.name, default: [:]][key] = .some(nil)
                        case 1:
                            let expected = pending[t.name]?[key] ?? model[t.name]?[key]
                            #expect(try batch.get(t, key) == expected)
                        default:
                            let value = [UInt8(truncatingIfNeeded: round), UInt8(truncatingIfNeeded: n)]
                            try batch.put(t, key, value)
                            pending[t.name, default: [:]][key] = .some(value)
                        }
                    }
                    #expect(recorder.log.isEmpty)  // nothing written before the flush
                    try batch.flush()
                    let byName = tables.sorted { $0.name < $1.name }
                    var expected: [(String, [UInt8], [UInt8]?)] = []
                    for t in byName {
                        for (key, value) in (pending[t.name] ?? [:]).sorted(by: { KeyBytes.compare($0.key, $1.key) < 0 }) {
                            expected.append((t.name, key, value))
                            model[t.name, default: [:]][key] = value
                        }
                    }
                    #expect(recorder.log.map(\.table) == expected.map(\.0))
                    #expect(recorder.log.map(\.key) == expected.map(\.1))
                    #expect(recorder.log.map(\.value) == expected.map(\.2))
                    recorder.log = []
                    try batch.flush()
                    #expect(recorder.log.isEmpty)
                }
                for t in tables {
                    var stored: [[UInt8]: [UInt8]] = [:]
                    try store.read { r in try r.scan(t) { key, value in stored[key] = value; return true } }
                    #expect(stored == (model[t.name] ?? [:]))
                }
            }
        }
    }
}

@Suite("BatchWriter holds the state digest decoded")
struct BatchWriterDigestTests {
    /// Random reads and writes of the digest, decoded (``BatchWriter/stateDigest()``,
    /// ``BatchWriter/setStateDigest(_:)``) and as bytes (get, put, delete, a scan of the meta
    /// table), against a model of the bytes stored: every read sees the last write however it was
    /// made, and the store holds it after the flush.
    @Test("decoded and byte reads and writes of the digest agree")
    func digestReadsAndWrites() throws {
        var rng = SplitMix64(seed: 12)
        for _ in 0..<40 {
            let store = MemoryStore()
            var model: [UInt8]? = Bool.random(using: &rng) ? Digest256(1, 2, 3, 4).bytes : nil
            try store.write { w in if let model { try w.put(Tables.meta, Keys.digest, model) } }
            try store.write { w in
                let batch = BatchWriter(w)
                for _ in 0..<Int.random(in: 0...30, using: &rng) {
                    let random = Digest256(rng.next(), rng.next(), rng.next(), rng.next())
                    switch Int.random(in: 0..<7, using: &rng) {
                    case 0, 1:
                        #expect(try batch.stateDigest() == Digest256(bytes: model) ?? .zero)
                    case 2:
                        batch.setStateDigest(random)
                        model = random.bytes
                    case 3:
                        #expect(try batch.get(Tables.meta, Keys.digest) == model)
                    case 4:
                        // Bytes that are not a digest (read as zero) half of the time.
                        let bytes = Bool.random(using: &rng) ? random.bytes : [9]
                        try batch.put(Tables.meta, Keys.digest, bytes)
                        model = bytes
                    case 5:
                        try batch.delete(Tables.meta, Keys.digest)
                        model = nil
                    default:
                        var seen: [UInt8]?
                        try batch.scan(Tables.meta) { key, value in
                            if key == Keys.digest { seen = value }
                            return true
                        }
                        #expect(seen == model)
                    }
                }
                try batch.flush()
            }
            #expect(try store.read { try $0.get(Tables.meta, Keys.digest) } == model)
        }
    }
}

@Suite("BatchWriter's map of few keys")
struct FewMapTests {
    /// Random sets, removals, updates in place and reads against a dictionary, across the switch
    /// from the short list to the dictionary.
    @Test("behaves as a dictionary, below and past the short list's size")
    func matchesDictionary() {
        var rng = SplitMix64(seed: 5)
        for keyRange in [3, 8, UInt64(BatchWriter.FewMap<UInt64, Int>.smallMax) * 3] {
            var map = BatchWriter.FewMap<UInt64, Int>()
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

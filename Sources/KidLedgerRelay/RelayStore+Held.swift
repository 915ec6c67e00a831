import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity

extension RelayStore {
    /// Most envelopes one ``held(including:)`` call visits (as ``pendingVisitsMax``).
    public static let heldVisitsMax = 4_096

    /// Per stream, the sequence up to which the relay can bring every listed member: the highest
    /// sequence every listed key acknowledged (below it nobody listed needs anything), extended
    /// through the stored envelopes that follow on from it without a gap. A member uploads what
    /// its log holds above it (docs/RELAY-DESIGN.md, "Sessions"); an envelope stored above a gap
    /// (collected below, then a new member listed) does not count, so the gap is uploaded again.
    ///
    /// `streams` (the asking member's acknowledged ones) are answered even when no envelope of
    /// theirs is stored; streams with 0 are left out. At most ``streamsPerMemberMax`` streams.
    ///
    /// Work: ≤ ``heldVisitsMax`` envelopes in store order (the streams past it are answered from
    /// the acknowledgements alone, so their members upload from there: replays the store takes
    /// as ``UploadResult/alreadyHeld`` when cut the same), and one get per listed key for each
    /// stream answered.
    public func held(including streams: some Collection<RelayStreamTag>) throws -> [RelayStreamTag: UInt64] {
        try store.read { r in
            guard let list = try Self.accessList(r) else { return [:] }
            var covered: [RelayStreamTag: UInt64] = [:]
            var gapped: Set<RelayStreamTag> = []
            func start(_ stream: RelayStreamTag) throws -> Bool {
                if covered[stream] != nil { return true }
                guard covered.count < Int(Self.streamsPerMemberMax) else { return false }
                covered[stream] = try Self.horizon(r, list, stream)
                return true
            }
            for stream in streams { _ = try start(stream) }
            var visited = 0
            try r.scan(RelayTables.envelopes) { key, value in
                guard visited < Self.heldVisitsMax else { return false }
                visited += 1
                let header = try StoredEnvelope.decode(key: key, value: value).header
                guard !gapped.contains(header.stream), try start(header.stream), let cover = covered[header.stream] else { return true }
                if header.firstSequence <= cover + 1 {
                    covered[header.stream] = max(cover, header.lastSequence)
                } else {
                    gapped.insert(header.stream)
                }
                return true
            }
            return covered.filter { $0.value > 0 }
        }
    }
}

import KidLedgerInMemory
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerProtocol

/// Wires two sessions back to back in memory, optionally chopping bytes into random chunks.
public struct Driver {
    public var outcomeA: SessionAction?
    public var outcomeB: SessionAction?
    /// Messages each side emitted, decoded (for assertions about batching).
    public var sentByA: [Message] = []
    public var sentByB: [Message] = []
    /// Largest number of unacknowledged batches either side had.
    public var maxInFlight = 0

    public static func run(_ a: SyncSession, _ b: SyncSession, seed: UInt64 = 1, maxChunk: Int = 0,
                    byteBudget: Int = .max, maxSteps: Int = 1_000_000) -> Driver {
        var d = Driver()
        var rng = SplitMix64(seed: seed)
        var toA: [UInt8] = [], toB: [UInt8] = []
        var ackDecoderA = FrameDecoder(), ackDecoderB = FrameDecoder()
        var inFlightA = 0, inFlightB = 0
        var delivered = 0

        func absorb(_ actions: [SessionAction], fromA: Bool) {
            for action in actions {
                switch action {
                case .send(let bytes):
                    var dec = FrameDecoder()
                    dec.push(bytes)
                    while let f = try? dec.next(), let m = try? Message.decode(type: f.type, payload: f.payload) {
                        if fromA { d.sentByA.append(m) } else { d.sentByB.append(m) }
                        if case .changes = m {
                            if fromA { inFlightA += 1 } else { inFlightB += 1 }
                            d.maxInFlight = max(d.maxInFlight, inFlightA, inFlightB)
                        }
                    }
                    if fromA { toB += bytes } else { toA += bytes }
                default:
                    if fromA { d.outcomeA = action } else { d.outcomeB = action }
                }
            }
        }
        func countAcks(_ chunk: [UInt8], _ dec: inout FrameDecoder) -> Int {
            dec.push(chunk)
            var n = 0
            while let f = try? dec.next() { if f.type == 5 { n += 1 } }
            return n
        }

        absorb(a.start(), fromA: true)
        absorb(b.start(), fromA: false)
        var steps = 0
        while steps < maxSteps, d.outcomeA == nil || d.outcomeB == nil, !(toA.isEmpty && toB.isEmpty) {
            steps += 1
            let deliverToB = !toB.isEmpty && (toA.isEmpty || rng.next() % 2 == 0)
            var queue = deliverToB ? toB : toA
            var n = maxChunk > 0 ? Int(rng.next() % UInt64(maxChunk)) + 1 : queue.count
            n = min(n, queue.count, byteBudget - delivered)
            if n <= 0 { break }
            let chunk = Array(queue.prefix(n))
            queue.removeFirst(n)
            delivered += n
            if deliverToB {
                toB = queue
                inFlightB -= countAcks(chunk, &ackDecoderB)
                absorb(b.receive(chunk), fromA: false)
            } else {
                toA = queue
                inFlightA -= countAcks(chunk, &ackDecoderA)
                absorb(a.receive(chunk), fromA: true)
            }
        }
        if d.outcomeA == nil { absorb(a.connectionClosed(), fromA: true) }
        if d.outcomeB == nil { absorb(b.connectionClosed(), fromA: false) }
        return d
    }

    public var bothFinished: Bool {
        if case .finished = outcomeA, case .finished = outcomeB { return true }
        return false
    }

    public var summaryA: SessionSummary? {
        if case .finished(let s) = outcomeA { return s }
        return nil
    }

    public var summaryB: SessionSummary? {
        if case .finished(let s) = outcomeB { return s }
        return nil
    }
}

/// Replica construction and household setup shared by the tests.
public enum Fixture {
    public static func replica(_ seed: UInt64, store: MemoryStore = MemoryStore()) throws -> Replica {
        try Replica(store: store, clock: FixedClock(millis: 1_700_000_000_000 + Int64(seed)), random: SplitMix64(seed: seed))
    }

    /// A household with one child "Ann" on the first replica, copied to the others.
    public static func household(_ replicas: [Replica]) throws -> RecordID {
        let summary = try replicas[0].createHousehold(name: "Home")
        try replicas[0].addChild(name: "Ann")
        let all = try replicas[0].changes(notCoveredBy: [:])
        for r in replicas.dropFirst() { try r.applyRemote(all) }
        return summary.id
    }

    public static func give(_ r: Replica, _ count: Int, cents: Int64 = 100) throws {
        for i in 0..<count { try r.post("Ann", signedCents: cents + Int64(i), note: "n\(i)", source: "give") }
    }

    public static func sync(_ a: Replica, _ b: Replica, household: RecordID, seed: UInt64 = 1, maxChunk: Int = 0,
                     limits: SessionLimits = SessionLimits(), byteBudget: Int = .max) -> Driver {
        Driver.run(SyncSession(role: .initiator, replica: a, household: household, limits: limits),
                   SyncSession(role: .responder, replica: b, household: household, limits: limits),
                   seed: seed, maxChunk: maxChunk, byteBudget: byteBudget)
    }
}

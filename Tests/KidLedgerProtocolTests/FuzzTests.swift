import KidLedgerDomain
import KidLedgerReplica
import Testing
@testable import KidLedgerProtocol
import KidLedgerInMemory
import KidLedgerTestSupport

@Suite struct FuzzTests {
    /// Garbage never traps the decoder; every byte pushed is either returned in a frame or still
    /// buffered, and after an error the decoder holds nothing and keeps failing.
    /// Found by the `message` fuzz target: two versions of one change (a fork) in one batch, and a
    /// signed head naming the second by index, re-encoded as the first. The decoder takes only
    /// the first index of an origin and sequence, so the encoding stays canonical.
    @Test func aHeadNamesTheFirstVersionOfItsChangeOnly() throws {
        let origin = ReplicaID(0x5002_247d_2380_309d)
        let child = { (byte: UInt8) in Operation.createChild(ChildRecord(id: RecordID(bytes: [UInt8](repeating: byte, count: 16)), createdAtMillis: 1)) }
        let a = Change(origin: origin, sequence: 1, hlc: HLC(millis: 5, counter: 0), operations: [child(2)])
        let b = Change(origin: origin, sequence: 1, hlc: HLC(millis: 6, counter: 0), operations: [child(3)])
        let head = SignedHead(origin: origin, sequence: 1, signature: [UInt8](repeating: 7, count: 64))
        let message = Message.changes([a, b], isLast: true, heads: [head])
        let payload = message.encodePayload()
        #expect(try Message.decode(type: message.type, payload: payload) == message)
        // The same bytes with the head's index changed from 0 to 1 (the second version).
        let headAt = payload.count - 1 - 64 - 1  // index varint | signature 64 | choice count
        #expect(payload[headAt] == 0)
        var second = payload
        second[headAt] = 1
        #expect(throws: (any Error).self) { try Message.decode(type: message.type, payload: second) }
    }

    @Test func frameDecoderSurvivesGarbage() {
        var rng = SplitMix64(seed: 3)
        var lostBytes = 0, liveAfterFailure = 0, failures = 0
        for _ in 0..<2_000 {
            var d = FrameDecoder()
            var pushed = 0, returned = 0, failed = false
            for _ in 0..<Int(rng.next() % 6) {
                let n = Int(rng.next() % 40)
                var chunk = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                // Often a plausible small length, so bodies get decoded too.
                if n >= 4 && rng.next() % 2 == 0 { chunk[0] = 0; chunk[1] = 0; chunk[2] = 0; chunk[3] = UInt8(rng.next() % 40) }
                d.push(chunk)
                if !failed { pushed += n }
                while !failed {
                    let frame: (type: UInt8, payload: [UInt8])?
                    do { frame = try d.next() } catch { failed = true; failures += 1; break }
                    guard let f = frame else { break }
                    returned += 5 + f.payload.count  // length, type, payload
                    _ = try? Message.decode(type: f.type, payload: f.payload)
                }
                if failed {
                    if d.bufferedBytes != 0 || (try? d.next()) != nil { liveAfterFailure += 1 }
                } else if returned + d.bufferedBytes != pushed {
                    lostBytes += 1
                }
            }
        }
        #expect(lostBytes == 0)
        #expect(liveAfterFailure == 0)
        #expect(failures > 0, "the garbage made the decoder fail at least once")
    }

    /// A responder fed a mutated copy of a real initiator transcript: it never traps, and the
    /// first invalid frame (and everything after it) writes nothing: the digest equals the one
    /// reached by feeding only the valid prefix.
    @Test func mutatedTranscriptsNeverCrashOrWriteFromABadFrame() throws {
        let storeB = MemoryStore()
        let a = try Fixture.replica(1), b = try Fixture.replica(2, store: storeB)
        let h = try Fixture.household([a, b])
        try Fixture.give(a, 6)
        try a.renameChild("Ann", to: "Annie")
        let pristine = storeB.clone()
        let transcript = Fixture.sync(a, b, household: h).sentByA
        let stream = transcript.flatMap { $0.frame() }

        func replay(_ bytes: [UInt8], seed: UInt64) throws -> (Digest256, SyncSession.State) {
            let r = try Fixture.replica(2, store: pristine.clone())
            let s = SyncSession(role: .responder, replica: r, household: h)
            _ = s.start()
            var rng = SplitMix64(seed: seed)
            var i = 0
            while i < bytes.count {
                let n = Int(rng.next() % 64) + 1
                _ = s.receive(Array(bytes[i..<min(bytes.count, i + n)]))
                i += n
            }
            return (try r.digest(), s.state)
        }

        var rng = SplitMix64(seed: 11)
        var checked = 0
        for round in 0..<400 {
            var mutated = stream
            switch round % 4 {
            case 0:  // bit flips
                for _ in 0...(rng.next() % 3) {
                    let i = Int(rng.next() % UInt64(mutated.count))
                    mutated[i] ^= 1 << (rng.next() % 8)
                }
            case 1:  // truncation
                mutated = Array(mutated.prefix(Int(rng.next() % UInt64(mutated.count))))
            case 2:  // garbage inserted
                let i = Int(rng.next() % UInt64(mutated.count))
                mutated.insert(contentsOf: (0..<Int(rng.next() % 16 + 1)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, at: i)
            default:  // pure garbage
                mutated = (0..<Int(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            // The longest prefix of whole, valid frames.
            var decoder = FrameDecoder()
            decoder.push(mutated)
            var validEnd = 0
            var invalid = false
            while true {
                do {
                    guard let f = try decoder.next() else { break }
                    _ = try Message.decode(type: f.type, payload: f.payload)
                    validEnd += frameHeaderBytes + f.payload.count
                } catch {
                    invalid = true
                    break
                }
            }
            let (digest, state) = try replay(mutated, seed: UInt64(round))
            if invalid {
                let (prefixDigest, _) = try replay(Array(mutated.prefix(validEnd)), seed: UInt64(round))
                #expect(digest == prefixDigest, "round \(round)")
                #expect(state == .failed || state == .finished, "round \(round)")
                checked += 1
            }
        }
        #expect(checked > 100)
    }

    @Test func malformedChangesFrameFailsWithAnErrorFrameAndWritesNothing() throws {
        let a = try Fixture.replica(1), b = try Fixture.replica(2)
        let h = try Fixture.household([a, b])
        try Fixture.give(a, 1)
        let before = try b.digest()
        let responder = SyncSession(role: .responder, replica: b, household: h)
        _ = responder.start()
        _ = responder.receive(Message.hello(protocolVersionMin: protocolVersionMin, protocolVersionMax: protocolVersionMax, replica: a.replicaID, household: h).frame())
        _ = responder.receive(Message.vector(VectorSummary(vector: try a.versionVector(), chains: try a.chains(at: try a.versionVector()))).frame())
        var frame = Message.changes(try a.changes(notCoveredBy: try b.versionVector()), isLast: true).frame()
        frame.append(0)  // trailing byte inside the frame...
        frame[3] &+= 1   // ...counted by the length
        let actions = responder.receive(frame)
        #expect(actions.count == 2)
        #expect(actions.last == .failed(.malformed("1 unexpected trailing bytes")))
        #expect(try b.digest() == before)
    }
}

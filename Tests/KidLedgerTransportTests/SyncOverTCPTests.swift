import Foundation
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerProtocol
import KidLedgerReplica
import KidLedgerTransport
import Testing
import KidLedgerTestSupport
import KidLedgerSystem

@Suite(.serialized) struct SyncOverTCPTests {
    /// Accepts one connection and runs a responder session on `replica`, on its own thread.
    static func serveOnce(_ listener: TCPListener, _ replica: Replica, household: RecordID,
                          limits: SessionLimits = SessionLimits(), idleTimeoutMillis: Int = 5000) -> Background<SessionOutcome?> {
        let box = Handoff(value: replica)
        return Background {
            guard let connection = try? listener.accept(timeoutMillis: 10_000) else { return nil }
            let session = SyncSession(role: .responder, replica: box.value, household: household, limits: limits)
            return SessionRunner.run(session, over: connection, idleTimeoutMillis: idleTimeoutMillis,
                                     totalTimeoutMillis: 30_000, now: Monotonic.millis)
        }
    }

    @Test func twoLMDBReplicasConvergeOverRealTCP() throws {
        let a = try LMDBReplica(seed: 1), b = try LMDBReplica(seed: 2)
        defer { a.remove(); b.remove() }
        let household = try Fixture.household([a.replica, b.replica])
        try Fixture.give(a.replica, 150)
        try Fixture.give(b.replica, 120, cents: -1000)
        try b.replica.renameChild("Ann", to: "Anna")
        #expect(try a.replica.digest() != b.replica.digest())

        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        // Small batches and a window of 2, so flow control and many round trips run over the socket.
        let limits = SessionLimits(changesPerBatch: 7, batchesInFlightMax: 2)
        let server = Self.serveOnce(listener, b.replica, household: household, limits: limits)
        let boxA = Handoff(value: a.replica)
        let port = listener.port
        let client = Background<(SessionOutcome, [SessionProgress])?> {
            guard let connection = try? TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: port),
                                                              timeoutMillis: 5000) else { return nil }
            var reports: [SessionProgress] = []
            let session = SyncSession(role: .initiator, replica: boxA.value, household: household, limits: limits)
            let outcome = SessionRunner.run(session, over: connection, idleTimeoutMillis: 5000, totalTimeoutMillis: 30_000,
                                            progress: { reports.append($0) }, now: Monotonic.millis)
            #expect(connection.isClosed)
            return (outcome, reports)
        }
        let clientResult = client.wait()
        let serverOutcome = server.wait()
        guard let (clientOutcome, reports) = clientResult ?? nil, let serverOutcome = serverOutcome ?? nil else {
            listener.close()
            Issue.record("a side did not finish in time")
            return
        }
        let summaryA = try #require(clientOutcome.summary, "\(clientOutcome)")
        let summaryB = try #require(serverOutcome.summary, "\(serverOutcome)")
        #expect(summaryA.bothUpToDate && summaryB.bothUpToDate)
        #expect(summaryA.changesSent == 150 && summaryB.changesSent == 121)
        #expect(summaryA.changesApplied == 121 && summaryB.changesApplied == 150)
        #expect(summaryA.bytesSent == summaryB.bytesReceived && summaryB.bytesSent == summaryA.bytesReceived)
        #expect(try a.replica.digest() == b.replica.digest())
        #expect(try a.replica.counts().transactions == 270)
        // Progress: reported per chunk, monotone, ending at the totals.
        #expect(!reports.isEmpty)
        #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.changesReceived <= $1.changesReceived && $0.bytes < $1.bytes })
        #expect(reports.last?.changesReceived == 121 && reports.last?.changesSent == 150)

        // A second sync over a new connection has nothing to do.
        let again = Self.serveOnce(listener, b.replica, household: household)
        let connection = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: port), timeoutMillis: 5000)
        let second = SessionRunner.run(SyncSession(role: .initiator, replica: a.replica, household: household),
                                       over: connection, now: Monotonic.millis)
        #expect(second.summary?.changesSent == 0 && second.summary?.changesApplied == 0)
        #expect(again.wait()??.summary?.changesSent == 0)
    }

    @Test func silentPeerMakesTheResponderTimeOut() throws {
        let b = try LMDBReplica(seed: 2)
        defer { b.remove() }
        let household = try b.replica.createHousehold(name: "Home").id
        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        let started = Monotonic.millis()
        let server = Self.serveOnce(listener, b.replica, household: household, idleTimeoutMillis: 200)
        // Connects, then says nothing.
        let silent = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 5000)
        defer { silent.close() }
        let outcome = try #require(server.wait(timeoutMillis: 10_000) ?? nil)
        #expect(outcome.errorDescription?.contains("timed out waiting for the peer (nothing received for 200 ms)") == true,
                "\(outcome)")
        #expect(Monotonic.millis() - started >= 190)
        // The runner closed its end: the silent peer sees EOF.
        #expect(try silent.read(timeoutMillis: 2000) == [])
    }

    @Test func silentServerMakesTheInitiatorTimeOut() throws {
        let a = try LMDBReplica(seed: 1)
        defer { a.remove() }
        let household = try a.replica.createHousehold(name: "Home").id
        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        // The kernel completes the handshake from the backlog; nobody ever reads or answers.
        let connection = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 5000)
        let outcome = SessionRunner.run(SyncSession(role: .initiator, replica: a.replica, household: household),
                                        over: connection, idleTimeoutMillis: 200, now: Monotonic.millis)
        #expect(outcome.errorDescription?.contains("timed out waiting for the peer (nothing received for 200 ms)") == true, "\(outcome)")
        #expect(connection.isClosed)
    }

    @Test func totalTimeoutBoundsTheSession() throws {
        let a = try LMDBReplica(seed: 1)
        defer { a.remove() }
        let household = try a.replica.createHousehold(name: "Home").id
        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        let connection = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 5000)
        let started = Monotonic.millis()
        let outcome = SessionRunner.run(SyncSession(role: .initiator, replica: a.replica, household: household),
                                        over: connection, idleTimeoutMillis: 10_000, totalTimeoutMillis: 250,
                                        now: Monotonic.millis)
        #expect(outcome.errorDescription?.contains("timed out after 250 ms: the whole sync took too long") == true, "\(outcome)")
        #expect(Monotonic.millis() - started >= 240)
    }

    @Test(arguments: [
        [0, 0, 0, 5, 99, 1, 2, 3, 4] as [UInt8],  // a frame of an unknown message type
        [0xFF, 0xFF, 0xFF, 0xFF, 1],              // a frame far over the size limit
        Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8),
    ])
    func garbageFailsTheSessionAndWritesNothing(garbage: [UInt8]) throws {
        let a = try LMDBReplica(seed: 1), b = try LMDBReplica(seed: 2)
        defer { a.remove(); b.remove() }
        let household = try Fixture.household([a.replica, b.replica])
        try Fixture.give(b.replica, 3)
        let digestBefore = try b.replica.digest()
        let vectorBefore = try b.replica.versionVector()

        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        let server = Self.serveOnce(listener, b.replica, household: household)
        let peer = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 5000)
        defer { peer.close() }
        try peer.write(garbage, timeoutMillis: 2000)
        // The responder answers with an error frame (best effort) and closes: read to EOF, bounded.
        var answer: [UInt8] = []
        for _ in 0..<100 {
            guard let chunk = try? peer.read(timeoutMillis: 5000), !chunk.isEmpty else { break }
            answer += chunk
        }
        let outcome = try #require(server.wait() ?? nil)
        #expect(outcome.summary == nil)
        #expect(outcome.errorDescription?.contains("malformed") == true, "\(outcome)")
        #expect(!answer.isEmpty)  // the error frame
        #expect(try b.replica.digest() == digestBefore)
        #expect(try b.replica.versionVector() == vectorBefore)
    }

    @Test func peerOfAnotherHouseholdIsRefusedOverTCP() throws {
        let a = try LMDBReplica(seed: 1), b = try LMDBReplica(seed: 2)
        defer { a.remove(); b.remove() }
        let householdA = try a.replica.createHousehold(name: "A").id
        let householdB = try b.replica.createHousehold(name: "B").id
        let digestB = try b.replica.digest()
        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        let server = Self.serveOnce(listener, b.replica, household: householdB)
        let connection = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 5000)
        let outcome = SessionRunner.run(SyncSession(role: .initiator, replica: a.replica, household: householdA),
                                        over: connection, idleTimeoutMillis: 5000, now: Monotonic.millis)
        #expect(outcome.errorDescription?.contains("another household") == true, "\(outcome)")
        #expect(server.wait()??.errorDescription?.contains("another household") == true)
        #expect(try b.replica.digest() == digestB)
    }

    /// A peer that sends one byte per read and never completes a frame.
    final class Trickle: ByteStream {
        let remote = "trickle"
        private(set) var reads = 0
        func read(maxBytes: Int, timeoutMillis: Int) throws(TransportError) -> [UInt8] {
            reads += 1
            // A frame header announcing 200 bytes (a hello may take 256), then the payload one byte at a time.
            return reads <= 4 ? [[0, 0, 0, 200][reads - 1]] : [0]
        }
        func write(_ bytes: [UInt8], timeoutMillis: Int) throws(TransportError) {}
        func close() {}
    }

    @Test func theReadBoundEndsASessionWhoseClockStandsStill() throws {
        let b = try LMDBReplica(seed: 2)
        defer { b.remove() }
        let household = try b.replica.createHousehold(name: "Home").id
        let stream = Trickle()
        let outcome = SessionRunner.run(SyncSession(role: .responder, replica: b.replica, household: household),
                                        over: stream, readsMax: 50, now: { 0 })
        #expect(outcome.errorDescription == "sync with trickle failed: the session did not end within 50 reads", "\(outcome)")
        #expect(stream.reads == 50)
    }
}

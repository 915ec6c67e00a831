import Foundation
import KidLedgerTransport
import Testing
import KidLedgerTestSupport
import KidLedgerSystem

@Suite(.serialized) struct SocketTests {
    @Test func connectingToAClosedPortIsRefusedQuickly() throws {
        let listener = try TCPListener(address: loopback)
        let port = listener.port
        listener.close()
        // Refused, not a timeout: the connect did not wait for an answer that never comes.
        #expect(throws: TransportError.refused(PeerAddress(host: "127.0.0.1", port: port))) {
            _ = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: port), timeoutMillis: 60_000)
        }
    }

    @Test func unresolvableHostFailsToResolve() {
        #expect {
            _ = try TCPConnection.connect(to: PeerAddress(host: "no-such-host.invalid", port: 4000), timeoutMillis: 2000)
        } throws: { error in
            if case .resolve = error as? TransportError { return true }
            return false
        }
    }

    @Test func listenerPicksAFreePortAndAcceptTimesOut() throws {
        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        #expect(listener.port != 0)
        let started = Monotonic.millis()
        #expect(try listener.accept(timeoutMillis: 100) == nil)
        // The whole timeout was waited (a lower bound only: a busy machine may take longer).
        #expect(Monotonic.millis() - started >= 90)
        // A second listener on the same port fails to bind.
        #expect {
            _ = try TCPListener(address: PeerAddress(host: "127.0.0.1", port: listener.port))
        } throws: { error in
            if case .io(_, let code) = error as? TransportError { return code == EADDRINUSE }
            return false
        }
    }

    @Test func readTimesOutWhenNothingArrives() throws {
        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        let client = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 2000)
        defer { client.close() }
        let server = try #require(try listener.accept(timeoutMillis: 2000))
        defer { server.close() }
        #expect(server.remote.hasPrefix("127.0.0.1:"))
        let started = Monotonic.millis()
        #expect {
            _ = try client.read(timeoutMillis: 150)
        } throws: { error in
            if case .timeout = error as? TransportError { return true }
            return false
        }
        #expect(Monotonic.millis() - started >= 140)
        // Orderly EOF reads as [].
        server.close()
        #expect(try client.read(timeoutMillis: 2000) == [])
    }

    @Test func echoRoundTrip() throws {
        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        let echo = Background<Int> {
            guard let connection = try? listener.accept(timeoutMillis: 5000) else { return -1 }
            defer { connection.close() }
            var echoed = 0
            for _ in 0..<10_000 {
                guard let chunk = try? connection.read(timeoutMillis: 5000), !chunk.isEmpty else { break }
                guard (try? connection.write(chunk, timeoutMillis: 5000)) != nil else { break }
                echoed += chunk.count
            }
            return echoed
        }
        let client = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 2000)
        defer { client.close() }
        // Larger than the socket buffers, so writes must wait for the echo to be read: write in pieces.
        let message = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var received: [UInt8] = []
        var offset = 0
        var rounds = 0
        while received.count < message.count && rounds < 10_000 {
            rounds += 1
            if offset < message.count {
                let end = min(offset + 16_384, message.count)
                try client.write(Array(message[offset..<end]), timeoutMillis: 5000)
                offset = end
            }
            received += try client.read(timeoutMillis: 5000)
        }
        #expect(received == message)
        client.close()
        #expect(echo.wait() == message.count)
    }

    @Test func writingToAVanishedPeerThrowsInsteadOfSIGPIPE() throws {
        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        let client = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 2000)
        defer { client.close() }
        let server = try #require(try listener.accept(timeoutMillis: 2000))
        server.close()
        var failure: TransportError?
        for _ in 0..<200 where failure == nil {
            do { try client.write([UInt8](repeating: 7, count: 65_536), timeoutMillis: 500) } catch { failure = error }
        }
        #expect(failure == .closed)
    }

    @Test func closeFromAnotherThreadWakesABlockedRead() throws {
        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        let client = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 2000)
        let server = try #require(try listener.accept(timeoutMillis: 2000))
        defer { server.close() }
        // The read's timeout is longer than the test waits: only the close can end it in time,
        // and it ends with `.closed` (a read that was not woken would time out).
        let reading = DispatchSemaphore(value: 0)
        let reader = Background<TransportError?> {
            reading.signal()
            do throws(TransportError) { _ = try client.read(timeoutMillis: 600_000); return nil } catch { return error }
        }
        reading.wait()
        client.close()
        client.close()  // idempotent
        #expect(reader.wait(timeoutMillis: 120_000) == Optional(Optional(TransportError.closed)))
        #expect(throws: TransportError.closed) { try client.write([1], timeoutMillis: 100) }
    }

    @Test func closeFromAnotherThreadWakesABlockedAccept() throws {
        let listener = try TCPListener(address: loopback)
        // As above: an accept that was not woken would return nil after its timeout.
        let accepting = DispatchSemaphore(value: 0)
        let acceptor = Background<TransportError?> {
            accepting.signal()
            do throws(TransportError) { _ = try listener.accept(timeoutMillis: 600_000); return nil } catch { return error }
        }
        accepting.wait()
        listener.close()
        #expect(acceptor.wait(timeoutMillis: 120_000) == Optional(Optional(TransportError.closed)))
    }
}

import Foundation
import KidLedgerTransport
import Testing

@Suite(.serialized) struct SocketTests {
    @Test func connectingToAClosedPortIsRefusedQuickly() throws {
        let listener = try TCPListener(address: loopback)
        let port = listener.port
        listener.close()
        let started = monotonicMillis()
        #expect(throws: TransportError.refused(PeerAddress(host: "127.0.0.1", port: port))) {
            _ = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: port), timeoutMillis: 2000)
        }
        #expect(monotonicMillis() - started < 1000)
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
        let started = monotonicMillis()
        #expect(try listener.accept(timeoutMillis: 100) == nil)
        let elapsed = monotonicMillis() - started
        #expect(elapsed >= 90 && elapsed < 2000)
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
        let started = monotonicMillis()
        #expect {
            _ = try client.read(timeoutMillis: 150)
        } throws: { error in
            if case .timeout = error as? TransportError { return true }
            return false
        }
        let elapsed = monotonicMillis() - started
        #expect(elapsed >= 140 && elapsed < 2000)
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
        let reader = Background<TransportError?> {
            do throws(TransportError) { _ = try client.read(timeoutMillis: 10_000); return nil } catch { return error }
        }
        usleep(100_000)
        let started = monotonicMillis()
        client.close()
        client.close()  // idempotent
        #expect(reader.wait(timeoutMillis: 5000) == Optional(Optional(TransportError.closed)))
        #expect(monotonicMillis() - started < 2000)
        #expect(throws: TransportError.closed) { try client.write([1], timeoutMillis: 100) }
    }

    @Test func closeFromAnotherThreadWakesABlockedAccept() throws {
        let listener = try TCPListener(address: loopback)
        let acceptor = Background<TransportError?> {
            do throws(TransportError) { _ = try listener.accept(timeoutMillis: 10_000); return nil } catch { return error }
        }
        usleep(100_000)
        let started = monotonicMillis()
        listener.close()
        #expect(acceptor.wait(timeoutMillis: 5000) == Optional(Optional(TransportError.closed)))
        #expect(monotonicMillis() - started < 2000)
    }
}

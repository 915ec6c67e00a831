#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerTestSupport
import KidLedgerTransport
import Synchronization
import Testing
import KidLedgerSystem
@testable import KidLedgerUI

/// The server on a real loopback socket: refusals, limits and timeouts, and that it keeps serving.
@Suite struct UIServerTests {
    static let token = String(repeating: "cd", count: 32)

    /// A server on 127.0.0.1 and a free port whose commands answer `{}` (after `delayMillis`).
    func withServer(requestTimeoutMillis: Int = 5_000, delayMillis: Int = 0, _ body: (UIServer) throws -> Void) throws {
        let listener = try TCPListener(address: PeerAddress(host: "127.0.0.1", port: 0))
        let gate = UIGate(key: Self.token, port: listener.port, clock: FixedClock(millis: 0)) { Self.token }
        let app = UIApp(gate: gate) { _ in
            if delayMillis > 0 { usleep(useconds_t(delayMillis * 1000)) }
            return CommandOutcome(exitCode: 0, json: "{}")
        }
        let server = UIServer(listener: listener, app: app, requestTimeoutMillis: requestTimeoutMillis, log: { _ in })
        server.start()
        defer { server.stop() }
        try body(server)
    }

    /// Sends `bytes` and reads the answer until the server closes (bounded by 10 s).
    func exchange(_ server: UIServer, _ bytes: [UInt8]) throws -> String {
        let c = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: server.port), timeoutMillis: 2_000)
        defer { c.close() }
        if !bytes.isEmpty { try c.write(bytes, timeoutMillis: 2_000) }
        return readAll(c)
    }

    func readAll(_ c: TCPConnection) -> String {
        var answer: [UInt8] = []
        let deadline = Deadline(seconds: 10)
        while !deadline.passed, let chunk = try? c.read(timeoutMillis: 10_000), !chunk.isEmpty { answer += chunk }
        return String(decoding: answer, as: UTF8.self)
    }

    func statusLine(_ response: String) -> String { String(response.prefix { $0 != "\r\n" }) }

    @Test func servesThePageWithTheCookie() throws {
        try withServer { server in
            let r = try exchange(server, Array("GET / HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nCookie: \(UIGate.cookiePrefix)\(server.port)=\(SignIn.cookie(key: Self.token))\r\n\r\n".utf8))
            #expect(statusLine(r) == "HTTP/1.1 200 OK")
            #expect(r.contains("Content-Security-Policy: default-src 'none'"))
            #expect(r.contains("X-Frame-Options: DENY"))
        }
    }

    @Test func malformedRequestsGet400AndTheServerKeepsServing() throws {
        try withServer { server in
            for garbage in ["GARBAGE\r\n\r\n", "GET / HTTP/1.1\r\nA\r\n\r\n", "\u{0}\u{1}\u{2}\r\n\r\n"] {
                #expect(statusLine(try exchange(server, Array(garbage.utf8))) == "HTTP/1.1 400 Bad Request")
            }
            #expect(statusLine(try exchange(server, Array(("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000)).utf8)))
                    == "HTTP/1.1 431 Request Header Fields Too Large")
            let r = try exchange(server, Array("GET / HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n".utf8))
            #expect(statusLine(r) == "HTTP/1.1 401 Unauthorized")
        }
    }

    @Test func aClientThatNeverFinishesGets408() throws {
        try withServer(requestTimeoutMillis: 300) { server in
            let started = Monotonic.millis()
            let r = try exchange(server, Array("GET / HTTP/1.1\r\nHost: x".utf8))
            #expect(statusLine(r) == "HTTP/1.1 408 Request Timeout")
            #expect(Monotonic.millis() - started < 5_000)
        }
    }

    @Test func connectionsOverTheLimitGet503() throws {
        try withServer(requestTimeoutMillis: 20_000) { server in
            // Hold the limit with idle connections, polling until the server counts them.
            var held: [TCPConnection] = []
            defer { held.forEach { $0.close() } }
            for _ in 0..<UIServer.connectionsMax {
                held.append(try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: server.port), timeoutMillis: 2_000))
            }
            #expect(eventually(timeout: 5, interval: 0.02) { server.activeConnections == UIServer.connectionsMax })
            let r = try exchange(server, Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(statusLine(r) == "HTTP/1.1 503 Service Unavailable")
            held.forEach { $0.close() }
            held = []
            #expect(eventually(timeout: 5, interval: 0.02) { server.activeConnections == 0 })
            #expect(statusLine(try exchange(server, Array("GET / HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n".utf8))) == "HTTP/1.1 401 Unauthorized")
        }
    }

    @Test func aClientThatLeavesEarlyStopsNothing() throws {
        try withServer { server in
            for _ in 0..<20 {
                let c = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: server.port), timeoutMillis: 2_000)
                try c.write(Array("POST /api/give HTTP/1.1\r\nContent-Length: 100\r\n\r\nchild=".utf8), timeoutMillis: 1_000)
                c.close()
            }
            // The closed connections may still wait in the listen backlog (then 503 busy): the server
            // answers normally once it has seen them all go.
            #expect(eventually(timeout: 10, interval: 0.05) {
                statusLine((try? exchange(server, Array("GET / HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n".utf8))) ?? "") == "HTTP/1.1 401 Unauthorized"
            })
            #expect(eventually(timeout: 5, interval: 0.02) { server.activeConnections == 0 })
        }
    }
}

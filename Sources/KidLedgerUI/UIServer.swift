#if canImport(Glibc)
import Glibc
#endif
import Foundation
import KidLedgerTransport
import Synchronization
import KidLedgerSystem

/// The page's HTTP/1.1 server: one request per connection, a thread per connection, bounded in
/// every way a local web page needs (``connectionsMax``, ``requestTimeoutMillis``, the parser's
/// size limits). A malformed request gets 400 and the connection closes; nothing a client sends
/// can stop the accept loop or the daemon around it.
public final class UIServer: Sendable {
    /// Most connections served at once; more get 503 at once.
    public static let connectionsMax = 8
    /// The default of ``requestTimeoutMillis``.
    public static let requestTimeoutDefaultMillis = 5_000
    /// The longest a write of the response may wait for the client.
    public static let writeTimeoutMillis = 5_000

    let listener: TCPListener
    let app: UIApp
    let log: @Sendable (String) -> Void
    let limiter = ConnectionLimiter(.init(connectionsMax: UIServer.connectionsMax, unadmittedMax: UIServer.connectionsMax,
                                          perAddressMax: UIServer.connectionsMax))
    private let stopped = Atomic<Bool>(false)
    private let threads = Atomic<Int>(0)
    /// The longest a client may take to send its whole request (then 408).
    let requestTimeoutMillis: Int

    /// A server for `app` on `listener` (already bound).
    public init(listener: TCPListener, app: UIApp, requestTimeoutMillis: Int = UIServer.requestTimeoutDefaultMillis,
                log: @escaping @Sendable (String) -> Void) {
        self.requestTimeoutMillis = requestTimeoutMillis
        self.listener = listener
        self.app = app
        self.log = log
    }

    /// The bound port.
    public var port: UInt16 { listener.port }

    /// Starts the accept loop on a thread of its own.
    public func start() {
        threads.add(1, ordering: .acquiringAndReleasing)
        Thread.detachNewThread { [self] in
            defer { threads.subtract(1, ordering: .acquiringAndReleasing) }
            acceptLoop()
        }
    }

    /// Stops accepting and waits (at most `timeoutMillis`) for requests in progress.
    public func stop(timeoutMillis: Int = 3_000) {
        stopped.store(true, ordering: .releasing)
        listener.close()
        var waited = 0
        while threads.load(ordering: .acquiring) > 0 && waited < timeoutMillis {
            usleep(20_000)
            waited += 20
        }
    }

    /// Connections being served now (tests).
    public var activeConnections: Int { limiter.active }

    private func acceptLoop() {
        while !stopped.load(ordering: .acquiring) {
            let connection: TCPConnection?
            // ``stop()`` closes the listener, which wakes this wait: no polling while idle.
            do { connection = try listener.accept(timeoutMillis: 60_000) } catch {
                if stopped.load(ordering: .acquiring) { return }
                log("page: accept failed: \(error)")
                usleep(100_000)
                continue
            }
            guard let connection else { continue }
            guard case .success(let slot) = limiter.tryAcquire(address: connection.remoteHost) else {
                try? connection.write(HTTPResponse.json(503, UIApp.errorJSON("busy: too many connections to the page; try again", exitCode: nil)).bytes(), timeoutMillis: 50)
                connection.close()
                continue
            }
            threads.add(1, ordering: .acquiringAndReleasing)
            Thread.detachNewThread { [self] in
                defer { limiter.release(slot); threads.subtract(1, ordering: .acquiringAndReleasing) }
                serve(connection)
            }
        }
    }

    private func serve(_ connection: TCPConnection) {
        defer { connection.close() }
        let response: HTTPResponse
        switch Self.readRequest(connection, timeoutMillis: requestTimeoutMillis) {
        case .request(let request): response = app.respond(to: request)
        case .answer(let refusal): response = refusal
        case .gone: return
        }
        try? connection.write(response.bytes(), timeoutMillis: Self.writeTimeoutMillis)
    }

    /// What reading a request gave.
    enum ReadOutcome {
        /// A whole request.
        case request(HTTPRequest)
        /// A refused or late request, and its answer (400, 408, 413, 431...).
        case answer(HTTPResponse)
        /// The client went away.
        case gone
    }

    /// Reads one request within `timeoutMillis` in all.
    static func readRequest(_ connection: TCPConnection, timeoutMillis: Int) -> ReadOutcome {
        var bytes: [UInt8] = []
        let deadline = Monotonic.millis() + Int64(timeoutMillis)
        let late = HTTPResponse.json(408, UIApp.errorJSON("the request took too long", exitCode: nil))
        while true {
            switch HTTPRequestParser.parse(bytes) {
            case .complete(let request, _): return .request(request)
            case .refused(let status, let reason): return .answer(.json(status, UIApp.errorJSON(reason, exitCode: nil)))
            case .incomplete: break
            }
            let left = deadline - Monotonic.millis()
            guard left > 0 else { return .answer(late) }
            do {
                let chunk = try connection.read(maxBytes: 16 << 10, timeoutMillis: Int(left))
                if chunk.isEmpty { return .gone }
                bytes += chunk
            } catch {
                if case .timeout = error { return .answer(late) }
                return .gone
            }
        }
    }
}


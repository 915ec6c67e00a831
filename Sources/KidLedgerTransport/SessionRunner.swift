import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerReplica

/// How a session run over TCP ended.
public enum SessionOutcome: Equatable, Sendable {
    /// The session completed; its counters.
    case finished(SessionSummary)
    /// The session failed; a readable reason (a protocol error or the transport's).
    case failed(String)
    /// The peer refused this side (for example an unknown, used or expired invitation).
    case refused(String)

    /// The summary when finished, else nil.
    public var summary: SessionSummary? {
        if case .finished(let summary) = self { return summary }
        return nil
    }

    /// The reason when failed, else nil.
    public var errorDescription: String? {
        switch self {
        case .failed(let reason), .refused(let reason): return reason
        case .finished: return nil
        }
    }
}

/// Counters reported while a session runs.
public struct SessionProgress: Equatable, Sendable {
    /// Changes received from the peer so far (applied, duplicates and gaps).
    public var changesReceived: Int
    /// Changes sent to the peer so far.
    public var changesSent: Int
    /// Bytes received and sent so far.
    public var bytes: Int

    /// Creates progress counters.
    public init(changesReceived: Int, changesSent: Int, bytes: Int) {
        self.changesReceived = changesReceived
        self.changesSent = changesSent
        self.bytes = bytes
    }
}

/// Drives a ``SyncSession`` over a ``TCPConnection``: the one place the protocol core meets a socket.
public enum SessionRunner {
    /// The default of the most reads one session may take (`run`'s `readsMax`). The total timeout
    /// ends every session, but only while the clock moves; this bound holds whatever the clock
    /// does. It is far above any real session: a read returns everything that arrived (up to
    /// 64 KiB), and the initial sync of 1M changes (72 MB) takes a few thousand reads.
    public static let readsMaxDefault = 1 << 24
    /// The most bytes one read takes once the peer is admitted (or on the initiator's side).
    public static let readBytesMax = 64 << 10
    /// The most bytes one read takes while a responder waits for the peer's hello: a peer that is
    /// not admitted yet makes it hold kilobytes.
    public static let unadmittedReadBytesMax = 4 << 10
    /// Runs `session` to its end over `connection`, then closes the connection.
    ///
    /// Starts the session, writes every `send`, reads (waiting at most `idleTimeoutMillis` for each
    /// chunk) and feeds `receive`, until the session finishes or fails. When the connection ends
    /// first (EOF, a timeout, an I/O error), the session is told with `connectionClosed()` and the
    /// outcome carries the transport's reason; batches applied so far stay applied.
    ///
    /// - Parameters:
    ///   - idleTimeoutMillis: the longest wait for the peer to send or accept anything.
    ///   - totalTimeoutMillis: the longest the whole session may take, measured with `now`.
    ///   - helloTimeoutMillis: responder only: the longest the peer may take to identify itself (its
    ///     `hello`, which the session admits or refuses), however it trickles the bytes; nil: no limit
    ///     beyond the others.
    ///   - admitted: responder only: called once on this thread when the session admits the peer
    ///     (its `hello` accepted), before the answer is sent, e.g. to lift the limits a server
    ///     keeps on a peer it has not admitted yet. Until then each read takes at most
    ///     ``unadmittedReadBytesMax`` bytes.
    ///   - progress: called on this thread after each received chunk.
    ///   - readsMax: the most reads the session may take; past it, the session fails with a
    ///     transport error that says so.
    ///   - now: a monotonic clock in milliseconds (injected; only used for the total timeout).
    public static func run(_ session: SyncSession, over connection: any ByteStream, idleTimeoutMillis: Int = 15_000,
                           totalTimeoutMillis: Int = 600_000, helloTimeoutMillis: Int? = nil, readsMax: Int = readsMaxDefault,
                           admitted: (() -> Void)? = nil, progress: ((SessionProgress) -> Void)? = nil,
                           now: () -> Int64) -> SessionOutcome {
        precondition(readsMax > 0, "a session needs at least one read")
        defer { connection.close() }
        return withoutActuallyEscaping(now) { now in
            let run = Run(session: session, connection: connection, now: now, started: now(), idle: max(idleTimeoutMillis, 1),
                          totalTimeoutMillis: totalTimeoutMillis, helloTimeoutMillis: helloTimeoutMillis)
            if let outcome = run.perform(session.start()) { return outcome }
            var unadmitted = session.state == .awaitingHello
            // Each pass either receives at least one byte or waits out a timeout, and the total timeout
            // bounds both, so the loop ends; `readsMax` bounds it against a clock that stands still.
            for _ in 0..<readsMax {
                guard let timeout = run.wait() else { return run.transportFailure(run.expired) }
                let chunk: [UInt8]
                do throws(TransportError) {
                    chunk = try connection.read(maxBytes: unadmitted ? unadmittedReadBytesMax : readBytesMax, timeoutMillis: timeout)
                } catch {
                    if case .timeout = error, run.wait() == nil { return run.transportFailure(run.expired) }
                    return run.transportFailure("sync with \(connection.remote) failed: \(error)")
                }
                if chunk.isEmpty {
                    return run.transportFailure("\(connection.remote) closed the connection before the sync finished")
                }
                let actions = session.receive(chunk)
                if unadmitted && session.state != .awaitingHello && session.state != .failed {
                    unadmitted = false
                    admitted?()
                }
                if let progress {
                    let s = session.summary
                    progress(SessionProgress(changesReceived: s.changesApplied + s.duplicatesReceived + s.gapsReceived,
                                             changesSent: s.changesSent, bytes: s.bytesReceived + s.bytesSent))
                }
                if let outcome = run.perform(actions) { return outcome }
            }
            return run.transportFailure("sync with \(connection.remote) failed: the session did not end within \(readsMax) reads")
        }
    }

    /// One ``run(_:over:idleTimeoutMillis:totalTimeoutMillis:helloTimeoutMillis:readsMax:admitted:progress:now:)``:
    /// its deadlines, how it ends when the connection does, and how it performs a session's actions.
    private struct Run {
        let session: SyncSession
        let connection: any ByteStream
        let now: () -> Int64
        let started: Int64
        let idle: Int
        let totalTimeoutMillis: Int
        let helloTimeoutMillis: Int?

        /// Why the time ran out: the peer's hello came too late, or the whole sync took too long.
        var expired: String {
            helloLate() ? "\(connection.remote) did not identify itself within \(helloTimeoutMillis ?? 0) ms"
                : "sync with \(connection.remote) timed out after \(totalTimeoutMillis) ms: the whole sync took too long"
        }

        /// Whether the session still waits for the peer's hello past its deadline.
        func helloLate() -> Bool {
            guard let helloTimeoutMillis, session.state == .awaitingHello else { return false }
            return now() - started >= Int64(helloTimeoutMillis)
        }

        /// Milliseconds left of the total (and of the hello deadline while it applies), at most the
        /// idle timeout; nil when the time is spent.
        func wait() -> Int? {
            var left = Int64(totalTimeoutMillis) - (now() - started)
            if let helloTimeoutMillis, session.state == .awaitingHello {
                left = min(left, Int64(helloTimeoutMillis) - (now() - started))
            }
            guard left > 0 else { return nil }
            return Int(min(Int64(idle), left))
        }

        func transportFailure(_ reason: String) -> SessionOutcome {
            var outcome = SessionOutcome.failed(reason)
            for action in session.connectionClosed() {
                // A session that already ended keeps its own outcome.
                if case .finished(let summary) = action { outcome = .finished(summary) }
            }
            return outcome
        }

        /// Performs `actions`; returns the outcome once the session ended. Consecutive frames go out
        /// in one write (on an encrypted stream: one sealed chunk, one system call).
        func perform(_ actions: [SessionAction]) -> SessionOutcome? {
            var writeError: TransportError?
            var pending: [UInt8] = []
            func flush() {
                defer { pending = [] }
                guard writeError == nil, !pending.isEmpty else { return }
                guard let timeout = wait() else {
                    writeError = .timeout("after \(totalTimeoutMillis) ms: the whole sync took too long")
                    return
                }
                do { try connection.write(pending, timeoutMillis: timeout) } catch { writeError = error }
            }
            for action in actions {
                switch action {
                case .send(let bytes):
                    pending += bytes
                case .finished(let summary):
                    flush()
                    // Everything this side needed arrived; a failure to send the last frame only affects the peer.
                    return .finished(summary)
                case .failed(let error):
                    flush()
                    // The protocol's reason is more telling than a failure to send the error frame.
                    if case .peer(let code, _) = error, code == ProtocolError.refused("").code { return .refused(error.description) }
                    return .failed(error.description)
                }
            }
            flush()
            if let writeError { return transportFailure("sync with \(connection.remote) failed: \(writeError)") }
            return nil
        }
    }
}

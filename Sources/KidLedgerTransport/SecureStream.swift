#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerSecurity
import KidLedgerSystem

/// A bidirectional byte stream with timeouts: a plain TCP connection, or one wrapped in a
/// ``SecureStream``. ``SessionRunner`` drives a sync session over either.
public protocol ByteStream: AnyObject {
    /// Who is on the other end, for logs.
    var remote: String { get }
    /// The next bytes (at least one), [] at a clean end, or a thrown timeout or failure.
    func read(maxBytes: Int, timeoutMillis: Int) throws(TransportError) -> [UInt8]
    /// Writes all of `bytes`.
    func write(_ bytes: [UInt8], timeoutMillis: Int) throws(TransportError)
    /// Closes the stream (idempotent).
    func close()
}

extension ByteStream {
    /// Reads with the default chunk size.
    public func read(timeoutMillis: Int) throws(TransportError) -> [UInt8] {
        try read(maxBytes: 64 << 10, timeoutMillis: timeoutMillis)
    }
}

extension TCPConnection: ByteStream {}

/// A TCP connection after a ``SecureChannel`` handshake: both ends authenticated (Ed25519) and
/// authorised, every byte encrypted and authenticated (secretstream). A tampered frame fails the
/// stream; nothing of it reaches the caller.
///
/// Not `Sendable`: the channel's cipher state and the decrypted bytes not yet read change with
/// every call, so a stream stays with the thread that established it (the compiler checks that).
/// Only the connection underneath may be closed from another thread.
public final class SecureStream: ByteStream {
    /// The authenticated key of the other end.
    public let peerKey: PublicKey
    /// Who is on the other end.
    public let remote: String
    private let connection: TCPConnection
    private let channel: SecureChannel
    private var pending: [UInt8] = []
    private var ended = false

    private init(connection: TCPConnection, channel: SecureChannel, peerKey: PublicKey) {
        self.connection = connection
        self.channel = channel
        self.peerKey = peerKey
        self.remote = connection.remote
    }

    /// Runs the channel handshake over `connection`.
    ///
    /// The whole handshake must complete within `timeoutMillis`, measured with `now` (a monotonic
    /// clock in milliseconds): a peer that trickles its handshake a byte at a time is dropped when
    /// the time is up, however many bytes it sent. Each read waits at most what is left.
    ///
    /// - Throws: ``TransportError/timeout(_:)`` when the time is up; `.io`/`.closed` when the
    ///   connection fails; `.handshake(reason)` when this side refused or a signature failed;
    ///   `.refusedByPeer(reason)` when the peer refused; `.revokedByPeer(reason, revocation:)` when
    ///   it refused this side's revoked member and sent the revocation (for the caller to verify);
    ///   `.answeredRefusal(reason, transfers:)` when this side refused a revoked member and it
    ///   answered with owner transfers (for the caller to verify and record).
    public static func establish(_ channel: SecureChannel, over connection: TCPConnection,
                                 timeoutMillis: Int = 15_000, now: () -> Int64 = Monotonic.millis) throws(TransportError) -> SecureStream {
        let deadline = now() + Int64(max(timeoutMillis, 1))
        var early: [UInt8] = []
        func left() -> Int { Int(max(deadline - now(), 0)) }
        func perform(_ actions: [ChannelAction]) throws(TransportError) -> PublicKey? {
            var established: PublicKey?
            var sent = false
            for action in actions {
                switch action {
                case .send(let bytes):
                    try connection.write(bytes, timeoutMillis: max(left(), 1))
                    sent = true
                case .established(let peer): established = peer
                case .plaintext(let bytes): early += bytes
                case .closed: break
                case .failed(.refused(let why)): throw .refusedByPeer(why)
                case .failed(.revokedByPeer(let why, let revocation)):
                    // This side answered the refusal (owner transfers that void it): the peer
                    // records them and then closes; waiting for that lets a retry find them there.
                    if sent { connection.waitForClose(timeoutMillis: left()) }
                    throw .revokedByPeer(why, revocation: revocation)
                case .failed(.answeredRefusal(let why, let transfers)): throw .answeredRefusal(why, transfers: transfers)
                case .failed(let error): throw .handshake(error.description)
                }
            }
            return established
        }
        var peer = try perform(channel.start())
        // Every pass reads at least one byte or waits out what is left of the deadline; the count
        // only guards against a clock that stands still.
        var rounds = 0
        while peer == nil {
            rounds += 1
            let wait = left()
            guard wait > 0, rounds < 1 << 20 else {
                throw .timeout("waiting for the handshake: not completed within \(timeoutMillis) ms")
            }
            let chunk: [UInt8]
            do { chunk = try connection.read(maxBytes: 4 << 10, timeoutMillis: wait) } catch .timeout {
                throw .timeout("waiting for the handshake: not completed within \(timeoutMillis) ms")
            }
            if chunk.isEmpty {
                // A refusal that waited for the peer's answer ends with its own reason.
                _ = try perform(channel.connectionClosed().filter { if case .failed(.closed) = $0 { false } else { true } })
                throw .handshake("\(connection.remote) closed the connection during the handshake")
            }
            peer = try perform(channel.receive(chunk))
        }
        let stream = SecureStream(connection: connection, channel: channel, peerKey: peer!)
        stream.pending = early
        return stream
    }

    /// Decrypted bytes: at least one, [] after the peer's clean close or the connection's end.
    public func read(maxBytes: Int, timeoutMillis: Int) throws(TransportError) -> [UInt8] {
        while pending.isEmpty && !ended {
            let chunk = try connection.read(maxBytes: maxBytes, timeoutMillis: timeoutMillis)
            let actions = chunk.isEmpty ? channel.connectionClosed() : channel.receive(chunk)
            if chunk.isEmpty { ended = true }
            for action in actions {
                switch action {
                case .plaintext(let bytes): pending += bytes
                case .closed: ended = true
                case .failed(let error): throw .handshake(error.description)
                case .send(let bytes): try connection.write(bytes, timeoutMillis: timeoutMillis)
                case .established: break
                }
            }
        }
        let out = Array(pending.prefix(maxBytes))
        pending.removeFirst(out.count)
        return out
    }

    /// Encrypts and writes.
    public func write(_ bytes: [UInt8], timeoutMillis: Int) throws(TransportError) {
        do { try connection.write(try channel.seal(bytes), timeoutMillis: timeoutMillis) } catch let e as TransportError {
            throw e
        } catch {
            throw .handshake("\(error)")
        }
    }

    /// Closes the channel cleanly (best effort) and the connection.
    public func close() {
        if let final = try? channel.close() { try? connection.write(final, timeoutMillis: 1_000) }
        connection.close()
    }
}

extension TCPConnection {
    /// Reads and drops what the peer still sends until it closes its end, the connection fails,
    /// `timeoutMillis` pass, or 64 KiB arrived: a bounded wait for the peer to finish.
    func waitForClose(timeoutMillis: Int) {
        var dropped = 0
        while timeoutMillis > 0, dropped < 64 << 10 {
            do {
                let chunk = try read(maxBytes: 4 << 10, timeoutMillis: timeoutMillis)
                if chunk.isEmpty { return }
                dropped += chunk.count
            } catch {
                return
            }
        }
    }
}

import KidLedgerDomain
import KidLedgerSecurity

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
public final class SecureStream: ByteStream, @unchecked Sendable {
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

    /// Runs the channel handshake over `connection` (bounded by `timeoutMillis` per read).
    ///
    /// - Throws: ``TransportError/refused(_:)``-style failures as `.io`/`.closed`, or
    ///   `.handshake(reason)` when either side refused or a signature failed.
    public static func establish(_ channel: SecureChannel, over connection: TCPConnection,
                                 timeoutMillis: Int = 15_000) throws(TransportError) -> SecureStream {
        var early: [UInt8] = []
        func perform(_ actions: [ChannelAction]) throws(TransportError) -> PublicKey? {
            var established: PublicKey?
            for action in actions {
                switch action {
                case .send(let bytes): try connection.write(bytes, timeoutMillis: timeoutMillis)
                case .established(let peer): established = peer
                case .plaintext(let bytes): early += bytes
                case .closed: break
                case .failed(.refused(let why)): throw .refusedByPeer(why)
                case .failed(let error): throw .handshake(error.description)
                }
            }
            return established
        }
        var peer = try perform(channel.start())
        var rounds = 0
        while peer == nil {
            rounds += 1
            guard rounds < 64 else { throw .handshake("the handshake did not complete") }
            let chunk = try connection.read(timeoutMillis: timeoutMillis)
            if chunk.isEmpty {
                _ = channel.connectionClosed()
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

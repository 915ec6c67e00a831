/// Why a TCP operation failed. Each case reads as one sentence through ``description``.
public enum TransportError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text is not a valid `HOST:PORT` or `[IPv6]:PORT` address; the payload says why.
    case badAddress(String)
    /// The host name could not be resolved; the payload holds the host and the resolver's reason.
    case resolve(String)
    /// Nothing listens at the address (the peer answered with a reset).
    case refused(PeerAddress)
    /// The address could not be reached (no route, network down, host unreachable); the payload says how.
    case unreachable(PeerAddress, String)
    /// Nothing happened within the allowed time; the payload says what was awaited.
    case timeout(String)
    /// The connection (or listener) was closed, locally or by the peer resetting it.
    case closed
    /// A system call failed: the operation and its `errno`.
    case io(String, Int32)
    /// The server already serves as many connections as it allows.
    case tooManyConnections
    /// The secure channel failed: a bad signature, tampering, or this side refused the peer.
    case handshake(String)
    /// The peer refused this side in the secure channel's handshake (the reason it gave).
    case refusedByPeer(String)
    /// The peer refused this side because its member is revoked and sent the owner-signed
    /// revocation (encoded, unverified: see `Replica.learnRevocation(_:of:)`).
    case revokedByPeer(String, revocation: [UInt8])
    /// This side refused the peer's revoked member, and the peer answered with owner transfers
    /// that void the revocation where it is (encoded, unverified: see `Replica.learnTransfers(_:)`).
    case answeredRefusal(String, transfers: [UInt8])

    /// A readable sentence.
    public var description: String {
        switch self {
        case .handshake(let why): "secure channel failed: \(why)"
        case .answeredRefusal(let why, _):
            "secure channel failed: peer not authorised: \(why); it answered with the owner transfers that void the revocation where it is"
        case .refusedByPeer(let why), .revokedByPeer(let why, _): "refused by the other device: \(why)"
        case .badAddress(let why): "bad address: \(why)"
        case .resolve(let why): "could not resolve \(why)"
        case .refused(let address):
            "could not connect to \(address): connection refused (is `kidledger serve` running there?)"
        case .unreachable(let address, let why): "could not connect to \(address): \(why)"
        case .timeout(let what): "timed out \(what)"
        case .closed: "the connection is closed"
        case .io(let operation, let code): "\(operation) failed: \(SystemError.message(code)) (errno \(code))"
        case .tooManyConnections: "the peer is busy with too many connections; try again later"
        }
    }
}

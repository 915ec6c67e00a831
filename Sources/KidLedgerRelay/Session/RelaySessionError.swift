import KidLedgerDomain
import KidLedgerProtocol

/// Why a relay session, or one request of it, failed (docs/RELAY-DESIGN.md, "Sessions"). Each
/// case has a wire code (sent in `refused` and `error` messages) and a readable sentence.
public enum RelaySessionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A frame or message failed to decode (length, type, truncated, trailing, out of range).
    case malformed(String)
    /// A well-formed message arrived where the session does not expect it.
    case unexpectedMessage(String)
    /// The two sides speak no common relay protocol version.
    case versionMismatch(peerMin: UInt16, peerMax: UInt16)
    /// The relay's store refused the request; nothing was stored.
    case store(RelayStoreError)
    /// An access list whose signature does not verify with the pinned owner key for this relay.
    case notSignedByOwner
    /// An access list whose number is not above the one the relay holds.
    case staleAccessList(held: UInt64, offered: UInt64)
    /// The peer answered a request with a refusal (``RelayMessage/refused(code:message:)``).
    case refusedByPeer(code: UInt16, message: String)
    /// The peer gave up (``RelayMessage/error(code:message:)``).
    case peer(code: UInt16, message: String)
    /// The member's replica failed to read or write.
    case storage(String)
    /// A bound of the session was reached (requests, pages, envelopes); the string names it.
    case limitReached(String)
    /// The connection closed before the session finished.
    case connectionClosed

    /// The code sent for this failure in a `refused` or `error` message.
    public var code: UInt16 {
        switch self {
        case .malformed: 1
        case .unexpectedMessage: 2
        case .versionMismatch: 3
        case .store(let error):
            switch error {
            case .notOnAccessList: 10
            case .overQuota: 11
            case .malformedEnvelope: 12
            case .invalidArgument: 13
            case .tooManyStreams: 14
            case .mailboxSlotTaken: 15
            case .damaged: 16
            }
        case .notSignedByOwner: 20
        case .staleAccessList: 21
        case .refusedByPeer(let code, _), .peer(let code, _): code
        case .storage: 30
        case .limitReached: 31
        case .connectionClosed: 32
        }
    }

    /// A readable sentence.
    public var description: String {
        switch self {
        case .malformed(let why): "malformed relay message: \(why)"
        case .unexpectedMessage(let what): "relay protocol violation: unexpected \(what)"
        case .versionMismatch(let lo, let hi):
            "the peer speaks relay protocol versions \(lo)...\(hi), this kidledger speaks "
                + "\(RelayMessage.versionMin)...\(RelayMessage.versionMax)"
        case .store(let error): error.description
        case .notSignedByOwner: "the access list is not signed by the household's owner for this relay; not installed"
        case .staleAccessList(let held, let offered):
            "the relay holds access list \(held); list \(offered) is not newer and was not installed"
        case .refusedByPeer(_, let message): "refused by the relay: \(message)"
        case .peer(_, let message): "peer reported: \(message)"
        case .storage(let why): "ledger store error: \(why)"
        case .limitReached(let what): "relay session limit reached: \(what)"
        case .connectionClosed: "connection closed before the relay session finished"
        }
    }

    /// A frame decoder's failure as a relay error.
    init(_ error: ProtocolError) { self = .malformed(error.description) }
}

/// What the driver of a relay session must do next (``RelayServerSession``, ``RelayMemberSession``).
public enum RelaySessionAction<Summary: Equatable & Sendable>: Equatable, Sendable {
    /// Write these bytes (one or more whole frames) to the peer.
    case send([UInt8])
    /// The session completed; close the connection.
    case finished(Summary)
    /// The session failed; close the connection. What was stored or applied before stays.
    case failed(RelaySessionError)
}

/// Why a sync session (or one frame of it) failed. Each case has a wire code for `error` frames
/// and a readable sentence.
public enum ProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A frame header announced a length of zero (a frame always holds at least its type byte).
    case emptyFrame
    /// A frame header announced more bytes than the limit then (``frameBytesMax``, or
    /// ``helloFrameBytesMax`` before the peer's hello).
    case frameTooLarge(UInt32, limit: Int = frameBytesMax)
    /// A frame's type byte names no known message.
    case unknownMessageType(UInt8)
    /// A message's payload failed to decode (truncated, invalid, trailing bytes, over a limit).
    case malformed(String)
    /// A well-formed message arrived in a state that does not expect it.
    case unexpectedMessage(String)
    /// The peer supports no protocol version this side supports.
    case versionMismatch(peerMin: UInt16, peerMax: UInt16)
    /// The peer belongs to a different household.
    case otherHousehold
    /// The peer announced this replica's own id (a reflected connection, a replayed hello, or a
    /// copied store): refused on both roles before any change is applied.
    case sameReplica
    /// One change is too large to fit in a frame.
    case changeTooLarge(bytes: Int)
    /// The peer sent an `error` frame.
    case peer(code: UInt16, message: String)
    /// The local replica failed to read or write.
    case storage(String)
    /// The connection closed before the session finished.
    case connectionClosed
    /// The responder refused the peer (for example an unknown, used or expired invitation).
    case refused(String)

    /// The code sent in an `error` frame for this failure.
    public var code: UInt16 {
        switch self {
        case .emptyFrame, .frameTooLarge, .unknownMessageType, .malformed: 1
        case .unexpectedMessage: 2
        case .versionMismatch: 3
        case .otherHousehold: 4
        case .sameReplica: 5
        case .changeTooLarge: 6
        case .storage: 7
        case .connectionClosed: 8
        case .refused: 9
        case .peer(let code, _): code
        }
    }

    /// A readable sentence.
    public var description: String {
        switch self {
        case .emptyFrame: "malformed frame: length 0"
        case .frameTooLarge(let n, let limit): "malformed frame: length \(n) exceeds \(limit) bytes"
        case .unknownMessageType(let t): "malformed frame: unknown message type \(t)"
        case .malformed(let why): "malformed message: \(why)"
        case .unexpectedMessage(let what): "protocol violation: unexpected \(what)"
        case .versionMismatch(let lo, let hi):
            "peer speaks protocol versions \(lo)...\(hi), this kidledger speaks "
                + "\(protocolVersionMin)...\(protocolVersionMax); "
                + (lo > protocolVersionMax ? "upgrade kidledger" : "upgrade kidledger on the other device")
        case .otherHousehold: "device of another household"
        case .refused(let why): "refused: \(why)"
        case .sameReplica: "the other side presents this device's own replica id (a connection reflected back to this device, a replayed hello, or a copied ledger store); refusing to sync"
        case .changeTooLarge(let n): "a change of \(n) bytes does not fit in one frame"
        case .peer(_, let message): "peer reported: \(message)"
        case .storage(let why): "ledger store error: \(why)"
        case .connectionClosed: "connection closed before the sync finished"
        }
    }
}

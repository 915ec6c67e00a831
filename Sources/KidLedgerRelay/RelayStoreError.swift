import KidLedgerSecurity

/// Why the relay's store refused a call (docs/RELAY-DESIGN.md, "The relay's store").
///
/// Every refusal leaves the store as it was: the call's write transaction is aborted.
public enum RelayStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The relay holds no access list yet, or the key is not on the one it holds.
    case notOnAccessList
    /// The upload would take the member key over its quota; nothing was stored.
    case overQuota(quotaBytes: UInt64, usedBytes: UInt64, envelopeBytes: UInt64)
    /// The envelope's size or clear header is not well formed (the envelope is never opened).
    case malformedEnvelope(RelaySealError)
    /// An argument is out of range (an oversized access list, vector or box); the string names it.
    case invalidArgument(String)
    /// The member key already acknowledges ``RelayStore/streamsPerMemberMax`` streams.
    case tooManyStreams(Int)
    /// The member's mailbox holds another box for this epoch (the first one posted is kept).
    case mailboxSlotTaken(epoch: UInt32)
    /// A value read back from the relay's own store is not what the store writes (a flipped byte,
    /// a truncated value): the call is refused, nothing is served from it.
    case damaged(table: String, what: String)

    /// A readable sentence.
    public var description: String {
        switch self {
        case .notOnAccessList: "this key is not on the relay's access list"
        case .overQuota(let quota, let used, let bytes):
            "the upload of \(bytes) bytes would exceed this key's quota (\(used) of \(quota) bytes used); nothing was stored"
        case .malformedEnvelope(let why): "refused envelope: \(why)"
        case .invalidArgument(let why): "relay store: \(why)"
        case .tooManyStreams(let max): "this key already acknowledges the most streams the relay keeps (\(max))"
        case .mailboxSlotTaken(let epoch): "the mailbox already holds another box for epoch \(epoch)"
        case .damaged(let table, let what): "the relay's store is damaged (\(table): \(what))"
        }
    }
}

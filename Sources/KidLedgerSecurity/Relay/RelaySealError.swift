import KidLedgerDomain

/// Why sealing or opening something for the relay failed (docs/RELAY-DESIGN.md, "Formats").
///
/// Every decoder and opener of this folder throws one of these for any input, and returns nothing
/// on failure: no half-opened key, no part of a payload. Messages are readable and never contain
/// key material or payload bytes.
public enum RelaySealError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes are not a well-formed encoding (truncated, trailing bytes, a length or number out
    /// of range, not canonical); the string names what.
    case malformed(String)
    /// A key had the wrong length, or a member key has no X25519 form.
    case badKey(String)
    /// An argument to a sealing call was out of range (no members, a duplicate member, an empty
    /// or oversized payload, sequences out of order); the string names what.
    case invalidArgument(String)
    /// The epoch record holds no box for this member (it was not a member at that epoch, e.g.
    /// revoked before it).
    case noBoxForMember
    /// The member's box did not open with its key (altered, or sealed to another key).
    case boxDidNotOpen
    /// The key in the box is not signed by the owner key passed in (for this household, epoch and
    /// member): it is refused unused.
    case notSignedByOwner
    /// The record of epoch 0 has no earlier key.
    case noPreviousKey
    /// The earlier epoch's key did not open with this epoch's key (altered, or another epoch's).
    case previousKeyDidNotOpen
    /// The key passed in belongs to another epoch than the record or envelope.
    case wrongEpoch(expected: UInt32, got: UInt32)
    /// No key of this epoch is held (it is newer than the member's newest, or the chain back to it
    /// is missing).
    case unknownEpoch(UInt32)
    /// The envelope failed authentication: altered, truncated, or its header moved, relabelled or
    /// spliced onto another envelope's body.
    case envelopeDidNotOpen
    /// The envelope opened but belongs to another stream than the one asked for.
    case wrongStream
    /// A join request opened, but its signature is not the joiner's for this household and invitation.
    case notSignedByJoiner

    /// A readable sentence.
    public var description: String {
        switch self {
        case .malformed(let what): "malformed relay data: \(what)"
        case .badKey(let why): "bad relay key: \(why)"
        case .invalidArgument(let why): "cannot seal for the relay: \(why)"
        case .noBoxForMember: "the epoch record holds no key for this member"
        case .boxDidNotOpen: "this member's epoch key box does not open (altered or sealed to another key)"
        case .notSignedByOwner: "the epoch key is not signed by the household's owner"
        case .noPreviousKey: "epoch 0 has no earlier key"
        case .previousKeyDidNotOpen: "the earlier epoch's key does not open (altered or from another epoch)"
        case .wrongEpoch(let expected, let got): "an epoch \(got) key was given for epoch \(expected)"
        case .unknownEpoch(let epoch): "no key is held for epoch \(epoch)"
        case .envelopeDidNotOpen: "relay envelope failed authentication (altered, truncated, moved or relabelled)"
        case .wrongStream: "relay envelope belongs to another stream"
        case .notSignedByJoiner: "the join request is not signed by its joiner for this household and invitation"
        }
    }
}

extension RelaySealError {
    /// A decoding failure of the shared byte reader, as a relay error.
    init(_ error: DecodeError) { self = .malformed(error.description) }
}

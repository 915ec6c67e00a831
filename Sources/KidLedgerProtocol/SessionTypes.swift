import KidLedgerDomain
import KidLedgerReplica

/// Tunable bounds of one session. Values are clamped to the protocol's hard limits.
public struct SessionLimits: Equatable, Sendable {
    /// Most changes per `changes` message (1...``changesPerBatchMax``).
    public var changesPerBatch: Int
    /// Most sent `changes` messages not yet acknowledged (flow control), at least 1.
    public var batchesInFlightMax: Int
    /// Largest frame this side sends (at most ``frameBytesMax``).
    public var frameBytes: Int

    /// Creates limits, clamping each value into its allowed range.
    public init(changesPerBatch: Int = changesPerBatchMax, batchesInFlightMax: Int = 4, frameBytes: Int = frameBytesMax) {
        self.changesPerBatch = min(max(changesPerBatch, 1), changesPerBatchMax)
        self.batchesInFlightMax = max(batchesInFlightMax, 1)
        self.frameBytes = min(max(frameBytes, 64), frameBytesMax)
    }
}

/// What a finished session did.
public struct SessionSummary: Equatable, Sendable {
    /// The peer's replica id (from hello or welcome).
    public var peer: ReplicaID?
    /// Changes sent in `changes` messages.
    public var changesSent = 0
    /// Received changes that were new and applied.
    public var changesApplied = 0
    /// Received changes already held (idempotent duplicates).
    public var duplicatesReceived = 0
    /// Received changes refused for a missing predecessor (resent by a later session).
    public var gapsReceived = 0
    /// `changes` messages sent.
    public var batchesSent = 0
    /// `changes` messages received.
    public var batchesReceived = 0
    /// Bytes handed to the transport.
    public var bytesSent = 0
    /// Bytes received from the transport.
    public var bytesReceived = 0
    /// Whether, at the end, this replica's vector equals the peer's last acknowledged vector.
    public var bothUpToDate = false
    /// Whether this replica learned it was restored from a stale copy (and now has a fresh replica id).
    public var recoveredFromStaleCopy = false
    /// Changes the peer holds that this replica lacked when the vectors were exchanged.
    public var changesExpected = 0
    /// Changes this replica held that the peer lacked when the vectors were exchanged.
    public var changesToSend = 0
    /// The peer's vector at the end (its receipt: what it acknowledged holding).
    public var peerVector: VersionVector = [:]
    /// Children whose checks (count, sum, id hash) agree on both sides at the end.
    public var childrenAgreeing: [RecordID] = []
    /// Children whose checks differ (or that one side lacks) at the end.
    public var childrenDiffering: [RecordID] = []
    /// Origins whose histories were found forked in the peer's vector.
    public var forkedOrigins = 0
    /// Received changes that were other versions of forked sequences (kept and merged).
    public var forkedVersionsReceived = 0
    /// Received changes refused because no signed head of their origin's member reached them
    /// (forged, altered on the way, or sent without heads).
    public var unauthenticatedReceived = 0
    /// Received changes held back, not stored, for a stamp more than
    /// `Limits.clockAheadMillisMax` ahead of this replica's clock (or after such a change of their
    /// origin): the peer offers them again in later sessions (docs/CRDT.md, "Clock skew").
    public var heldBackReceived = 0
    /// The protocol version both sides spoke (nil before they agreed).
    public var protocolVersion: UInt16?
    /// Changes this replica holds that the peer lacks and was not sent because it speaks an older
    /// protocol version that can't read them (or they follow such a change of their origin:
    /// ``RecordVersions/readablePart(of:by:)``). It gets them once it is updated.
    public var changesWithheld = 0
    /// Received changes not stored because no member's claim opens their origin (a stranger's
    /// key, a grant not here yet) or their member holds the most origins a replica stores of one
    /// member (docs/SECURITY.md, "Only members take space"): the peer offers them again later.
    public var notAdmittedReceived = 0
    /// Received batches that made this replica recompute its merged state (at most
    /// `Limits.recomputationsPerSessionMax`; the batch past it ends the session, not applied).
    public var recomputations = 0

    /// An empty summary.
    public init() {}
}

/// What the driver of a session must do next.
public enum SessionAction: Equatable, Sendable {
    /// Write these bytes (one or more whole frames) to the peer.
    case send([UInt8])
    /// The session completed; close the connection.
    case finished(SessionSummary)
    /// The session failed; close the connection. Every batch applied before stays applied.
    case failed(ProtocolError)
}

/// What a responder learns from `hello` before it admits the peer.
public struct Admission: Equatable, Sendable {
    /// The peer's replica id.
    public var replica: ReplicaID
    /// The household it asks for.
    public var household: RecordID
    /// The invitation secret when the peer is joining; empty otherwise.
    public var joinToken: [UInt8]
    /// The TCP port the peer's daemon accepts peers on (0: none), at the address it connected from.
    public var listenPort: UInt16 = 0
}

import KidLedgerDomain
import KidLedgerReplica

/// Which sync protocol version a record needs (docs/PROTOCOL.md, "Versions", "What a peer can
/// read"): the one place that says which releases can decode what. A release that adds a field or
/// an operation raises ``protocolVersionMax`` and names the new case here; the switches have no
/// `default`, so a new case does not compile until it is given its version.
///
/// Decoders skip nothing they do not know: a laptop that ignored a field would compute other
/// derived state than its peers and the replicas would diverge. So a session at an older version
/// sends only what the older side can read (``readablePart(of:by:)``), and says what it held back.
public enum RecordVersions {
    /// The highest version any record needs: a session at this version or above reads everything.
    public static let newest: UInt16 = 5

    /// The lowest protocol version whose builds decode `change`.
    public static func minimumProtocol(toRead change: Change) -> UInt16 {
        change.operations.reduce(protocolVersionMin) { max($0, minimumProtocol(toRead: $1)) }
    }

    /// The lowest protocol version whose builds decode `operation`.
    public static func minimumProtocol(toRead operation: Operation) -> UInt16 {
        switch operation {
        case .setField(_, let field, _, _): minimumProtocol(toRead: field)
        case .createHousehold, .createChild, .addTransaction, .grant, .revoke, .claim: 3
        // kidledger 0.2.0 (protocol 4): a transfer that names the changes it saw (operation 9).
        case .transferOwner(let transfer): transfer.seenChanges == nil ? 3 : 4
        // Protocol 5: the relay's membership operations (tags 10 to 13, issue 44).
        case .relayGrant, .relayRevoke, .relayEpoch, .relayMemberKey: 5
        }
    }

    /// The lowest protocol version whose builds decode a `setField` of `field`.
    public static func minimumProtocol(toRead field: Field) -> UInt16 {
        switch field {
        case .householdName, .childName, .childArchived, .childSortOrder, .memberName, .allowanceAmount,
             .allowanceRule, .allowanceNote, .allowanceStoppedAt, .childMergedInto: 3
        // kidledger 0.2.0 (protocol 4): the household's time zone and its limit for asking first.
        case .householdTimeZone, .householdConfirmAbove: 4
        }
    }

    /// The part of `changes` (as ``Replica/encodedChanges(notCoveredBy:limit:)`` returns them:
    /// origin by origin, each in sequence order) that a peer speaking `version` reads, and where
    /// each origin it stops was cut. An origin's chain is applied in order, so the readable part of
    /// an origin is its prefix up to (not including) its first change that needs a newer version,
    /// and back to the last change a batch may end at (``EncodedChange/mayEndBatch``: its head
    /// authenticates what comes before): never a part the receiver could not take whole.
    /// `withheld` names, for each origin cut, the first sequence not sent.
    public static func readablePart(of changes: [EncodedChange], by version: UInt16)
        -> (readable: [EncodedChange], withheld: [ReplicaID: UInt64]) {
        guard version < newest else { return (changes, [:]) }
        var readable: [EncodedChange] = []
        readable.reserveCapacity(changes.count)
        var withheld: [ReplicaID: UInt64] = [:]
        var start = changes.startIndex
        while start < changes.endIndex {
            let origin = changes[start].origin
            var end = start
            while end < changes.endIndex && changes[end].origin == origin { end += 1 }
            let part = changes[start..<end]
            if let first = part.firstIndex(where: { !reads($0, version) }) {
                let kept = part[..<first].lastIndex(where: \.mayEndBatch).map { part[...$0] } ?? []
                readable += kept
                withheld[origin] = kept.last.map { $0.sequence + 1 } ?? part[part.startIndex].sequence
            } else {
                readable += part
            }
            start = end
        }
        return (readable, withheld)
    }

    /// Whether a peer speaking `version` decodes `change` (one that does not decode here is not
    /// offered: it could not be read there either).
    static func reads(_ change: EncodedChange, _ version: UInt16) -> Bool {
        guard let decoded = try? RecordCodec.decodeChange(change.bytes) else { return false }
        return minimumProtocol(toRead: decoded) <= version
    }
}

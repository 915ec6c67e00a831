import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerSystem
import KidLedgerTransport

/// The owner change after a recovery (docs/RELAY-DESIGN.md, "Running a relay"): `recover` keeps,
/// per granted relay, a statement signed by the recovery key in this laptop's device state
/// (`relay.owner.RELAYHEX`, never synced); the next relay sync sends it with this owner's access
/// list before its session, and forgets it once the relay confirmed.
extension RelayRecord {
    static func statementSetting(_ relay: [UInt8]) -> String { "relay.owner." + Hex.encode(relay) }

    /// Keeps `statement` for `relay` until the relay confirms it.
    public static func keepStatement(_ statement: RelayOwnerStatement, in replica: Replica, relay: [UInt8]) throws {
        try replica.device.setSetting(statementSetting(relay), Hex.encode(statement.encoded))
    }

    /// The statement not yet confirmed by `relay` (nil: none, or unreadable).
    public static func pendingStatement(_ replica: Replica, relay: [UInt8]) throws -> RelayOwnerStatement? {
        guard let hex = try replica.device.setting(statementSetting(relay)), let bytes = Hex.decode(hex) else { return nil }
        return try? RelayOwnerStatement.decode(bytes)
    }
}

extension RelayDriver {
    /// Sends `relay` this laptop's pending owner statement with `list`, dialling as `identity` (the
    /// key the statement names); nil when there was none or the relay confirmed it (forgotten
    /// then), else why not and whether the relay refused. A refusal (a forged, stale or foreign
    /// statement) forgets it too: sending it again can't change the answer.
    static func changeOwner(_ replica: Replica, identity: Identity, relay: GrantedRelay,
                            list: SignedRelayAccessList?) -> (failure: String, refused: Bool)? {
        guard let statement = try? RelayRecord.pendingStatement(replica, relay: relay.key) else { return nil }
        guard let list else { return ("no access list to hand the relay with the owner change", false) }
        let stream: SecureStream, used: String
        do { (stream, used) = try connect(relay.addresses, relay: relay.key, as: identity) } catch {
            return ("the relay could not be reached for the owner change: \(error)", false)
        }
        defer { stream.close() }
        do {
            _ = try exchange(RelayOwnerChange.frame(statement, list: list), over: stream, at: used, expecting: RelayOwnerChange.changedType)
        } catch {
            guard case .refused = error else { return (error.description, false) }
            try? replica.device.setSetting(RelayRecord.statementSetting(relay.key), nil)
            return (error.description, true)
        }
        try? replica.device.setSetting(RelayRecord.statementSetting(relay.key), nil)
        return nil
    }

    /// Writes `frame` (an adoption or an owner change) and reads the one answer: the payload of a
    /// frame of type `expecting`, or the relay's `error` as ``RelayAdoptionError/refused(_:)``.
    static func exchange(_ frame: [UInt8], over stream: SecureStream, at used: String, expecting: UInt8) throws(RelayAdoptionError) -> [UInt8] {
        do { try stream.write(frame, timeoutMillis: SyncDriver.handshakeTimeoutMillis) } catch {
            throw .unreachable("the relay at \(used) closed the connection: \(error)")
        }
        var decoder = FrameDecoder()
        let deadline = Monotonic.millis() + Int64(SyncDriver.handshakeTimeoutMillis)
        for _ in 0..<1_024 {
            let left = Int(deadline - Monotonic.millis())
            guard left > 0 else { break }
            let chunk: [UInt8]
            do { chunk = try stream.read(maxBytes: 16 << 10, timeoutMillis: left) } catch {
                throw .unreachable("the relay at \(used) did not answer: \(error)")
            }
            if chunk.isEmpty { throw .unreachable("the relay at \(used) closed the connection without answering") }
            decoder.push(chunk)
            let frame: (type: UInt8, payload: [UInt8])?
            do { frame = try decoder.next(limit: 8 << 10) } catch { throw .refused("the relay at \(used) answered garbage: \(error)") }
            guard let frame else { continue }
            if frame.type == expecting { return frame.payload }
            if let message = try? RelayMessage.decode(type: frame.type, payload: frame.payload), case .error(_, let text) = message {
                throw .refused("the relay at \(used) refused: \(text)")
            }
            throw .refused("the relay at \(used) answered an unexpected message (type \(frame.type))")
        }
        throw .unreachable("the relay at \(used) did not answer within \(SyncDriver.handshakeTimeoutMillis) ms")
    }
}

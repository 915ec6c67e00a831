import Foundation
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerProtocol
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerTransport
import Testing
import KidLedgerTestSupport
import KidLedgerSystem

/// Sync over TCP inside the authenticated, encrypted channel: two members converge; a key the
/// responder does not admit is refused in the handshake and nothing of the ledger moves.
@Suite(.serialized) struct SecureSyncTests {
    static func seed(_ n: UInt8) -> [UInt8] { [UInt8](repeating: n, count: 64) }

    /// Accepts one connection, runs the channel handshake as `identity`, then a responder session.
    static func serveOnce(_ listener: TCPListener, _ replica: Replica, household: RecordID, identity: Identity,
                          admit: @escaping SecureChannel.Authorize) -> Background<Result<SessionOutcome, TransportError>?> {
        let box = Handoff(value: replica)
        return Background {
            guard let connection = try? listener.accept(timeoutMillis: 10_000) else { return nil }
            do {
                let channel = try SecureChannel(role: .responder, identity: identity, household: household, seed: seed(9), authorize: admit)
                let stream = try SecureStream.establish(channel, over: connection, timeoutMillis: 5_000)
                let session = SyncSession(role: .responder, replica: box.value, household: household)
                return .success(SessionRunner.run(session, over: stream, idleTimeoutMillis: 5_000, totalTimeoutMillis: 30_000, now: Monotonic.millis))
            } catch let error as TransportError {
                connection.close()
                return .failure(error)
            } catch {
                connection.close()
                return .failure(.handshake("\(error)"))
            }
        }
    }

    @Test func membersSyncInsideTheChannel() throws {
        let a = try LMDBReplica(seed: 1), b = try LMDBReplica(seed: 2)
        defer { a.remove(); b.remove() }
        let household = try Fixture.household([a.replica, b.replica])
        try Fixture.give(a.replica, 40)
        try Fixture.give(b.replica, 30)
        let owner = try Identity(seed: [UInt8](repeating: 1, count: 32))
        let spouse = try Identity(seed: [UInt8](repeating: 2, count: 32))
        let members: Set<PublicKey> = [owner.publicKey, spouse.publicKey]
        let admit: SecureChannel.Authorize = { key, _, _, _ in members.contains(key) ? nil : "not a member of this household" }

        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        let server = Self.serveOnce(listener, b.replica, household: household, identity: owner, admit: admit)
        let connection = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 5_000)
        let channel = try SecureChannel(role: .initiator, identity: spouse, household: household, seed: Self.seed(3), authorize: admit)
        let stream = try SecureStream.establish(channel, over: connection)
        #expect(stream.peerKey == owner.publicKey)
        let outcome = SessionRunner.run(SyncSession(role: .initiator, replica: a.replica, household: household), over: stream, now: Monotonic.millis)
        #expect(outcome.summary?.bothUpToDate == true, "\(outcome)")
        let served = server.wait()
        guard case .success(let serverOutcome)?? = served else { Issue.record("server: \(String(describing: served))"); return }
        #expect(serverOutcome.summary?.bothUpToDate == true)
        #expect(try a.replica.digest() == b.replica.digest())
    }

    @Test func aStrangerIsRefusedInTheHandshakeAndNothingMoves() throws {
        let a = try LMDBReplica(seed: 1), b = try LMDBReplica(seed: 2)
        defer { a.remove(); b.remove() }
        let household = try Fixture.household([a.replica, b.replica])
        try Fixture.give(b.replica, 10)
        let beforeA = try a.replica.digest(), beforeB = try b.replica.digest()
        let owner = try Identity(seed: [UInt8](repeating: 1, count: 32))
        let stranger = try Identity(seed: [UInt8](repeating: 7, count: 32))
        let admit: SecureChannel.Authorize = { key, _, _, _ in key == owner.publicKey ? nil : "not a member of this household" }

        let listener = try TCPListener(address: loopback)
        defer { listener.close() }
        let server = Self.serveOnce(listener, b.replica, household: household, identity: owner, admit: admit)
        let connection = try TCPConnection.connect(to: PeerAddress(host: "127.0.0.1", port: listener.port), timeoutMillis: 5_000)
        let channel = try SecureChannel(role: .initiator, identity: stranger, household: household, seed: Self.seed(3),
                                        authorize: { _, _, _, _ in nil })
        #expect(throws: TransportError.self) { _ = try SecureStream.establish(channel, over: connection) }
        connection.close()
        if case .failure(let error)?? = server.wait() {
            #expect(error.description.contains("not a member"))
        } else {
            Issue.record("the server admitted a stranger")
        }
        #expect(try a.replica.digest() == beforeA && b.replica.digest() == beforeB)
    }
}

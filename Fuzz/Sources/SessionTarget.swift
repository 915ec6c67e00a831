// The `session` target: a live sync session with an admitted but hostile member (issue 21, point 6).
//
// A real replica in a temporary LMDB directory (the "victim", a member's laptop holding the owner's
// household) completes a real SecureChannel handshake with a hostile member's channel, and the
// SyncSession's own hello/welcome with it. Then the fuzzer's bytes are what that member sends: the
// session's plaintext byte stream, sealed by the member's channel (so they reach the session, as an
// admitted member's bytes do: a fuzzer cannot forge ciphertext, and a member need not), opened by
// the victim's channel, fed to the victim's SyncSession. Afterwards the victim must verify, and an
// honest member's replica must sync with it to completion and end with the same digest.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerProtocol
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerInMemory

private let ownerIdentity = try! Identity(seed: Array(repeating: 11, count: 32))
private let victimIdentity = try! Identity(seed: Array(repeating: 12, count: 32))
private let hostileIdentity = try! Identity(seed: Array(repeating: 13, count: 32))
private let honestIdentity = try! Identity(seed: Array(repeating: 14, count: 32))
private let startMillis: Int64 = 1_790_000_000_000

/// The owner's household, made once in memory: the signed genesis, grants of the three members,
/// a child and a transaction, with their signed heads.
private struct Genesis: @unchecked Sendable {
    // `@unchecked`: built once by the initializer of a global (which Swift runs once, thread-safely)
    // and only read afterwards; `Change` and `SignedHead` are values.
    let household: RecordID
    let batch: (changes: [Change], heads: [SignedHead])
    let members: Set<[UInt8]>
}

private let genesis: Genesis = {
    let owner = try! Replica(store: MemoryStore(), clock: FixedClock(millis: startMillis), random: SplitMix64(seed: 21),
                             verifier: SodiumVerifier())
    owner.signer = ownerIdentity.signer
    let household = try! owner.createHousehold(name: "Fuzz", owner: ownerIdentity.publicKey.bytes,
                                               salt: Array(repeating: 5, count: 16), sign: ownerIdentity.sign).id
    let members = [("victim", victimIdentity), ("hostile", hostileIdentity), ("honest", honestIdentity)]
    try! owner.commitMembership(members.map { name, identity in
        .grant(ownerIdentity.grant(identity.publicKey, name: name, household: household, atMillis: startMillis))
    })
    _ = try! owner.addChild(name: "Ann")
    _ = try! owner.post("Ann", signedCents: 500, note: "start", source: "give")
    return Genesis(household: household, batch: try! owner.batch(notCoveredBy: [:]),
                   members: Set(([ownerIdentity] + members.map(\.1)).map(\.publicKey.bytes)))
}()

/// A member's replica over `store` holding the genesis, signing as `identity`.
private func memberReplica(_ identity: Identity, store: any KeyValueStore, seed: UInt64) -> Replica {
    do {
        let replica = try Replica(store: store, clock: FixedClock(millis: startMillis + Int64(seed) * 1_000),
                                  random: SplitMix64(seed: seed), verifier: SodiumVerifier())
        replica.signer = identity.signer
        try replica.applyRemote(genesis.batch)
        return replica
    } catch {
        violated("cannot make a member's replica: \(error)")
    }
}

/// The hostile member's replica id (what its hello or welcome announces).
private let hostileReplicaID = ReplicaID(0x4857_0000_0000_0001)

/// The victim's LMDB directory: one per process, emptied before each input.
private let victimDirectory: String = {
    let path = "/tmp/kidledger-fuzz-session.\(getpid())"
    _ = mkdir(path, 0o700)
    return path
}()

private func openVictim() -> (Replica, LMDBEnvironment) {
    for file in ["data.mdb", "lock.mdb"] { _ = unlink(victimDirectory + "/" + file) }
    do {
        let store = try LMDBEnvironment(directory: victimDirectory, tables: Tables.all, mapSizeBytes: 8 << 20, durable: false)
        return (memberReplica(victimIdentity, store: store, seed: 2), store)
    } catch {
        violated("cannot open the victim's store: \(error)")
    }
}

private func channelSeed(_ byte: UInt8) -> [UInt8] { Array(repeating: byte, count: SecureChannel.seedByteCount) }

/// The victim's and the hostile member's channels after a real handshake in memory.
private func handshake(victimInitiates: Bool) -> (victim: SecureChannel, hostile: SecureChannel) {
    let members = genesis.members
    let victimKey = victimIdentity.publicKey
    let victim = try! SecureChannel(role: victimInitiates ? .initiator : .responder, identity: victimIdentity,
                                    household: genesis.household, seed: channelSeed(31),
                                    authorize: { key, _, _, _ in members.contains(key.bytes) ? nil : "not a member" })
    let hostile = try! SecureChannel(role: victimInitiates ? .responder : .initiator, identity: hostileIdentity,
                                     household: genesis.household, seed: channelSeed(32),
                                     authorize: { key, _, _, _ in key == victimKey ? nil : "not the victim" })
    var toVictim = sent(hostile.start()), toHostile = sent(victim.start())
    for _ in 0..<8 where !(victim.isEstablished && hostile.isEstablished) {
        let forVictim = toVictim, forHostile = toHostile
        toHostile = forVictim.isEmpty ? [] : sent(victim.receive(forVictim))
        toVictim = forHostile.isEmpty ? [] : sent(hostile.receive(forHostile))
    }
    check(victim.isEstablished && hostile.isEstablished, "the genuine channel handshake failed")
    return (victim, hostile)
}

private func sent(_ actions: [ChannelAction]) -> [UInt8] {
    var out: [UInt8] = []
    for case .send(let bytes) in actions { out += bytes }
    return out
}

/// Runs two sessions against each other in memory until both end (bounded); returns their outcomes.
private func exchange(_ a: SyncSession, _ b: SyncSession) -> (SessionAction?, SessionAction?) {
    var outcomeA: SessionAction?, outcomeB: SessionAction?
    func absorb(_ actions: [SessionAction], into outcome: inout SessionAction?, to queue: inout [UInt8]) {
        for action in actions {
            if case .send(let bytes) = action { queue += bytes } else { outcome = action }
        }
    }
    var toA: [UInt8] = [], toB: [UInt8] = []
    absorb(a.start(), into: &outcomeA, to: &toB)
    absorb(b.start(), into: &outcomeB, to: &toA)
    for _ in 0..<10_000 where (outcomeA == nil || outcomeB == nil) && !(toA.isEmpty && toB.isEmpty) {
        let forA = toA, forB = toB
        toA = []
        toB = []
        if !forB.isEmpty { absorb(b.receive(forB), into: &outcomeB, to: &toA) }
        if !forA.isEmpty { absorb(a.receive(forA), into: &outcomeA, to: &toB) }
    }
    if outcomeA == nil { absorb(a.connectionClosed(), into: &outcomeA, to: &toB) }
    if outcomeB == nil { absorb(b.connectionClosed(), into: &outcomeB, to: &toA) }
    return (outcomeA, outcomeB)
}

/// The plaintext chunk sizes byte 0 chooses from.
private let chunkSizes = [1, 7, 64, 4096]

/// What one input did to the victim's session (finished: how many changes it applied).
private enum SessionEnd: Equatable { case finished(applied: Int), failed, unfinished }

/// Input byte 0: bit 0, the victim opens the connection (else the hostile member does); bits 1-2,
/// the plaintext chunk size each sealed message carries. The rest: the hostile member's session
/// bytes after its genuine hello (or welcome). Properties: nothing traps; the victim's session
/// reports at most one failure and nothing after it; the victim's replica verifies; an honest
/// member then syncs with it to completion and both end with the same digest.
private func runSession(_ data: [UInt8]) -> SessionEnd {
    guard let first = data.first else { return .unfinished }
    let victimInitiates = first & 1 == 1
    let chunk = chunkSizes[Int(first >> 1 & 3)]
    let (victim, store) = openVictim()
    defer { store.close() }
    let channels = handshake(victimInitiates: victimInitiates)
    let session = SyncSession(role: victimInitiates ? .initiator : .responder, replica: victim, household: genesis.household)

    var end = SessionEnd.unfinished
    func handle(_ actions: [SessionAction]) {
        for action in actions {
            check(end == .unfinished, "the victim's session acted after it ended: \(action)")
            switch action {
            case .send(let bytes):
                // What the victim sends reaches the member's channel intact.
                let sealed = (try? channels.victim.seal(bytes)) ?? []
                check(!sealed.isEmpty, "the victim's channel cannot seal")
                _ = channels.hostile.receive(sealed)
            case .finished(let summary): end = .finished(applied: summary.changesApplied)
            case .failed: end = .failed
            }
        }
    }
    func deliver(_ plaintext: [UInt8]) {
        var start = 0
        while start < plaintext.count && end == .unfinished {
            let piece = Array(plaintext[start..<min(plaintext.count, start + chunk)])
            start += chunk
            guard let sealed = try? channels.hostile.seal(piece) else { violated("the member's channel cannot seal") }
            for case .plaintext(let p) in channels.victim.receive(sealed) { handle(session.receive(p)) }
        }
    }
    handle(session.start())
    let prelude: Message = victimInitiates
        ? .welcome(protocolVersion: protocolVersionMax, replica: hostileReplicaID)
        : .hello(protocolVersionMin: protocolVersionMin, protocolVersionMax: protocolVersionMax, replica: hostileReplicaID,
                 household: genesis.household)
    deliver(prelude.frame())
    check(end == .unfinished, "the genuine \(prelude.name) ended the session")
    deliver(Array(data.dropFirst()))
    if end == .unfinished { handle(session.connectionClosed()); check(end == .failed, "a closed session did not fail") }

    do {
        let report = try victim.verify()
        check(report.problems.isEmpty, "the victim's replica no longer verifies: \(report.problems.prefix(3))")
        let honest = memberReplica(honestIdentity, store: MemoryStore(), seed: 3)
        _ = try honest.post("Ann", signedCents: 25, note: "after", source: "give")
        let (a, b) = exchange(SyncSession(role: .initiator, replica: honest, household: genesis.household),
                              SyncSession(role: .responder, replica: victim, household: genesis.household))
        guard case .finished = a, case .finished = b else {
            violated("an honest member cannot sync with the victim after the hostile session: \(String(describing: a)), \(String(describing: b))")
        }
        check(try honest.digest() == victim.digest(), "the honest member and the victim disagree after a sync")
    } catch {
        violated("the victim's store failed after the hostile session: \(error)")
    }
    return end
}

@Sendable func fuzzSession(_ data: [UInt8]) { _ = runSession(data) }

// MARK: - Seeds

/// What a genuine hostile-member replica (with changes of its own) sends in a whole session with a
/// fresh victim, after its hello (or welcome): the session bytes an honest client of that member
/// would send, in order.
private func genuineStream(victimInitiates: Bool) -> [UInt8] {
    let member = memberReplica(hostileIdentity, store: MemoryStore(), seed: 4)
    for i in 0..<3 { _ = try! member.post("Ann", signedCents: 100 + Int64(i), note: "member \(i)", source: "give") }
    let victim = memberReplica(victimIdentity, store: MemoryStore(), seed: 2)
    let memberSession = SyncSession(role: victimInitiates ? .responder : .initiator, replica: member, household: genesis.household)
    let victimSession = SyncSession(role: victimInitiates ? .initiator : .responder, replica: victim, household: genesis.household)
    func sends(_ actions: [SessionAction]) -> [UInt8] {
        var out: [UInt8] = []
        for case .send(let bytes) in actions { out += bytes }
        return out
    }
    // Everything the member sends, in order.
    var toVictim = sends(memberSession.start()), toMember = sends(victimSession.start())
    var stream = toVictim
    for _ in 0..<1_000 where !(toVictim.isEmpty && toMember.isEmpty) {
        let forVictim = toVictim, forMember = toMember
        toVictim = forMember.isEmpty ? [] : sends(memberSession.receive(forMember))
        stream += toVictim
        toMember = forVictim.isEmpty ? [] : sends(victimSession.receive(forVictim))
    }
    check(memberSession.state == .finished && victimSession.state == .finished, "the genuine session did not finish")
    // Without the first frame (the hello or welcome the target sends itself).
    let firstLength = Int(stream[0]) << 24 | Int(stream[1]) << 16 | Int(stream[2]) << 8 | Int(stream[3])
    return Array(stream[(4 + firstLength)...])
}

@Sendable func sessionSeeds() -> [[UInt8]] {
    let asResponder = genuineStream(victimInitiates: false), asInitiator = genuineStream(victimInitiates: true)
    var huge = ByteWriter(capacity: 32)
    huge.write(varint: 1)
    huge.write(bigEndian: UInt64(7))
    huge.write(varint: UInt64(1) << 63)
    huge.write(raw: [UInt8](repeating: 0, count: 16))
    huge.write(varint: 0)
    let seeds: [[UInt8]] = [
        [0] + asResponder,                                  // the member opens, whole messages
        [1 | 3 << 1] + asInitiator,                         // the victim opens, sealed in 4096-byte pieces
        [0 | 1 << 1] + asResponder,                         // pieces of 7 bytes
        [1 | 2 << 1] + asInitiator,                         // pieces of 64 bytes
        [0] + Frame.encode(type: 3, payload: huge.bytes),   // a vector entry of 2^63
        [0] + Array(asResponder.prefix(40)),                // cut short
    ]
    // The member's three changes are authenticated and applied, in either direction.
    check(runSession(seeds[0]) == .finished(applied: 3) && runSession(seeds[1]) == .finished(applied: 3),
          "a genuine stream does not finish the session with the member's changes applied")
    return seeds
}

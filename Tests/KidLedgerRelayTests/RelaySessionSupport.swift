import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerTestSupport
import Testing

// A household of two laptops and one relay on real LMDB and real libsodium, and a driver that
// wires a member's session to the relay's in memory, frame by frame, in a bounded loop.

/// One laptop: a replica on its own LMDB environment, writing as `identity`.
final class RelayLaptop {
    let directory = TemporaryDirectory(prefix: "kidledger-relay-laptop")
    let environment: LMDBEnvironment
    let replica: Replica
    /// The key it uses with the relay (its member relay key).
    let relayKey: Identity

    init(_ identity: Identity, relayKey: Identity, seed: UInt64) throws {
        environment = try LMDBEnvironment(directory: directory.path, tables: Tables.all, durable: false)
        replica = try Replica(store: environment, clock: FixedClock(millis: 1_800_000_000_000), random: SplitMix64(seed: seed),
                              verifier: SodiumVerifier())
        replica.signer = identity.signer
        self.relayKey = relayKey
    }

    deinit {
        environment.close()
        directory.remove()
    }
}

/// Mom (the owner) and Dad, each with a laptop, a relay store, the stream key and two epoch keys.
final class RelayFamily {
    static let owner = try! Identity(seed: [UInt8](repeating: 0x71, count: 32))
    static let dadIdentity = try! Identity(seed: [UInt8](repeating: 0x72, count: 32))
    static let relayIdentity = try! Identity(seed: [UInt8](repeating: 0x73, count: 32))
    static let stranger = try! Identity(seed: [UInt8](repeating: 0x76, count: 32))

    let mom: RelayLaptop
    let dad: RelayLaptop
    let household: RecordID
    let relayDirectory = TemporaryDirectory(prefix: "kidledger-relay-store")
    let relayEnvironment: LMDBEnvironment
    let relay: RelayStore
    let streamKey: RelayStreamKey
    let epochs: [EpochKey]
    var now: Int64 = 1_000
    var random = SplitMix64(seed: 44)

    /// Mom's laptop holds household "Home", child Ann and Dad's grant; Dad's is pinned to it and
    /// empty. The relay holds nothing yet (``installList(number:)`` installs one).
    init() throws {
        mom = try RelayLaptop(Self.owner, relayKey: try Identity(seed: [UInt8](repeating: 0x74, count: 32)), seed: 1)
        dad = try RelayLaptop(Self.dadIdentity, relayKey: try Identity(seed: [UInt8](repeating: 0x75, count: 32)), seed: 2)
        household = try mom.replica.createHousehold(name: "Home", owner: Self.owner.publicKey.bytes, salt: [UInt8](repeating: 3, count: 16),
                                                    sign: { Self.owner.sign($0) }).id
        _ = try mom.replica.addChild(name: "Ann")
        try mom.replica.commitMembership([.grant(Self.owner.grant(Self.dadIdentity.publicKey, name: "Dad", household: household, atMillis: 1))])
        try dad.replica.pinOwnedHousehold(household, genesis: try #require(try mom.replica.genesisHash()))
        relayEnvironment = try LMDBEnvironment(directory: relayDirectory.path, tables: RelayStore.tables, durable: false)
        relay = RelayStore(store: relayEnvironment)
        streamKey = RelayStreamKey.generate(using: &random)
        epochs = [EpochKey.generate(epoch: 0, using: &random), EpochKey.generate(epoch: 1, using: &random)]
    }

    deinit {
        relayEnvironment.close()
        relayDirectory.remove()
    }

    /// The access list serving both laptops' relay keys (and `extra`), numbered `number`, signed by `signer`.
    func list(number: UInt64, signer: Identity = RelayFamily.owner, for relayKey: PublicKey = RelayFamily.relayIdentity.publicKey,
              extra: [Identity] = [], quota: UInt64 = 64 << 20) throws -> SignedRelayAccessList {
        var quotas: [RelayMemberKey: UInt64] = [:]
        for key in [mom.relayKey, dad.relayKey] + extra { quotas[RelayMemberKey(bytes: key.publicKey.bytes)!] = quota }
        return SignedRelayAccessList.sign(try RelayAccessList(number: number, quotas: quotas), relay: relayKey, owner: signer)
    }

    /// A setup sealing under `epoch` with the keys of epochs 0 through `keysThrough`.
    func setup(epoch: UInt32 = 0, keysThrough: Int = 1, list: SignedRelayAccessList? = nil) -> RelayMemberSetup {
        RelayMemberSetup(relay: Self.relayIdentity.publicKey, streamKey: streamKey, keyring: EpochKeyring(Array(epochs[0...keysThrough])),
                         sealEpoch: epoch, accessList: list)
    }

    /// Installs list `number` from a session of the owner's own key (not on the list).
    @discardableResult
    func installList(number: UInt64) throws -> RelaySessionRun {
        let run = try sync(mom, as: Self.owner, setup: setup(list: try list(number: number)))
        #expect(run.member.installedAccessList == number)
        return run
    }

    /// One session of `laptop` (its relay key unless `key`) with the relay, wired in memory;
    /// `hostile` rewrites what the relay sends.
    func sync(_ laptop: RelayLaptop, as key: Identity? = nil, setup: RelayMemberSetup? = nil,
              hostile: ((RelayMessage) -> RelayMessage)? = nil, ownerStatement: RelayOwnerStatement? = nil) throws -> RelaySessionRun {
        now += 60_000
        let server = RelayServerSession(store: relay, relay: Self.relayIdentity.publicKey, owner: Self.owner.publicKey,
                                        peer: (key ?? laptop.relayKey).publicKey, ownerStatement: ownerStatement)
        let member = RelayMemberSession(replica: laptop.replica, setup: setup ?? self.setup())
        return try drive(member, server, now: now, random: &random, hostile: hostile)
    }
}

/// How one wired session ended on each side.
struct RelaySessionRun {
    var member = RelayMemberSummary()
    var server = RelayServerSummary()
    var memberFailure: RelaySessionError?
    var serverFailure: RelaySessionError?
    var finished: Bool { memberFailure == nil && serverFailure == nil }
}

/// Drives `member` and `server` against each other until both ended (at most 100,000 exchanges).
func drive(_ member: RelayMemberSession, _ server: RelayServerSession, now: Int64, random: inout SplitMix64,
           hostile: ((RelayMessage) -> RelayMessage)? = nil) throws -> RelaySessionRun {
    var run = RelaySessionRun()
    var memberEnded = false, serverEnded = false
    var toServer: [[UInt8]] = [], toMember: [[UInt8]] = []
    func take<S>(_ actions: [RelaySessionAction<S>], into queue: inout [[UInt8]], ended: inout Bool,
                 summary: (S) -> Void, failed: (RelaySessionError) -> Void) {
        for action in actions {
            switch action {
            case .send(let bytes): queue.append(bytes)
            case .finished(let s): summary(s); ended = true
            case .failed(let error): failed(error); ended = true
            }
        }
    }
    take(member.start(using: &random), into: &toServer, ended: &memberEnded, summary: { run.member = $0 }, failed: { run.memberFailure = $0 })
    for _ in 0..<100_000 {
        if toServer.isEmpty && toMember.isEmpty { break }
        for bytes in toServer where !serverEnded {
            take(server.receive(bytes, atMilliseconds: now), into: &toMember, ended: &serverEnded,
                 summary: { run.server = $0 }, failed: { run.serverFailure = $0 })
        }
        toServer = []
        var frames = toMember
        toMember = []
        if let hostile { frames = try frames.map { try rewrite($0, hostile) } }
        for bytes in frames where !memberEnded {
            take(member.receive(bytes, using: &random), into: &toServer, ended: &memberEnded,
                 summary: { run.member = $0 }, failed: { run.memberFailure = $0 })
        }
    }
    #expect(memberEnded && serverEnded, "the session did not end")
    if run.memberFailure != nil { run.member = member.summary }
    if run.serverFailure != nil { run.server = server.summary }
    return run
}

/// `frames` (whole frames) with each message rewritten by `change`.
func rewrite(_ frames: [UInt8], _ change: (RelayMessage) -> RelayMessage) throws -> [UInt8] {
    var decoder = FrameDecoder()
    decoder.push(frames)
    var out: [UInt8] = []
    while let frame = try decoder.next() {
        out += change(try RelayMessage.decode(type: frame.type, payload: frame.payload)).frame()
    }
    return out
}

/// The relay's answers to `messages`, sent in order by `peer` in one session.
func answers(_ relay: RelayStore, peer: PublicKey, _ messages: [RelayMessage], now: Int64 = 5,
             ownerStatement: RelayOwnerStatement? = nil) throws -> [RelayMessage] {
    let server = RelayServerSession(store: relay, relay: RelayFamily.relayIdentity.publicKey, owner: RelayFamily.owner.publicKey, peer: peer,
                                    ownerStatement: ownerStatement)
    var replies: [RelayMessage] = []
    for message in messages {
        for case .send(let bytes) in server.receive(message.frame(), atMilliseconds: now) {
            var decoder = FrameDecoder()
            decoder.push(bytes)
            while let frame = try decoder.next() { replies.append(try RelayMessage.decode(type: frame.type, payload: frame.payload)) }
        }
    }
    return replies
}

extension Replica {
    /// A give of `cents` to Ann.
    func give(_ cents: Int64) throws {
        _ = try post("Ann", signedCents: cents, note: "", source: "give")
    }
}

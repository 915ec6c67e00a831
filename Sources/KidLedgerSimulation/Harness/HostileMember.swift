import KidLedgerDomain
import KidLedgerReplica
import KidLedgerProtocol
import KidLedgerSecurity

/// What a hostile member does to the frames its real replica's sync sessions send (issue 21
/// point 7; docs/SIMULATOR.md, "Hostile member"). The hostile replica writes through the real
/// ``Replica`` like every other; during the fault phase its outgoing frames are altered, or
/// crafted frames added, and they reach the honest replicas' real ``SyncSession`` through the
/// simulated network. After the fault phase it behaves, so the run can end quiet.
public enum HostileStrategy: String, CaseIterable, Sendable {
    /// A change under a fresh origin it claims, carrying membership records it has no right to
    /// sign: a grant of a stranger's key and a revocation of the owner, both signed by itself.
    case forgedHousehold
    /// A change under another member's origin (the next sequence there), with a claim of that
    /// origin signed by itself, and a head signed by itself.
    case claimOthersOrigin
    /// One of its own changes sent with another payload at the same origin and sequence, under
    /// the real signed heads.
    case sameIdConflict
    /// Vectors and acks with entries near `UInt64.max` and `Int64.max`, unknown origins, and a
    /// change at sequence `UInt64.max`.
    case hugeNumbers
    /// A signed change under a fresh origin it claims, stamped years (or `Int64.max` ms) ahead.
    case farFutureStamps
    /// Frames it sent before, sent again (in this session or another).
    case replay
    /// The owner revokes it while a member lags (partitioned from the owner with it, not yet
    /// knowing); it ignores its revocation (no attentionRequired: it keeps writing real changes)
    /// and syncs them to the lagging member, which carries them to the others after the heal.
    /// Counted on each frame carrying its own changes beyond the revocation's cut.
    case writeAfterRevocation
    /// Claims of more origins than `Limits.originsPerMemberMax`, signed by itself, in one batch.
    case originFlood
    /// More children than `Limits.childrenPerMemberMax` created in two changes under a fresh
    /// origin it claims.
    case childFlood
    /// Other versions of one of its own changes (same origin and sequence, another stamp), each
    /// under a head it signs itself over that version's chain: a fork only its key can make, up
    /// to six versions a use, so it may pass `Limits.forkVersionsPerSequenceMax`.
    case signedFork
    /// A thief holding the owner's key (issue 39): a change under a fresh origin it claims with
    /// the genesis owner's key, carrying a second genesis of the household (same id, owner and
    /// salt, an earlier creation time, a recovery key of its own) signed by that key, re-signed
    /// membership (its own grant, signed again by the owner key), and owner transfers signed by its recovery key and by the owner key. Each use a new origin,
    /// at most ``HostileState/ownerKeyUsesMax`` uses in all. Once in a run, after its first use,
    /// it instead forks the owner's own origin at a change carrying the owner's grant or
    /// revocation (another version re-granting itself, under a head the owner key signs): after a
    /// recovery that saw the change, the transfer names it, and the fork voids nothing (issue 39).
    case stolenOwnerKey
    /// Equivocating chain heads of the owner key: another version of the thief's owner-key change
    /// (same origin and sequence, another stamp), under a head the owner key signs over that
    /// version's chain (a fork of an origin the owner key claims).
    case ownerKeyEquivocation
    /// Claims of fresh origins by throwaway keys nobody granted (each with a change giving money),
    /// in one batch under heads those keys sign: a stranger's flood (issue 39, point 2). No
    /// honest replica stores or passes on any of it (checked: ``Simulator/strangerOriginsHeld()``).
    case strangerFlood
    /// A fresh origin of its own whose first change it sends twice: first a version without the
    /// claim, then the one with it (each under a head it signs), so a receiver would judge the
    /// first unclaimed and recompute its whole state for the second (issue 39, point 3). The
    /// first is refused (no member's claim opens the origin); the second is taken, with no
    /// recomputation.
    case claimlessFirst

    /// Whether it alters or adds frames (``writeAfterRevocation`` writes real changes instead).
    var altersFrames: Bool { self != .writeAfterRevocation }

    /// The histogram key this strategy is counted under (beside the fault kinds).
    public var countKey: String { "hostile.\(rawValue)" }

    /// The strategy mix of `seed`: each strategy with even chance, at least one.
    public static func draw(seed: UInt64) -> [HostileStrategy] {
        var g = SplitMix64(seed: seed ^ 0x0B57_11E0_B57_11E)
        var mix = allCases.filter { _ in Bool.random(using: &g) }
        if mix.isEmpty { mix = [allCases.randomElement(using: &g)!] }
        return mix
    }
}

/// The hostile member's memory: the frames it sent (for replays) and the nonces of the origins
/// it claimed for crafted changes.
struct HostileState {
    let node: Int
    let strategies: [HostileStrategy]
    var sent: [[UInt8]] = []
    var nextNonce: UInt64 = 1 << 40
    static let keptFrames = 24
    /// The cut of its revocations so far (the pointwise minimum of their `seen`), once revoked.
    var cut: VersionVector?
    /// Until when the partition of ``HostileStrategy/writeAfterRevocation`` (it and the lagging
    /// member) holds: random partition changes wait.
    var lagUntil: Int64 = .min
    /// The crafted batches of ``HostileStrategy/originFlood`` and ``HostileStrategy/childFlood``,
    /// made once and sent again each time (so the flood is over the limit once, not without end).
    var floods: [HostileStrategy: [(change: Change, head: SignedHead)]] = [:]
    /// How often each flood was sent: at most ``floodSendsMax`` (the honest replicas pass it on
    /// among themselves; each resend costs every receiver a batch of 256 changes).
    var floodSends: [HostileStrategy: Int] = [:]
    static let floodSendsMax = 3
    /// The change ``HostileStrategy/signedFork`` forks (the first of its own it sent), and how
    /// many versions of it it made.
    var forkTarget: Change?
    var forkVersions: UInt64 = 0
    /// How many versions below its revocation's cut ``HostileStrategy/writeAfterRevocation`` wrote.
    var forksBelowCut = 0
    /// The owner-key changes ``HostileStrategy/stolenOwnerKey`` and
    /// ``HostileStrategy/ownerKeyEquivocation`` made (the last one is forked), and how many uses.
    var ownerKeyChanges: [Change] = []
    var ownerKeyUses = 0
    /// Whether ``HostileStrategy/stolenOwnerKey`` forked the owner's origin already (once a run).
    var forkedOwnerOrigin = false
    /// At most this many uses of the owner key a run: each claims an origin for the owner key
    /// (far below `Limits.originsPerMemberMax`) or forks one (far below `Limits.forkVersionsPerSequenceMax`).
    static let ownerKeyUsesMax = 3
    /// The origins ``HostileStrategy/strangerFlood`` made for throwaway keys (none may be stored).
    var strangerOrigins: Set<ReplicaID> = []
    /// How many throwaway keys it used so far (their seeds are drawn from the run's generator).
    static let strangersPerFlood = 40

    /// Whether it ignores its revocation: no attentionRequired, it keeps writing and syncing.
    var ignoresRevocation: Bool { strategies.contains(.writeAfterRevocation) }
}

extension Simulator {
    // long-function: one case per attack the hostile member makes: a table.
    /// The frames to send in place of `frame`, which the hostile node is about to send on `c`.
    func hostileFrames(_ frame: [UInt8], connection c: SimConnection) -> [[UInt8]] {
        guard var state = hostile, faultsOn, let replica = nodes[state.node].replica else { return [frame] }
        defer { hostile = state }
        var out: [[UInt8]] = []
        var replaced = false  // whether an altered frame takes the real one's place
        var decoder = FrameDecoder()
        decoder.push(frame)
        let message: Message? = (try? decoder.next()).flatMap { $0 }.flatMap { try? Message.decode(type: $0.type, payload: $0.payload) }
        // At most one strategy a frame (a frame the peer cannot decode ends the session, and would
        // hide whatever else was tried on it).
        if state.ignoresRevocation, let cut = state.cut, case .changes(let changes, _, _)? = message,
           changes.contains(where: { $0.origin == replica.replicaID && $0.sequence > cut[$0.origin] ?? 0 }) {
            count(HostileStrategy.writeAfterRevocation.countKey)
            log("\(nodes[state.node].name) hostile writeAfterRevocation on c\(c.id): its changes beyond its revocation's cut")
        }
        // It also writes a new version of a change its revocation saw (twice at most, once it knows
        // its cut), giving 10,000.00: a version vector cannot tell versions apart, so no version at
        // or above a fork counts (`Replica.covered`).
        if state.ignoresRevocation, let cut = state.cut, state.forksBelowCut < 2, case .changes? = message, chance(250),
           let fork = forkBelowCut(cut, state, replica) {
            state.forksBelowCut += 1
            out.append(fork)
            count("\(HostileStrategy.writeAfterRevocation.countKey).forkBelowCut")
            log("\(nodes[state.node].name) hostile writeAfterRevocation on c\(c.id): a new version of its change \(replica.replicaID):\(cut[replica.replicaID] ?? 0), below its revocation's cut")
        }
        if chance(300), let strategy = state.strategies.filter(\.altersFrames).randomElement(using: &g) {
            switch strategy {
            case .replay:
                guard !state.sent.isEmpty else { break }
                out.append(state.sent.randomElement(using: &g)!)
            case .hugeNumbers:
                switch message {
                case .vector(var summary)?:
                    for key in summary.vector.keys.sorted() where Bool.random(using: &g) { summary.vector[key] = hugeSequence() }
                    summary.vector[ReplicaID(g.next())] = hugeSequence()
                    out.append(Message.vector(summary).frame())
                    replaced = true
                case .ack(var vector)?:
                    for key in vector.keys.sorted() { vector[key] = hugeSequence() }
                    out.append(Message.ack(vector).frame())
                    replaced = true
                case .changes?:
                    let stamp = chance(100) ? HLC(millis: .max, counter: .max) : HLC(millis: HLC.millisMax, counter: .max)
                    let claim = nodes[state.node].member.signer.claim(household: household, nonce: state.nextNonce)
                    state.nextNonce += 1
                    let huge = Change(origin: claim.origin, sequence: hugeSequence(), hlc: stamp, operations: [.claim(claim)])
                    out.append(Message.changes([huge], isLast: false).frame())
                default:
                    break
                }
            case .sameIdConflict:
                guard case .changes(var changes, let isLast, let heads)? = message,
                      let i = changes.firstIndex(where: { $0.origin == replica.replicaID }) else { break }
                changes[i].hlc.counter &+= 1
                changes[i].operations.reverse()
                out.append(Message.changes(changes, isLast: isLast, heads: heads).frame())
                replaced = true
            case .forgedHousehold, .farFutureStamps, .claimOthersOrigin:
                guard case .changes? = message, let crafted = craftedChange(strategy, &state, replica) else { break }
                out.append(Message.changes([crafted.change], isLast: false, heads: [crafted.head]).frame())
            case .originFlood, .childFlood:
                guard case .changes? = message, state.floodSends[strategy, default: 0] < HostileState.floodSendsMax else { break }
                let flood = state.floods[strategy] ?? floodChanges(strategy, &state)
                state.floods[strategy] = flood
                state.floodSends[strategy, default: 0] += 1
                out.append(Message.changes(flood.map { $0.change }, isLast: false, heads: flood.map { $0.head }).frame())
            case .signedFork:
                guard case .changes(let changes, _, _)? = message,
                      let target = state.forkTarget ?? changes.first(where: { $0.origin == replica.replicaID }) else { break }
                state.forkTarget = target
                let previous = target.sequence == 1 ? [UInt8](repeating: 0, count: 16) : ((try? replica.chain(target.origin, at: target.sequence - 1)) ?? nil)
                guard let previous else { break }
                for _ in 0..<Int.random(in: 1...6, using: &g) {
                    state.forkVersions += 1
                    var version = target
                    version.hlc.counter &+= UInt32(truncatingIfNeeded: state.forkVersions)
                    let head = signedHead(of: version, after: previous, by: nodes[state.node].member.signer).head
                    out.append(Message.changes([version], isLast: false, heads: [head]).frame())
                }
            case .stolenOwnerKey, .ownerKeyEquivocation:
                guard case .changes? = message, state.ownerKeyUses < HostileState.ownerKeyUsesMax,
                      let crafted = ownerKeyChange(strategy, &state, replica) else { break }
                state.ownerKeyUses += 1
                out.append(Message.changes([crafted.change], isLast: false, heads: [crafted.head]).frame())
            case .strangerFlood:
                guard case .changes? = message, state.floodSends[strategy, default: 0] < HostileState.floodSendsMax else { break }
                let flood = state.floods[strategy] ?? strangerChanges(&state)
                state.floods[strategy] = flood
                state.floodSends[strategy, default: 0] += 1
                out.append(Message.changes(flood.map { $0.change }, isLast: false, heads: flood.map { $0.head }).frame())
            case .claimlessFirst:
                guard case .changes? = message, let child = ((try? replica.children()) ?? nil)?.first?.id else { break }
                let signer = nodes[state.node].member.signer
                let claim = signer.claim(household: household, nonce: state.nextNonce)
                state.nextNonce += 1
                let id = Membership.entryID(RecordID(high: g.next(), low: g.next()), madeBy: signer.key)
                let give = Operation.addTransaction(LedgerTransaction(id: id, childID: child, amountCents: 1,
                                                                      createdAtMillis: time.millis, source: "give"))
                let zero = [UInt8](repeating: 0, count: 16)
                let hlc = HLC(millis: time.millis + nodes[state.node].skew)
                for operations in [[give], [.claim(claim), give]] {
                    let change = Change(origin: claim.origin, sequence: 1, hlc: hlc, operations: operations)
                    out.append(Message.changes([change], isLast: false, heads: [signedHead(of: change, after: zero, by: signer).head]).frame())
                }
            case .writeAfterRevocation:
                break
            }
            if !out.isEmpty {
                count(strategy.countKey)
                log("\(nodes[state.node].name) hostile \(strategy.rawValue) on c\(c.id) (\(message?.name ?? "a frame it cannot read"))")
            }
        }
        // An altered frame replaces the real one; a crafted or replayed one goes before it.
        if !replaced { out.append(frame) }
        state.sent.append(frame)
        if state.sent.count > HostileState.keptFrames { state.sent.removeFirst() }
        return out
    }

    /// A frame with another version of the hostile replica's change at its revocation's cut,
    /// giving 10,000.00 to a child, under a head it signs itself; nil when the cut names no
    /// change of its origin or there is no child.
    func forkBelowCut(_ cut: VersionVector, _ state: HostileState, _ replica: Replica) -> [UInt8]? {
        let origin = replica.replicaID
        guard let sequence = cut[origin], sequence >= 1,
              let encoded = ((try? replica.encodedChanges(of: origin, after: sequence - 1)) ?? nil)?.first,
              let original = try? RecordCodec.decodeChange(encoded.bytes), original.sequence == sequence,
              let child = ((try? replica.children()) ?? nil)?.first?.id else { return nil }
        let previous = sequence == 1 ? [UInt8](repeating: 0, count: 16) : ((try? replica.chain(origin, at: sequence - 1)) ?? nil)
        guard let previous else { return nil }
        let signer = nodes[state.node].member.signer
        let id = Membership.entryID(RecordID(high: g.next(), low: g.next()), madeBy: signer.key)
        var version = original
        version.hlc.counter &+= 1
        version.operations = [.addTransaction(LedgerTransaction(id: id, childID: child, amountCents: 1_000_000,
                                                                createdAtMillis: original.hlc.millis, source: "give"))]
        let head = signedHead(of: version, after: previous, by: signer).head
        return Message.changes([version], isLast: false, heads: [head]).frame()
    }

    /// A sequence number at the protocol's bound, just over it, or far over it.
    func hugeSequence() -> UInt64 {
        switch Int.random(in: 0..<10, using: &g) {
        case 0: UInt64.max
        case 1: Limits.sequenceMax + 1
        default: Limits.sequenceMax - UInt64.random(in: 0...2, using: &g)
        }
    }

    /// A change the hostile member signs itself (its head, its claims), of `strategy`.
    func craftedChange(_ strategy: HostileStrategy, _ state: inout HostileState, _ replica: Replica)
        -> (change: Change, head: SignedHead)? {
        let node = nodes[state.node]
        let signer = node.member.signer
        let now = time.millis + node.skew
        var origin: ReplicaID
        var sequence: UInt64 = 1
        var previous = [UInt8](repeating: 0, count: 16)
        var hlc = HLC(millis: now)
        var operations: [Operation]
        switch strategy {
        case .claimOthersOrigin:
            let victims = nodes.indices.filter { $0 != state.node }
            guard let v = victims.randomElement(using: &g), let victim = nodes[v].replica else { return nil }
            origin = victim.replicaID
            sequence = ((try? replica.versionVector()[origin]) ?? nil).map { $0 + 1 } ?? 1
            if sequence > 1 { previous = ((try? replica.chain(origin, at: sequence - 1)) ?? nil) ?? previous }
            log("\(node.name) forges \(origin):\(sequence) under r\(v)'s origin (r\(v) holds \(((try? victim.versionVector()[origin]) ?? nil) ?? 0))")
            var claim = signer.claim(household: household, nonce: state.nextNonce)
            claim.origin = origin
            state.nextNonce += 1
            operations = [.claim(claim)]
        case .forgedHousehold, .farFutureStamps:
            let claim = signer.claim(household: household, nonce: state.nextNonce)
            state.nextNonce += 1
            origin = claim.origin
            operations = [.claim(claim)]
            if strategy == .forgedHousehold {
                guard let stranger = try? share.identity(seed: drawBytes(Identity.seedByteCount)) else { return nil }
                operations.append(.grant(share.grant(by: node.member, stranger.publicKey, name: "stranger", household: household,
                                                     atMillis: now)))
                operations.append(.revoke(share.revocation(by: node.member, of: nodes[currentOwner].member.publicKey.bytes,
                                                           seen: (try? replica.versionVector()) ?? [:], household: household,
                                                           atMillis: now)))
            } else {
                hlc = HLC(millis: Bool.random(using: &g) ? HLC.millisMax : now + 10 * 365 * 86_400_000, counter: .max)
            }
        default:
            return nil
        }
        let change = Change(origin: origin, sequence: sequence, hlc: hlc, operations: operations)
        return (change, signedHead(of: change, after: previous, by: signer).head)
    }

    /// A change of a thief holding the genesis owner's key (``HostileStrategy/stolenOwnerKey``,
    /// ``HostileStrategy/ownerKeyEquivocation``), under the head that key signs. Everything it
    /// carries is forged on every honest replica whatever the ownership: the second genesis (not
    /// the pinned one), the transfers (not signed by the household's recovery key); the hostile
    /// member's own grant, re-signed, counts only while the owner key owns and makes
    /// nobody a member who was not.
    func ownerKeyChange(_ strategy: HostileStrategy, _ state: inout HostileState, _ replica: Replica)
        -> (change: Change, head: SignedHead)? {
        let thief = nodes[0].member
        let signer = share.signer(for: thief)
        let zero = [UInt8](repeating: 0, count: 16)
        if strategy == .stolenOwnerKey, state.ownerKeyUses > 0, !state.forkedOwnerOrigin, chance(500),
           let fork = ownerOriginFork(replica, signer: signer, state.node) {
            state.forkedOwnerOrigin = true
            count("\(HostileStrategy.stolenOwnerKey.countKey).ownerOriginFork")
            return fork
        }
        if strategy == .ownerKeyEquivocation, var version = state.ownerKeyChanges.last {
            version.hlc.counter &+= 1
            state.ownerKeyChanges.append(version)
            log("\(nodes[state.node].name) signs another version of \(version.origin):1 with the owner key")
            return (version, signedHead(of: version, after: zero, by: signer).head)
        }
        guard let genesis = ((try? replica.genesis()) ?? nil), !genesis.owner.isEmpty,
              let theirs = try? secondGenesis(of: genesis, signedBy: thief) else { return nil }
        let now = time.millis + nodes[state.node].skew
        let claim = signer.claim(household: household, nonce: (1 << 41) + UInt64(state.ownerKeyChanges.count))
        var ops: [Operation] = [.claim(claim), .createHousehold(theirs.genesis)]
        ops.append(.grant(share.grant(by: thief, nodes[state.node].member.publicKey, name: nodes[state.node].name,
                                      household: household, atMillis: now)))
        for (key, epoch) in [(theirs.recovery, UInt64(1)), (thief, UInt64(99))] {
            ops.append(.transferOwner(transfer(to: thief.publicKey.bytes, epoch: epoch, at: now, signedBy: key)))
        }
        let change = Change(origin: claim.origin, sequence: 1, hlc: HLC(millis: now), operations: ops)
        state.ownerKeyChanges.append(change)
        log("\(nodes[state.node].name) signs a second genesis and membership records with the owner key under \(claim.origin)")
        return (change, signedHead(of: change, after: zero, by: signer).head)
    }

    /// Another version of the first change of the owner's origin (replica 0's, as the hostile
    /// `replica` holds it) that carries an owner-signed grant or revocation: the same origin and
    /// sequence, another stamp, re-granting the hostile member (`node`) with the owner key
    /// instead, under the head `signer` (the owner key) signs over that version's chain. Nil when
    /// the replica holds no such change (or not the chain before it).
    func ownerOriginFork(_ replica: Replica, signer: MemberSigner, _ node: Int) -> (change: Change, head: SignedHead)? {
        guard let origin = nodes[0].replica?.replicaID,
              let held = try? replica.encodedChanges(of: origin, after: 0) else { return nil }
        let target = held.lazy.compactMap { try? RecordCodec.decodeChange($0.bytes) }.first { change in
            change.operations.contains { switch $0 { case .grant, .revoke: true; default: false } }
        }
        guard let target else { return nil }
        let previous = target.sequence == 1 ? [UInt8](repeating: 0, count: 16) : ((try? replica.chain(origin, at: target.sequence - 1)) ?? nil)
        guard let previous else { return nil }
        var version = target
        version.hlc.counter &+= 1
        version.operations = [.grant(share.grant(by: nodes[0].member, nodes[node].member.publicKey, name: nodes[node].name,
                                                 household: household, atMillis: target.hlc.millis))]
        log("\(nodes[node].name) signs another version of the owner's \(origin):\(target.sequence) with the owner key")
        return (version, signedHead(of: version, after: previous, by: signer).head)
    }

    /// A second creation record of the household `genesis` is the genesis of: the same id, owner
    /// and salt, created a millisecond earlier, naming a fresh recovery key (returned), signed
    /// by `owner` (the genesis owner's key, in a thief's hands).
    func secondGenesis(of genesis: Household, signedBy owner: Identity) throws -> (genesis: Household, recovery: Identity) {
        let recovery = try share.identity(seed: drawBytes(Identity.seedByteCount))
        var second = genesis
        second.createdAtMillis -= 1
        second.recovery = recovery.publicKey.bytes
        second.signature = share.sign(Membership.genesisMessage(second), by: owner)
        return (second, recovery)
    }

    /// An owner transfer to `newOwner` at `epoch`, seeing nothing, signed by `key`.
    func transfer(to newOwner: [UInt8], epoch: UInt64, at millis: Int64, signedBy key: Identity) -> OwnerTransfer {
        var t = OwnerTransfer(newOwner: newOwner, epoch: epoch, transferredAtMillis: millis, seen: [:], signature: [])
        t.signature = share.sign(Membership.transferMessage(household: household, t), by: key)
        return t
    }

    /// A scenario's `rX second-genesis` (``Scenario/Action/secondGenesis``): `node`, holding the
    /// genesis owner's key (the stolen owner laptop), signs a second genesis naming its own
    /// recovery key and a transfer to a fresh key signed with it, in a change under a fresh origin
    /// the owner key claims, and puts it in its own log through the receive path (a modified
    /// client): its sessions then carry it to every laptop. Every replica forges both.
    func signSecondGenesis(_ node: SimNode) throws -> String {
        guard let replica = node.replica, !node.isFrozen, let genesis = try replica.genesis(), !genesis.owner.isEmpty else {
            return "refused: \(node.name) is down, switched away or holds no owned household"
        }
        guard genesis.owner == node.member.publicKey.bytes else { return "refused: \(node.name) does not hold the owner key" }
        let theirs = try secondGenesis(of: genesis, signedBy: node.member)
        let accomplice = try share.identity(seed: drawBytes(Identity.seedByteCount))
        let now = time.millis + node.skew
        let signer = share.signer(for: node.member)
        let claim = signer.claim(household: household, nonce: 1 << 42)
        let change = Change(origin: claim.origin, sequence: 1, hlc: HLC(millis: now),
                            operations: [.claim(claim), .createHousehold(theirs.genesis),
                                         .transferOwner(transfer(to: accomplice.publicKey.bytes, epoch: 1, at: now, signedBy: theirs.recovery))])
        let head = signedHead(of: change, after: [UInt8](repeating: 0, count: 16), by: signer).head
        _ = try replica.applyRemote([change], heads: [head])
        return "signs a second genesis with the owner key (recovery key \(theirs.recovery.publicKey.fingerprint)) and a transfer to \(accomplice.publicKey.fingerprint) signed with it, under \(claim.origin)"
    }

    /// A scenario's `rX grow-household MEMBERS` (``Scenario/Action/growHousehold(_:)``): `node`,
    /// the owner, grants `members` fresh keys through the product's path, and each key's
    /// `Limits.originsPerMemberMax` origin claims (one change each, under the head the key signs)
    /// reach its replica through the receive path, as if those laptops had synced to it. Its
    /// sessions then carry them all: a version vector of more than `Limits.cutEntriesMax` origins
    /// from 40 members on.
    func growHousehold(_ node: SimNode, members: Int) throws -> String {
        guard let replica = node.replica, !node.isFrozen,
              try replica.ownership()?.owner == node.member.publicKey.bytes else { return "refused: \(node.name) is down, switched away or not the owner" }
        let now = time.millis + node.skew
        let keys = try (0..<members).map { _ in try share.identity(seed: drawBytes(Identity.seedByteCount)) }
        let before = try ownSequence(node)
        try replica.commitMembership(keys.enumerated().map { i, key in
            .grant(share.grant(by: node.member, key.publicKey, name: "laptop \(i + 1)", household: household, atMillis: now))
        })
        try recordLocalChanges(node, after: before)
        let zero = [UInt8](repeating: 0, count: 16)
        for key in keys {
            let signer = share.signer(for: key)
            var changes: [Change] = [], heads: [SignedHead] = []
            for nonce in UInt64(0)..<UInt64(Limits.originsPerMemberMax) {
                let claim = signer.claim(household: household, nonce: nonce)
                let change = Change(origin: claim.origin, sequence: 1, hlc: HLC(millis: now), operations: [.claim(claim)])
                changes.append(change)
                heads.append(signedHead(of: change, after: zero, by: signer).head)
            }
            _ = try replica.applyRemote(changes, heads: heads)
        }
        return "grants \(members) keys; their \(members * Limits.originsPerMemberMax) origins reach it (\(try replica.versionVector().count) origins held)"
    }

    /// `signer`'s head of `change`, whose origin's chain is `previous` before it, and the chain
    /// at `change`.
    func signedHead(of change: Change, after previous: [UInt8], by signer: MemberSigner) -> (head: SignedHead, chain: [UInt8]) {
        let link = Replica.chainLink(after: previous, onlyVersion: PlainPreparer().prepare(change, encoded: RecordCodec.encode(change)).version)
        return (signer.head(household: household, origin: change.origin, sequence: change.sequence, chain: link), link)
    }

    /// The crafted changes of ``HostileStrategy/strangerFlood``: for each of
    /// ``HostileState/strangersPerFlood`` throwaway keys, the claim of a fresh origin and a give of
    /// one cent to a child (when there is one), under the head that key signs.
    func strangerChanges(_ state: inout HostileState) -> [(change: Change, head: SignedHead)] {
        let node = nodes[state.node]
        let now = time.millis + node.skew
        let zero = [UInt8](repeating: 0, count: 16)
        let child = ((try? node.replica?.children()) ?? nil)?.first?.id
        var flood: [(change: Change, head: SignedHead)] = []
        for _ in 0..<HostileState.strangersPerFlood {
            guard let stranger = try? share.identity(seed: drawBytes(Identity.seedByteCount)) else { continue }
            let signer = share.signer(for: stranger)
            let claim = signer.claim(household: household, nonce: g.next())
            var operations: [Operation] = [.claim(claim)]
            if let child {
                let id = Membership.entryID(RecordID(high: g.next(), low: g.next()), madeBy: signer.key)
                operations.append(.addTransaction(LedgerTransaction(id: id, childID: child, amountCents: 1, createdAtMillis: now,
                                                                    source: "give")))
            }
            let change = Change(origin: claim.origin, sequence: 1, hlc: HLC(millis: now), operations: operations)
            state.strangerOrigins.insert(claim.origin)
            flood.append((change, signedHead(of: change, after: zero, by: signer).head))
        }
        log("\(node.name) crafts a strangerFlood: \(flood.count) origins of throwaway keys")
        return flood
    }

    /// The crafted changes of a flood, each with its signed head: for ``HostileStrategy/originFlood``,
    /// `Limits.originsPerMemberMax` claims of fresh origins (with its own origin, one over the
    /// limit); for ``HostileStrategy/childFlood``, a fresh origin's claim and
    /// `Limits.childrenPerMemberMax + 1` child creations in two changes.
    func floodChanges(_ strategy: HostileStrategy, _ state: inout HostileState) -> [(change: Change, head: SignedHead)] {
        let node = nodes[state.node]
        let signer = node.member.signer
        let now = time.millis + node.skew
        let zero = [UInt8](repeating: 0, count: 16)
        var flood: [(change: Change, head: SignedHead)] = []
        if strategy == .originFlood {
            for _ in 0..<Limits.originsPerMemberMax {
                let claim = signer.claim(household: household, nonce: state.nextNonce)
                state.nextNonce += 1
                let change = Change(origin: claim.origin, sequence: 1, hlc: HLC(millis: now), operations: [.claim(claim)])
                flood.append((change, signedHead(of: change, after: zero, by: signer).head))
            }
        } else {
            let claim = signer.claim(household: household, nonce: state.nextNonce)
            state.nextNonce += 1
            let children = (0...Limits.childrenPerMemberMax).map { _ in
                Operation.createChild(ChildRecord(id: RecordID(high: g.next(), low: g.next()), createdAtMillis: now))
            }
            let split = children.count * 3 / 5
            var previous = zero
            let batches: [[Operation]] = [[.claim(claim)] + children[..<split], Array(children[split...])]
            for (i, operations) in batches.enumerated() {
                let change = Change(origin: claim.origin, sequence: UInt64(i + 1), hlc: HLC(millis: now, counter: UInt32(i)),
                                    operations: operations)
                let signed = signedHead(of: change, after: previous, by: signer)
                previous = signed.chain
                flood.append((change, signed.head))
            }
        }
        log("\(node.name) crafts its \(strategy.rawValue): \(flood.count) changes under \(Set(flood.map { $0.change.origin }).count) origins it claims")
        return flood
    }
}

extension Simulator {
    /// Whether node `index` is the hostile member and ignores its revocation
    /// (``HostileStrategy/writeAfterRevocation``): it keeps writing and syncing, never in attentionRequired.
    func ignoresRevocation(_ index: Int) -> Bool {
        hostile.map { $0.node == index && $0.ignoresRevocation } ?? false
    }

    /// ``HostileStrategy/writeAfterRevocation`` (and ``SimulationParameters/hostileRevoked``): the owner revokes the hostile member, through the
    /// product's revocation path (``revoke(_:by:)``), while a member next to it lags: the two are
    /// partitioned from the rest for a while first, so the lagging one takes the hostile member's
    /// later changes and carries them to the others after the partition ends. When the owner
    /// cannot revoke now (down, switched away, not yet the owner on its replica) it tries again later.
    func revokeHostile() throws {
        guard faultsOn, let h = hostile?.node else { return }
        let owner = nodes[currentOwner]
        guard let replica = owner.replica, !owner.isFrozen, try replica.ownership()?.owner == owner.member.publicKey.bytes else {
            log("\(owner.name) cannot revoke the hostile r\(h) now; again in \(Self.checkMillis) ms")
            queue.schedule(at: time.millis + Self.checkMillis, .hostileRevocation)
            return
        }
        // A member that lags: not the owner, not revoked (a revoked one takes nothing from it), next to it.
        let lagging = nodes.indices.filter {
            $0 != h && $0 != currentOwner && !revokedNodes.contains($0) && adjacent($0, h) && nodes[$0].isUp
        }
        if let l = lagging.randomElement(using: &g) {
            hostile!.lagUntil = time.millis + Int64.random(in: 1_000...5_000, using: &g)
            log("r\(l) lags behind with the hostile r\(h): partitioned from \(owner.name) until +\(hostile!.lagUntil - startMillis) ms at least")
            partition([h, l])
        } else {
            log("no member can lag behind with the hostile r\(h)")
        }
        try revoke(h, by: currentOwner)
    }
}

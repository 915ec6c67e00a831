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
}

extension Simulator {
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
        if chance(300), let strategy = state.strategies.randomElement(using: &g) {
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
        let preparer = PlainPreparer()
        let link = preparer.link(after: previous, onlyVersion: preparer.prepare(change, received: nil).version)
        return (change, signer.head(household: household, origin: origin, sequence: sequence, chain: link))
    }
}

import KidLedgerDomain
import KidLedgerInMemory
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerReplica
import KidLedgerSecurity

/// The simulated relay (issue 44; docs/SIMULATOR.md, "Relays"): the real ``RelayStore`` and
/// ``RelayServerSession`` on the relay's side, the real ``RelayMemberSession`` on each member's,
/// over the simulated network (its virtual clock, delays and loss). The owner adds it through
/// ``Replica/addRelay(_:addresses:owner:using:)``, members publish their keys through
/// ``Replica/publishRelayKeys(identity:)``, the owner signs the access list from
/// ``Replica/relayMemberKeys(relay:)`` and posts the epoch boxes to the members' mailboxes. Its
/// randomness (the relay's key, stream keys, epoch keys, sealing nonces, its delays and its
/// hostile choices) comes from ``relayG`` alone, so a run without a relay draws exactly as before.
extension Simulator {
    /// Per-member quota on the access list.
    static let relayQuota: UInt64 = 64 << 20
    /// What the delay mode adds to each message the relay sends.
    static let relayHostileDelayMillis: ClosedRange<Int64> = 1_000...3_000

    /// Places the relay (`relay` in a scenario, `--relays` in the fuzz mix): not added yet.
    func placeRelay() throws {
        var bytes: [UInt8] = []
        while bytes.count < Identity.seedByteCount { withUnsafeBytes(of: relayG.next().littleEndian) { bytes += $0 } }
        relay = SimRelay(identity: try share.identity(seed: Array(bytes.prefix(Identity.seedByteCount))))
        count("relay.placed")
        log("relay placed \(relay!.identity.publicKey.fingerprint)")
    }

    /// `node`, the owner as its replica sees it, adds the relay (a grant, with epoch 0 when none
    /// exists, in one change). Returns the outcome.
    @discardableResult
    func addRelay(by node: SimNode) throws -> String {
        guard let relay else { return "refused: no relay placed (add a `relay` line)" }
        guard let replica = node.replica, !node.isFrozen else { return "refused: \(node.name) is down or switched away" }
        guard try replica.ownership()?.owner == node.member.publicKey.bytes else { return "refused: \(node.name) is not the owner" }
        let before = try ownSequence(node)
        do {
            try replica.addRelay(relay.identity.publicKey.bytes, addresses: ["relay.sim:7420"], owner: node.member, using: &relayG)
        } catch let error as LedgerError {
            return "refused: \(error)"
        }
        try recordLocalChanges(node, after: before)
        relay.owner = node.member.publicKey
        count("relay.added")
        log("\(node.name) adds the relay \(relay.identity.publicKey.fingerprint)")
        return "relay added (grant and epoch 0 in one change)"
    }

    /// Whether the relay is granted on `replica` and not removed.
    func relayGranted(_ replica: Replica, _ relay: SimRelay) throws -> Bool {
        try replica.relays().contains { $0.key == relay.identity.publicKey.bytes }
    }

    /// At `node`'s gossip tick: publishes its relay key when missing, and opens a session with
    /// the relay when none is open (beside its direct sessions).
    func relayTick(_ node: SimNode) throws {
        guard let relay, let replica = node.replica, !node.isFrozen, try !node.listsItselfRevoked(),
              try relayGranted(replica, relay) else { return }
        let before = try ownSequence(node)
        // Not the hostile member: its writes may count nowhere (a flooding member), and
        // `publishRelayKeys` writes again at every tick while its key does not count.
        if node.index != hostile?.node, try replica.publishRelayKeys(identity: node.member) > 0 {
            try recordLocalChanges(node, after: before)
            log("\(node.name) publishes its relay key")
        }
        guard !relay.links.values.contains(where: { $0.node == node.index }) else { return }
        guard relay.isUp else {
            log("\(node.name) → relay unreachable (down)")
            return
        }
        try openRelaySession(node, replica, relay)
    }

    func openRelaySession(_ node: SimNode, _ replica: Replica, _ relay: SimRelay) throws {
        guard let pinned = relay.owner else { return }
        let relayKey = relay.identity.publicKey.bytes
        guard let granted = try replica.relays().first(where: { $0.key == relayKey }),
              let streamKey = try? RelayStreamKey(bytes: granted.streamKey) else { return }
        var keyring = try replica.relayKeyring(identity: node.member)
        for key in relay.mailboxKeys[node.index] ?? [] where keyring[key.epoch] == nil { keyring.insert(key) }
        guard let sealEpoch = keyring.newestEpoch else {
            log("\(node.name) holds no relay epoch key yet")
            return
        }
        var peer = try RelayMemberIdentity.derive(from: node.member, relay: relayKey)
        var list: SignedRelayAccessList?
        var posts: [RelayMailboxPost] = []
        var asOwner = false
        if node.member.publicKey == pinned {
            let published = try replica.relayMemberKeys(relay: relayKey)
            let keys = published.map(\.key)
            if keys != relay.listKeys, !keys.isEmpty {
                relay.listNumber += 1
                relay.listKeys = keys
                var quotas: [RelayMemberKey: UInt64] = [:]
                for key in keys { if let k = RelayMemberKey(bytes: key) { quotas[k] = Self.relayQuota } }
                relay.signedList = SignedRelayAccessList.sign(try RelayAccessList(number: relay.listNumber, quotas: quotas),
                                                              relay: relay.identity.publicKey, owner: node.member)
                log("\(node.name) signs relay access list \(relay.listNumber) of \(keys.count) keys")
            }
            list = relay.signedList
            if let number = list?.number, (relay.numberSeen ?? 0) < number {
                peer = node.member
                asOwner = true
            }
            if let current = try replica.currentRelayEpoch() {
                for p in published {
                    guard let member = PublicKey(bytes: p.member), let box = current.record.box(for: member),
                          let recipient = RelayMemberKey(bytes: p.key) else { continue }
                    posts.append(RelayMailboxPost(recipient: recipient, epoch: current.record.epoch, box: box))
                }
            }
        }
        let setup = RelayMemberSetup(relay: relay.identity.publicKey, streamKey: streamKey, keyring: keyring, sealEpoch: sealEpoch,
                                     accessList: list, posts: asOwner ? [] : posts)
        let id = relay.nextLink
        relay.nextLink += 1
        let server = RelayServerSession(store: relay.store, relay: relay.identity.publicKey, owner: pinned, peer: peer.publicKey)
        let member = RelayMemberSession(replica: replica, setup: setup)
        let link = RelayLink(id: id, node: node.index, incarnation: node.incarnation, server: server, member: member, asOwner: asOwner)
        relay.links[id] = link
        count("relay.session")
        log("rl\(id) \(node.name) → relay open\(asOwner ? " (owner key: installs list \(relay.listNumber))" : "")")
        try relayPerform(member.start(using: &relayG), link, fromRelay: false)
    }

    // MARK: Delivery

    /// Hands what one end of `link` does to the network or ends it.
    func relayPerform<S>(_ actions: [RelaySessionAction<S>], _ link: RelayLink, fromRelay: Bool) throws {
        guard let relay else { return }
        for action in actions {
            switch action {
            case .send(let bytes):
                if fromRelay {
                    relaySend(try hostileRelayFrames(bytes, link, relay), link, toRelay: false)
                } else if relay.mode == .drop {
                    try dropUploads(bytes, link)
                } else {
                    relaySend(bytes, link, toRelay: true)
                }
            case .finished(let summary):
                try relayEnded(link, fromRelay: fromRelay, summary: summary, failure: nil)
            case .failed(let error):
                try relayEnded(link, fromRelay: fromRelay, summary: nil, failure: error)
            }
        }
    }

    func relayEnded(_ link: RelayLink, fromRelay: Bool, summary: Any?, failure: RelaySessionError?) throws {
        guard let relay else { return }
        if fromRelay {
            link.server = nil
            if let failure { log("rl\(link.id) relay failed: \(failure)") }
            // The member sees the close after what the relay sent last (its `error` first).
            if link.member != nil, failure != nil {
                queue.schedule(at: max(time.millis, link.lastDelivery[1]) + 1, .relayClosed(link: link.id, toRelay: false))
            }
        } else {
            let s = (summary as? RelayMemberSummary) ?? link.member?.summary ?? RelayMemberSummary()
            link.member = nil
            if link.asOwner || relay.owner == nodes[link.node].member.publicKey {
                relay.numberSeen = s.installedAccessList ?? s.relayAccessList
            }
            if s.envelopesRefused > 0 { count("relay.envelopeRefused") }
            log("rl\(link.id) r\(link.node) " + (failure.map { "failed: \($0)" } ?? "finished")
                + ": uploaded \(s.envelopesUploaded) received \(s.envelopesReceived) applied \(s.changesApplied)"
                + " deferred \(s.changesDeferred) refused \(s.envelopesRefused)/\(s.requestsRefused)"
                + (s.installedAccessList.map { " installed \($0)" } ?? ""))
            try keepMailbox(s.mailbox, node: nodes[link.node], relay: relay)
            if link.server != nil, failure != nil { queue.schedule(at: time.millis + 1, .relayClosed(link: link.id, toRelay: true)) }
        }
        if link.server == nil && link.member == nil { relay.links[link.id] = nil }
    }

    /// The member daemon opens its mailbox's boxes and keeps the keys (checked against the owner's signature).
    func keepMailbox(_ boxes: [RelayMailboxBox], node: SimNode, relay: SimRelay) throws {
        guard !boxes.isEmpty, let replica = node.replica, let ownership = try replica.ownership(),
              let owner = PublicKey(bytes: ownership.owner) else { return }
        var kept = relay.mailboxKeys[node.index] ?? []
        for box in boxes where !kept.contains(where: { $0.epoch == box.epoch }) {
            guard let key = try? EpochRecord.openBox(box.box, epoch: box.epoch, as: node.member, owner: owner, household: household) else { continue }
            kept.append(key)
            count("relay.mailboxKey")
        }
        relay.mailboxKeys[node.index] = kept
    }

    /// Sends bytes one way over the link: the network's delay (and the delay mode's), in order;
    /// during the fault phase a loss ends the session (a reset connection).
    func relaySend(_ bytes: [UInt8], _ link: RelayLink, toRelay: Bool) {
        guard !bytes.isEmpty, let relay else { return }
        if faultsOn && parameters.lossPerMille > 0 && Int.random(in: 0..<1000, using: &relayG) < parameters.lossPerMille {
            count("relay.loss")
            dropRelayLink(link, reason: "lost \(bytes.count) bytes")
            return
        }
        let side = toRelay ? 0 : 1
        var at = time.millis + Int64.random(in: delayMillisMin...max(delayMillisMin, parameters.delayMillisMax), using: &relayG)
        if !toRelay && relay.mode == .delay { at += Int64.random(in: Self.relayHostileDelayMillis, using: &relayG) }
        at = max(at, link.lastDelivery[side])
        link.lastDelivery[side] = at
        queue.schedule(at: at, .relayDeliver(link: link.id, toRelay: toRelay, bytes: bytes))
    }

    func relayDeliver(_ bytes: [UInt8], link id: Int, toRelay: Bool) throws {
        guard let relay, let link = relay.links[id] else { return }
        if toRelay {
            guard let server = link.server else { return }
            guard relay.isUp else { return }
            try relayPerform(server.receive(bytes, atMilliseconds: time.millis), link, fromRelay: true)
        } else {
            guard let member = link.member else { return }
            let node = nodes[link.node]
            guard node.isUp, node.incarnation == link.incarnation, !node.isFrozen else {
                dropRelayLink(link, reason: "\(node.name) is gone")
                return
            }
            try relayPerform(member.receive(bytes, using: &relayG), link, fromRelay: false)
            try checkpoint([link.node])
        }
    }

    func relayClosed(link id: Int, toRelay: Bool) throws {
        guard let relay, let link = relay.links[id] else { return }
        if toRelay, let server = link.server {
            link.server = nil
            _ = server.connectionClosed()
        } else if !toRelay, let member = link.member {
            try relayEnded(link, fromRelay: false, summary: member.summary, failure: .connectionClosed)
            _ = member.connectionClosed()
        }
        if link.server == nil && link.member == nil { relay.links[id] = nil }
    }

    /// Ends a link abruptly: both ends see it close.
    func dropRelayLink(_ link: RelayLink, reason: String) {
        log("rl\(link.id) dropped: \(reason)")
        if link.server != nil { queue.schedule(at: time.millis + 1, .relayClosed(link: link.id, toRelay: true)) }
        if link.member != nil { queue.schedule(at: time.millis + 1, .relayClosed(link: link.id, toRelay: false)) }
    }

    // MARK: Hostile modes

    /// The relay's frames as its mode rewrites them (replay, reorder and withhold change pages).
    func hostileRelayFrames(_ bytes: [UInt8], _ link: RelayLink, _ relay: SimRelay) throws -> [UInt8] {
        switch relay.mode {
        case .replay, .reorder, .withhold: break
        default: return bytes
        }
        var decoder = FrameDecoder()
        decoder.push(bytes)
        var out: [UInt8] = []
        while let frame = try decoder.next() {
            guard frame.type == 10, case .pendingPage(var envelopes, var next) = try RelayMessage.decode(type: frame.type, payload: frame.payload) else {
                out += try frameBytes(frame)
                continue
            }
            let fresh = envelopes
            switch relay.mode {
            case .replay where !relay.served.isEmpty:
                envelopes += relay.served.prefix(max(0, 256 - envelopes.count))
                count("relay.replayed")
            case .reorder where envelopes.count > 1:
                envelopes.shuffle(using: &relayG)
                count("relay.reordered")
            case .withhold(let r) where r == link.node:
                if !envelopes.isEmpty { count("relay.withheld") }
                envelopes = []
                next = nil
            default:
                break
            }
            relay.served = Array((relay.served + fresh).suffix(SimRelay.servedKept))
            out += RelayMessage.pendingPage(envelopes: envelopes, next: next).frame()
        }
        return out
    }

    /// `frame` as the sender framed it.
    func frameBytes(_ frame: (type: UInt8, payload: [UInt8])) throws -> [UInt8] {
        try RelayMessage.decode(type: frame.type, payload: frame.payload).frame()
    }

    /// The drop mode: the member's uploads are answered as stored and never reach the store.
    func dropUploads(_ bytes: [UInt8], _ link: RelayLink) throws {
        var decoder = FrameDecoder()
        decoder.push(bytes)
        var forward: [UInt8] = []
        var answers: [UInt8] = []
        while let frame = try decoder.next() {
            if frame.type == 5 {
                count("relay.dropped")
                answers += RelayMessage.uploaded(stored: true).frame()
            } else {
                forward += try frameBytes(frame)
            }
        }
        if !forward.isEmpty { relaySend(forward, link, toRelay: true) }
        if !answers.isEmpty { relaySend(answers, link, toRelay: false) }
    }

    /// Sets the relay's mode; back to honest heals it (the stale copy is forgotten).
    func setRelayMode(_ mode: RelayMode) {
        guard let relay else { return }
        if mode == .stale, relay.staleCopy == nil { relay.staleCopy = relay.memory.lazyCopy().materialize() }
        if mode != .stale { relay.staleCopy = nil }
        relay.mode = mode
        count(mode.countKey)
        log("relay \(mode)")
    }

    /// The relay crashes (its sessions end; its store survives), restarts, or is wiped.
    func crashRelay(wipe: Bool) {
        guard let relay else { return }
        for id in relay.links.keys.sorted() { dropRelayLink(relay.links[id]!, reason: "relay \(wipe ? "wiped" : "crashed")") }
        relay.isUp = false
        if wipe {
            relay.memory = MemoryStore()
            relay.staleCopy = nil
            relay.isUp = true
        }
        count(wipe ? "relay.wipe" : "relay.crash")
        log(wipe ? "relay wiped (its store is empty: the members refill it)" : "relay crash")
    }
}

// MARK: Drawn relays (`--relays`)

extension Simulator {
    /// A seeded run's relay: placed and added by the owner at the start, each pair of replicas
    /// isolated (meeting only through the relay) at even chance until the faults heal, and one to
    /// four relay faults at drawn times of the fault phase. Draws from ``relayG`` only.
    func setUpRelay() throws {
        try placeRelay()
        guard scenario == nil else { return }  // a scenario adds it and isolates with steps
        try addRelay(by: nodes[0])
        for a in nodes.indices {
            for b in nodes.indices where b > a && Int.random(in: 0..<2, using: &relayG) == 0 {
                isolatedPairs.insert(a * 64 + b)
            }
        }
        if !isolatedPairs.isEmpty {
            count("relay.isolated")
            log("isolated pairs (only through the relay): " + isolatedPairs.sorted().map { "r\($0 / 64)-r\($0 % 64)" }.joined(separator: " "))
        }
        for _ in 0..<Int.random(in: 1...4, using: &relayG) {
            queue.schedule(at: startMillis + Int64.random(in: 1..<max(2, parameters.faultPhaseMillis), using: &relayG), .relayFault)
        }
    }

    /// A drawn relay fault during the fault phase: a hostile mode, back to honest, a crash, a
    /// restart or a wipe.
    func relayFault() throws {
        guard faultsOn, let relay else { return }
        if !relay.isUp { restartRelay(); return }
        switch Int.random(in: 0..<10, using: &relayG) {
        case 0: setRelayMode(.drop)
        case 1: setRelayMode(.delay)
        case 2: setRelayMode(.replay)
        case 3: setRelayMode(.reorder)
        case 4: setRelayMode(.withhold(Int.random(in: 0..<nodes.count, using: &relayG)))
        case 5: setRelayMode(.stale)
        case 6: setRelayMode(.honest)
        case 7: if relay.isUp { crashRelay(wipe: false) }
        case 8: crashRelay(wipe: true)
        default: setRelayMode(.honest)
        }
        // A crashed relay comes back within seconds.
        if !relay.isUp { queue.schedule(at: time.millis + Int64.random(in: 500...3_000, using: &relayG), .relayFault) }
    }

    /// The relay comes back up on its store.
    func restartRelay() {
        guard let relay, !relay.isUp else { return }
        relay.isUp = true
        count("relay.restart")
        log("relay restart")
    }

    /// The faults heal: the relay is up and honest.
    func healRelay() {
        restartRelay()
        if relay?.mode != .honest { setRelayMode(.honest) }
    }
}

import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerProtocol
@testable import KidLedgerReplica
import KidLedgerSecurity
import Testing
import KidLedgerTestSupport

/// Issue 39, points 2 and 3, through the product's own parts: replicas on real LMDB, real Ed25519
/// keys (libsodium), `Replica.applyRemote` (what a session calls for every batch) and
/// `SyncSession`. Each test is an attack that worked before: on main the stranger's origins were
/// stored and passed on, the second version of a first change recomputed the whole state, a
/// member's origins grew the vector without bound, and a session could make a replica recompute
/// once per batch without end.
@Suite struct MembersOnlyTests {
    static let owner = try! Identity(seed: [UInt8](repeating: 0x51, count: 32))
    static let spouse = try! Identity(seed: [UInt8](repeating: 0x52, count: 32))

    /// An owned household's replica on LMDB, writing as `identity`.
    final class Laptop {
        let directory: TemporaryDirectory
        let environment: LMDBEnvironment
        let replica: Replica

        init(_ identity: Identity, seed: UInt64) throws {
            directory = TemporaryDirectory(prefix: "kidledger-members")
            environment = try LMDBEnvironment(directory: directory.path, tables: Tables.all, mapSizeBytes: 64 << 20, durable: false)
            replica = try Replica(store: environment, clock: FixedClock(millis: 1_800_000_000_000), random: SplitMix64(seed: seed),
                                  verifier: SodiumVerifier())
            replica.signer = identity.signer
        }

        deinit {
            environment.close()
            directory.remove()
        }
    }

    /// The owner's laptop with household "Home", child Ann and a grant of the spouse.
    static func ownerLaptop() throws -> (Laptop, RecordID) {
        let laptop = try Laptop(owner, seed: 1)
        let summary = try laptop.replica.createHousehold(name: "Home", owner: owner.publicKey.bytes, salt: [UInt8](repeating: 3, count: 16),
                                                         sign: { owner.sign($0) })
        try laptop.replica.addChild(name: "Ann")
        try laptop.replica.commitMembership([.grant(owner.grant(spouse.publicKey, name: "spouse", household: summary.id, atMillis: 1))])
        return (laptop, summary.id)
    }

    /// A change opening a fresh origin of `key` (its claim unless `claimed` is false, and a give
    /// of one cent to `child`), with the head `key` signs over it.
    static func opening(_ key: Identity, nonce: UInt64, household: RecordID, child: RecordID, claimed: Bool = true,
                        cents: Int64 = 1) -> (change: Change, head: SignedHead) {
        let claim = key.signer.claim(household: household, nonce: nonce)
        let id = Membership.entryID(RecordID(high: nonce, low: 7), madeBy: key.publicKey.bytes)
        let give = Operation.addTransaction(LedgerTransaction(id: id, childID: child, amountCents: cents, createdAtMillis: 1_800_000_000_000,
                                                              source: "give"))
        let change = Change(origin: claim.origin, sequence: 1, hlc: HLC(millis: 1_800_000_000_000),
                            operations: claimed ? [.claim(claim), give] : [give])
        let link = Replica.chainLink(after: Replica.zeroLink, onlyVersion: PlainPreparer().prepare(change, encoded: RecordCodec.encode(change)).version)
        return (change, key.signer.head(household: household, origin: change.origin, sequence: 1, chain: link))
    }

    static func ann(_ replica: Replica) throws -> RecordID { try #require(try replica.children().first?.id) }

    @Test("a stranger's claims and changes are neither stored nor passed on")
    func strangersTakeNoSpace() throws {
        let (laptop, household) = try Self.ownerLaptop()
        let ann = try Self.ann(laptop.replica)
        let before = try laptop.replica.versionVector()
        let digest = try laptop.replica.digest()
        // 200 throwaway keys, each claiming an origin and giving a cent, under heads they sign.
        let flood = try (0..<200).map { i in
            Self.opening(try Identity(seed: [UInt8](repeating: UInt8(i), count: 31) + [0xEE]), nonce: UInt64(i), household: household, child: ann)
        }
        let report = try laptop.replica.applyRemote(flood.map(\.change), heads: flood.map(\.head))
        #expect(report.applied == 0)
        #expect(report.notAdmitted == 200)
        #expect(try laptop.replica.versionVector() == before)
        #expect(try laptop.replica.digest() == digest)
        #expect(try laptop.replica.membershipCounts().rejected == 0)
        // Nothing of it goes on to another laptop.
        #expect(try laptop.replica.encodedChanges(notCoveredBy: before).isEmpty)
    }

    @Test("a member's change that arrives before its grant is refused, then taken once the grant is here")
    func grantNotHereYet() throws {
        let (laptop, household) = try Self.ownerLaptop()
        let ann = try Self.ann(laptop.replica)
        let grandma = try Identity(seed: [UInt8](repeating: 0x61, count: 32))
        let first = Self.opening(grandma, nonce: 5, household: household, child: ann, cents: 500)
        #expect(try laptop.replica.applyRemote([first.change], heads: [first.head]).notAdmitted == 1)
        #expect(try laptop.replica.versionVector()[first.change.origin] == nil)
        try laptop.replica.commitMembership([.grant(Self.owner.grant(grandma.publicKey, name: "grandma", household: household, atMillis: 2))])
        let again = try laptop.replica.applyRemote([first.change], heads: [first.head])
        #expect(again.applied == 1)
        #expect(!again.recomputed)
        #expect(try laptop.replica.balance(of: ann) == 500)
    }

    @Test("a first change sent without its claim, then with it, costs no recomputation")
    func claimlessFirstChangeCostsNoRecomputation() throws {
        let (laptop, household) = try Self.ownerLaptop()
        let ann = try Self.ann(laptop.replica)
        var bares: [(change: Change, head: SignedHead)] = [], claimed: [(change: Change, head: SignedHead)] = []
        for nonce in UInt64(100)..<UInt64(164) {
            let bare = Self.opening(Self.spouse, nonce: nonce, household: household, child: ann, claimed: false)
            // Alone, in its own batch: refused (no claim opens the origin), nothing stored.
            let alone = try laptop.replica.applyRemote([bare.change], heads: [bare.head])
            #expect(alone.notAdmitted == 1 && !alone.recomputed)
            bares.append(bare)
            claimed.append(Self.opening(Self.spouse, nonce: nonce, household: household, child: ann))
        }
        // Then the claimed versions of the 64 origins in one batch: each is taken, none recomputes.
        let report = try laptop.replica.applyRemote(claimed.map(\.change), heads: claimed.map(\.head))
        #expect(!report.recomputed)
        #expect(report.applied == 64)
        #expect(try laptop.replica.balance(of: ann) == 64)
        // The claimless versions again: now other versions of claimed origins, taken, no recomputation.
        for bare in bares {
            let again = try laptop.replica.applyRemote([bare.change], heads: [bare.head])
            #expect(again.forkedVersions == 1 && !again.recomputed)
        }
        #expect(try laptop.replica.verify().problems == [])
    }

    @Test("a member's origins past the limit are refused; replicas holding different ones agree")
    func memberOriginQuota() throws {
        let (a, household) = try Self.ownerLaptop()
        let b = try Laptop(Self.owner, seed: 2)
        let genesis = try a.replica.batch(notCoveredBy: [:])
        try b.replica.applyRemote(genesis.changes, heads: genesis.heads)
        let ann = try Self.ann(a.replica)
        let flood = (UInt64(0)..<UInt64(Limits.originsPerMemberStoredMax + 40)).map {
            Self.opening(Self.spouse, nonce: $0, household: household, child: ann)
        }
        // `a` receives the flood in one order, `b` in the other: each stores the first 257.
        let toA = try a.replica.applyRemote(flood.map(\.change), heads: flood.map(\.head))
        let toB = try b.replica.applyRemote(flood.reversed().map(\.change), heads: flood.reversed().map(\.head))
        for report in [toA, toB] {
            #expect(report.applied == Limits.originsPerMemberStoredMax)
            #expect(report.notAdmitted == 40)
        }
        let spouseOrigins = { (r: Replica) in try r.versionVector().keys.filter { key in flood.contains { $0.change.origin == key } } }
        #expect(try spouseOrigins(a.replica).count == Limits.originsPerMemberStoredMax)
        #expect(try Set(spouseOrigins(a.replica)) != Set(spouseOrigins(b.replica)))
        // Over the limit, none of the member's changes counts, and both judge alike.
        #expect(try a.replica.balance(of: ann) == 0)
        #expect(try a.replica.digest() == b.replica.digest())
        #expect(try a.replica.verify().problems == [])
        #expect(try b.replica.verify().problems == [])
    }

    @Test("one session makes a replica recompute its state a bounded number of times")
    func recomputationsPerSessionAreBounded() throws {
        let (a, household) = try Self.ownerLaptop()
        let b = try Laptop(Self.spouse, seed: 2)
        let start = try a.replica.batch(notCoveredBy: [:])
        try b.replica.applyRemote(start.changes, heads: start.heads)
        // Twelve members granted and revoked, one commit each: each revocation recomputes.
        let members = try (0..<12).map { try Identity(seed: [UInt8](repeating: UInt8(0x70 + $0), count: 32)) }
        for member in members {
            try a.replica.commitMembership([.grant(Self.owner.grant(member.publicKey, name: "m", household: household, atMillis: 3))])
        }
        for member in members {
            try a.replica.commitMembership([.revoke(Self.owner.revocation(of: member.publicKey.bytes, seen: [:], household: household,
                                                                          atMillis: 4))])
        }
        // One change a batch: the responder would recompute twelve times.
        let limits = SessionLimits(changesPerBatch: 1)
        let first = Self.exchange(SyncSession(role: .initiator, replica: a.replica, household: household, limits: limits),
                                  SyncSession(role: .responder, replica: b.replica, household: household, limits: limits))
        guard case .failed(let error)? = first.responder else { Issue.record("\(first)"); return }
        #expect("\(error)".contains("recompute its ledger \(Limits.recomputationsPerSessionMax) times"))
        #expect(try b.replica.members().filter(\.isRevoked).count == Limits.recomputationsPerSessionMax)
        // The next session brings the rest.
        let second = Self.exchange(SyncSession(role: .initiator, replica: a.replica, household: household, limits: limits),
                                   SyncSession(role: .responder, replica: b.replica, household: household, limits: limits))
        guard case .finished(let summary)? = second.responder else { Issue.record("\(second)"); return }
        #expect(summary.recomputations == 12 - Limits.recomputationsPerSessionMax)
        #expect(try a.replica.digest() == b.replica.digest())
    }

    /// Runs two sessions against each other in memory until both end (bounded).
    static func exchange(_ initiator: SyncSession, _ responder: SyncSession) -> (initiator: SessionAction?, responder: SessionAction?) {
        var ends: [SessionAction?] = [nil, nil]
        var inboxes: [[[UInt8]]] = [[], []]
        let sessions = [initiator, responder]
        func take(_ actions: [SessionAction], from side: Int) {
            for action in actions {
                switch action {
                case .send(let bytes): inboxes[1 - side].append(bytes)
                default: if ends[side] == nil { ends[side] = action }
                }
            }
        }
        take(initiator.start(), from: 0)
        take(responder.start(), from: 1)
        for _ in 0..<100_000 {
            guard let side = [0, 1].first(where: { !inboxes[$0].isEmpty }) else { break }
            let bytes = inboxes[side].removeFirst()
            take(sessions[side].receive(bytes), from: side)
            if ends[side] != nil && ends[1 - side] == nil && inboxes[1 - side].isEmpty {
                take(sessions[1 - side].connectionClosed(), from: 1 - side)
            }
        }
        return (ends[0], ends[1])
    }
}

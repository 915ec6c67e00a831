import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerTestSupport

/// Issue 20, points 5 and 8: who wrote an entry decides a same-id conflict, the conflict shows
/// both versions and both authors, and members' display names are theirs alone.
@Suite("Authorship: same-id conflicts and member names")
struct SameIDAuthorshipTests {
    let h = OwnedHousehold()
    /// A granted member whose key sorts after the spouse's (0xB2) and before nobody's.
    let hostileKey = [UInt8](repeating: 0xC3, count: 32)
    /// A granted member whose key sorts before the owner's (0xA1).
    let lowKey = [UInt8](repeating: 0x05, count: 32)
    // Each member's origin is derived from its key (issue 20, point 2).
    var owner: ReplicaID { h.origin(h.ownerKey) }
    var spouse: ReplicaID { h.origin(h.spouseKey) }
    var hostile: ReplicaID { h.origin(hostileKey) }
    var low: ReplicaID { h.origin(lowKey) }
    let ava = RecordID(high: 0xAA, low: 1)
    let reused = RecordID(high: 0x1234, low: 0x8000_0000_0000_0001)

    /// Genesis, Ava, grants for the spouse, the hostile member and the low-key member, and each
    /// member's claim (its origin's first change).
    func founding() -> [Change] {
        [h.change(owner, 1, millis: 1, [h.genesis(), h.claim(owner, key: h.ownerKey),
                                        .createChild(ChildRecord(id: ava, createdAtMillis: 1)),
                                        .setField(entity: ava, field: .childName, value: .text("Ava"))]),
         h.change(owner, 2, millis: 2, [h.grant(h.spouseKey, name: "Dad"), h.grant(hostileKey, name: "Eve"),
                                        h.grant(lowKey, name: "Lou")]),
         h.change(spouse, 1, millis: 3, [h.claim(spouse, key: h.spouseKey)]),
         h.change(hostile, 1, millis: 3, [h.claim(hostile, key: hostileKey)]),
         h.change(low, 1, millis: 3, [h.claim(low, key: lowKey)])]
    }

    func give(_ cents: Int64, note: String = "") -> LedgerTransaction {
        LedgerTransaction(id: reused, childID: ava, amountCents: cents, createdAtMillis: 5_000, note: note, source: "give")
    }

    /// Of two amounts, the version whose canonical payload is smaller: the one today's rule
    /// (smallest payload wins, whoever wrote it) keeps.
    func smallerPayload(_ a: LedgerTransaction, _ b: LedgerTransaction) -> LedgerTransaction {
        KeyBytes.compare(RecordCodec.encode(a), RecordCodec.encode(b)) < 0 ? a : b
    }

    /// Replicas that receive `log` in the given orders: each ends with the same state.
    func replicas(_ orders: [[Change]]) throws -> [Replica] {
        try orders.enumerated().map { i, order in
            let r = try h.replica(UInt64(i + 1))
            _ = try r.receive(order)
            return r
        }
    }

    @Test("attack: a member reusing another member's transaction id with another amount never replaces it, in either order")
    func memberCannotRewriteAnothersTransaction() throws {
        // The hostile member picks whichever amount today's payload rule would let win.
        let honest = give(500, note: "allowance")
        let forged = smallerPayload(give(50_000, note: "allowance"), give(1, note: "allowance"))
        #expect(KeyBytes.compare(RecordCodec.encode(forged), RecordCodec.encode(honest)) < 0)
        let byDad = h.change(spouse, 2, millis: 5_000, [.addTransaction(honest)])
        let byEve = h.change(hostile, 2, millis: 5_001, [.addTransaction(forged)])
        let all = try replicas([founding() + [byDad, byEve], founding() + [byEve, byDad]])
        for r in all {
            #expect(try r.balance(of: ava) == 500)
            #expect(try r.allTransactions() == [honest])
            let conflicts = try r.sameIDConflicts()
            #expect(conflicts.count == 1)
            #expect(conflicts.first?.kind == "transaction")
            #expect(conflicts.first?.winner.transaction == honest)
            #expect(conflicts.first?.winner.author.key == h.spouseKey)
            #expect(conflicts.first?.winner.author.name == "Dad")
            #expect(conflicts.first?.loser.transaction == forged)
            #expect(conflicts.first?.loser.author.key == hostileKey)
            #expect(conflicts.first?.loser.author.name == "Eve")
            let entry = try #require(try r.history().first)
            #expect(entry.author.key == h.spouseKey && entry.author.origin == spouse)
            #expect(entry.conflicting.map(\.transaction) == [forged])
            #expect(entry.conflicting.map(\.author.key) == [hostileKey])
            #expect(try r.counts().conflicts == 1)
            let report = try r.verify()
            #expect(report.isIntact, "\(report)")
        }
        #expect(try all[0].digest() == all[1].digest())
        #expect(try all[0].view() == all[1].view())
    }

    @Test("attack: the owner's entry stays even against a member whose key sorts before the owner's")
    func ownerEntryBeatsAnySmallerKey() throws {
        let honest = give(700)
        let forged = smallerPayload(give(70_000), give(2))
        let byOwner = h.change(owner, 3, millis: 5_000, [.addTransaction(honest)])
        let byLou = h.change(low, 2, millis: 5_001, [.addTransaction(forged)])
        let all = try replicas([founding() + [byOwner, byLou], founding() + [byLou, byOwner]])
        for r in all {
            #expect(try r.allTransactions() == [honest])
            #expect(try r.balance(of: ava) == 700)
            #expect(try r.sameIDConflicts().map(\.loser.author.key) == [lowKey])
        }
        #expect(try all[0].digest() == all[1].digest())
    }

    @Test("attack: an id that carries its maker's mark stays the maker's, even against a smaller key or the owner")
    func markedIDStaysItsMakers() throws {
        let marked = Membership.entryID(RecordID(high: 0x0190_0000_0000_7000, low: 0x8123_4567_89AB_CDEF), madeBy: h.spouseKey)
        #expect(Membership.isEntryID(marked, madeBy: h.spouseKey))
        #expect(!Membership.isEntryID(marked, madeBy: lowKey))
        func give(_ cents: Int64) -> LedgerTransaction {
            LedgerTransaction(id: marked, childID: ava, amountCents: cents, createdAtMillis: 5_000, source: "give")
        }
        let honest = give(400)
        for (rival, origin, sequence) in [(lowKey, low, UInt64(2)), (h.ownerKey, owner, UInt64(3))] {
            let forged = smallerPayload(give(40_000), give(3))
            let byDad = h.change(spouse, 2, millis: 5_000, [.addTransaction(honest)])
            let byRival = h.change(origin, sequence, millis: 5_001, [.addTransaction(forged)])
            let all = try replicas([founding() + [byDad, byRival], founding() + [byRival, byDad]])
            for r in all {
                #expect(try r.allTransactions() == [honest], "against \(rival[0])")
                #expect(try r.sameIDConflicts().map(\.loser.author.key) == [rival])
            }
            #expect(try all[0].digest() == all[1].digest())
        }
    }

    @Test("one author's two versions (a fork after a restore) still resolve by payload, in either order")
    func sameAuthorFallsBackToPayload() throws {
        let a = give(300), b = give(900)
        let first = h.change(spouse, 2, millis: 5_000, [.addTransaction(a)])
        // The spouse's second device (another origin claimed by the same key).
        let second = h.origin(h.spouseKey, nonce: 1)
        let other = [h.change(second, 1, millis: 5_001, [h.claim(second, key: h.spouseKey), .addTransaction(b)])]
        let all = try replicas([founding() + [first] + other, founding() + other + [first]])
        let winner = smallerPayload(a, b)
        for r in all { #expect(try r.allTransactions() == [winner]) }
        #expect(try all[0].digest() == all[1].digest())
    }

    @Test("attack: a member reusing another member's child id with another creation record never replaces it")
    func memberCannotRewriteAnothersChild() throws {
        let ben = RecordID(high: 0xBE, low: 2)
        let honest = ChildRecord(id: ben, createdAtMillis: 4_000)
        let forged = [ChildRecord(id: ben, createdAtMillis: 1), ChildRecord(id: ben, createdAtMillis: 90_000)]
            .min { KeyBytes.compare(RecordCodec.encodeRecord($0), RecordCodec.encodeRecord($1)) < 0 }!
        #expect(KeyBytes.compare(RecordCodec.encodeRecord(forged), RecordCodec.encodeRecord(honest)) < 0)
        let byDad = h.change(spouse, 2, millis: 4_000, [.createChild(honest), .setField(entity: ben, field: .childName, value: .text("Ben"))])
        let byEve = h.change(hostile, 2, millis: 4_001, [.createChild(forged)])
        let all = try replicas([founding() + [byDad, byEve], founding() + [byEve, byDad]])
        for r in all {
            #expect(try r.resolveChild("Ben").createdAtMillis == 4_000)
            let conflicts = try r.sameIDConflicts()
            #expect(conflicts.count == 1)
            #expect(conflicts.first?.kind == "child")
            #expect(conflicts.first?.winner.child == honest && conflicts.first?.winner.author.key == h.spouseKey)
            #expect(conflicts.first?.loser.child == forged && conflicts.first?.loser.author.key == hostileKey)
            #expect(try r.verify().isIntact)
        }
        #expect(try all[0].digest() == all[1].digest())
    }

    @Test("claims that arrive after the conflicting versions (before their household) give the same state", arguments: UInt64(0)..<8)
    func lateClaimsRebuildToTheSameState(seed: UInt64) throws {
        let honest = give(500)
        let forged = smallerPayload(give(50_000), give(1))
        let byDad = h.change(spouse, 2, millis: 5_000, [.addTransaction(honest)])
        let byEve = h.change(hostile, 2, millis: 5_001, [.addTransaction(forged)])
        let log = founding() + [byDad, byEve]
        let reference = try h.replica(100)
        _ = try reference.receive(log)
        // The members' changes first: their claims wait for the household, their transactions for Ava.
        var rng = SplitMix64(seed: seed)
        let r = try h.replica(seed + 1)
        _ = try r.receiveShuffledWithRetry(Array(log.dropFirst(2)), using: &rng)
        #expect(try r.household() == nil)
        _ = try r.receive(Array(log.prefix(2)))
        #expect(try r.allTransactions() == [honest])
        #expect(try r.digest() == reference.digest())
        #expect(try r.sameIDConflicts() == reference.sameIDConflicts())
        #expect(try r.history() == reference.history())
    }

    // MARK: Names

    func name(_ origin: ReplicaID, _ sequence: UInt64, millis: Int64, of key: [UInt8], _ text: String) -> Change {
        h.change(origin, sequence, millis: millis, [.setField(entity: Membership.memberEntity(key), field: .memberName, value: .text(text))])
    }

    @Test("a member's own name write names it; a later one renames it")
    func memberNamesItself() throws {
        let r = try h.replica(1)
        _ = try r.receive(founding() + [name(spouse, 2, millis: 10, of: h.spouseKey, "Papa")])
        #expect(try r.members().first { $0.key == h.spouseKey }?.name == "Papa")
        #expect(try r.members().first { $0.key == h.spouseKey }?.chosenName == "Papa")
        #expect(try r.members().first { $0.key == hostileKey }?.name == "Eve")   // the grant's name
        _ = try r.receive([name(spouse, 3, millis: 20, of: h.spouseKey, "Dad")])
        #expect(try r.memberName(of: h.spouseKey) == "Dad")
        #expect(try r.verify().isIntact)
    }

    @Test("attack: a write of another member's name is never taken, whatever arrives first", arguments: UInt64(0)..<8)
    func anotherMembersNameWriteIsRefused(seed: UInt64) throws {
        let own = name(spouse, 2, millis: 10, of: h.spouseKey, "Papa")
        let forged = [name(hostile, 2, millis: 99, of: h.spouseKey, "Thief"),
                      name(owner, 3, millis: 98, of: h.spouseKey, "Renamed by the owner")]
        var rng = SplitMix64(seed: seed)
        let r = try h.replica(seed)
        _ = try r.receiveShuffledWithRetry(founding() + [own] + forged, using: &rng)
        #expect(try r.memberName(of: h.spouseKey) == "Papa")
        #expect(try r.members().map(\.name).sorted() == ["Eve", "Lou", "Papa", "owner"])
        #expect(try r.fieldConflicts().isEmpty)
    }

    @Test("names are checked: empty, too long, control characters")
    func badNamesAreRefused() throws {
        for bad in ["", "   ", String(repeating: "x", count: Limits.memberNameBytesMax + 1), "a\u{7}b"] {
            #expect(!FieldValue.text(bad).fits(.memberName), "\(bad)")
        }
        #expect(FieldValue.text("Mom").fits(.memberName))
        let r = try h.replica(1)
        _ = try r.receive(founding())
        #expect(throws: LedgerError.self) { try r.setMemberName("a\nb", of: h.ownerKey) }
    }
}

import KidLedgerDomain
import Testing
@testable import KidLedgerReplica
import KidLedgerTestSupport

/// Issue 39, point 4: a name in a peer's record is checked by the rule a name typed here is
/// (`Validation.nameProblem`): a record breaking it does not decode on any replica, and a
/// change built in memory with one is refused by apply, so every replica refuses the same
/// records and ends with the same state whatever the order they arrive in.
@Suite("Names from peers follow the local name rule")
struct PeerNameRuleTests {
    let h = OwnedHousehold()
    var owner: ReplicaID { h.origin(h.ownerKey) }
    var spouse: ReplicaID { h.origin(h.spouseKey) }
    let ava = OwnedHousehold.ava

    /// Names the rule refuses: a new line with a fake line after it, an escape sequence, a
    /// carriage return, DEL, a C1 control, a tab, white space at either end, nothing.
    static let refused = ["Ava\nstatus: synced", "Ava\u{1B}[31m", "Ava\rBen", "Ava\u{7F}", "Ava\u{85}", "A\tB",
                          " Ava", "Ava ", "Ava\u{A0}", ""]
    /// Names it keeps: accents, emoji with joiners, right-to-left text and its formatting marks
    /// (shown escaped on a terminal, not refused: a Hebrew or Arabic name may need them).
    static let kept = ["Zoë", "👩‍👧 Mia", "נועה", "Ava\u{202E}avA", "Ava\u{200F}"]

    /// The change of the spouse's origin (its second) that writes `name` as Ava's name.
    func rename(_ name: String, sequence: UInt64 = 2, millis: Int64 = 10) -> Change {
        h.change(spouse, sequence, millis: millis, [.setField(entity: ava, field: .childName, value: .text(name))])
    }

    @Test func theRuleIsTheSameForATypedNameAndAPeersRecord() throws {
        for name in Self.refused + Self.kept {
            let problem = Validation.nameProblem(name, what: "child name", bytesMax: Limits.nameBytesMax)
            // A peer's record: its bytes decode exactly when the rule finds nothing.
            let decodes = (try? RecordCodec.decodeChange(RecordCodec.encode(rename(name)))) != nil
            #expect(decodes == (problem == nil), "\(name.debugDescription): \(problem ?? "no problem")")
            for field in [Field.childName, .householdName] {
                #expect(FieldValue.text(name).fits(field) == (problem == nil), "\(field) \(name.debugDescription)")
            }
            // A member's name and a grant's name: the same rule.
            #expect(FieldValue.text(name).fits(.memberName) == (problem == nil), "memberName \(name.debugDescription)")
            let grant = RecordCodec.encode(h.change(owner, 2, millis: 2, [h.grant(h.spouseKey, name: name)]))
            #expect(((try? RecordCodec.decodeChange(grant)) != nil) == (problem == nil), "grant \(name.debugDescription)")
            // Typed here (`child add`, `child rename`, `init`, an import's new child): trimmed
            // first (so " Ava" is "Ava"), then the same rule.
            let typed = Result { try Replica.validName(name, what: "child name") }
            let typedProblem = Validation.nameProblem(Text.trimmed(name), what: "child name", bytesMax: Limits.nameBytesMax)
            switch typed {
            case .success(let stored): #expect(typedProblem == nil && stored == Text.trimmed(name))
            case .failure(let error): #expect(error as? LedgerError == .badName(typedProblem ?? "?"), "\(name.debugDescription)")
            }
        }
    }

    /// Two replicas offered the same hostile rename in different orders and batches refuse it
    /// alike (it changes nothing, and the changes around it still arrive) and end with equal
    /// digests, equal to a replica that never saw it.
    @Test func replicasRefuseABadNameAlikeAndConverge() throws {
        let hostile = rename("Ava\nstatus: synced\u{1B}[2J")
        let later = h.change(owner, 3, millis: 20, [h.give(7, 300)])
        let a = try h.replica(1), b = try h.replica(2), clean = try h.replica(3)
        for r in [a, b, clean] { try r.applySigned(h.founding()) }

        // A: the hostile change in a batch with a good one: the batch is refused whole, and
        // the good change arrives again without it (a session would fail to decode the batch).
        #expect(throws: LedgerError.invalid("value for name")) { try a.applySigned([later, hostile]) }
        #expect(try a.digest() == (try clean.digest()), "a refused batch changes nothing")
        try a.applySigned([later])
        // B: the good change first, then the hostile one alone.
        try b.applySigned([later])
        #expect(throws: LedgerError.invalid("value for name")) { try b.applySigned([hostile]) }
        try clean.applySigned([later])

        #expect(try a.digest() == (try b.digest()))
        #expect(try a.digest() == (try clean.digest()))
        for r in [a, b] {
            #expect(try r.children().map(\.name) == ["Ava"])
            #expect(try r.verify().isIntact)
        }
        // What a session receiver sees: the bytes do not decode, on every replica alike.
        #expect(throws: DecodeError.self) { try RecordCodec.decodeChange(RecordCodec.encode(hostile)) }
        // A kept name (a right-to-left override) from the same member applies on both.
        let bidi = rename("Ava\u{202E}avA", sequence: 2, millis: 30)
        try a.applySigned([bidi])
        try b.applySigned([bidi])
        #expect(try a.digest() == (try b.digest()))
        #expect(try a.children().map(\.name) == ["Ava\u{202E}avA"])
    }
}

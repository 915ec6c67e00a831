import KidLedgerDomain
import Testing
@testable import KidLedgerReplica

/// `childWithoutTotals(at:)` answers what indexing `childrenWithoutTotals()` answers.
@Suite("Child at a list position")
struct ChildAtPositionTests {
    @Test("every position, and past the end, as the list says, through renames and archives")
    func positionsMatchTheList() throws {
        let r = try householdWithChildren(["Cleo", "Ava", "Ben"], seed: 3)
        func expectSame() throws {
            let list = try r.childrenWithoutTotals()
            for position in 0...list.count + 1 {
                let (child, count) = try r.childWithoutTotals(at: position)
                #expect(count == list.count)
                #expect(child == (list.indices.contains(position) ? list[position] : nil))
            }
        }
        try expectSame()
        try r.renameChild("Ava", to: "Zed")
        try expectSame()
        try r.setArchived("Ben", true)
        try r.addChild(name: "Abe")
        try expectSame()
        #expect(try r.childWithoutTotals(at: 0).child?.name == r.childrenWithoutTotals().first?.name)
    }
}

import Testing
@testable import KidLedgerLMDB
import KidLedgerReplica

@Suite("TableHandles")
struct TableHandlesTests {
    @Test func findsEveryTableAddedAndNoOther() {
        var handles = TableHandles()
        #expect(handles[tableA] == nil)
        // More tables than the initial index holds at half load, so it grows and re-indexes.
        let tables = (0..<100).map { Table("table\($0)") } + Tables.all
        for (i, table) in tables.enumerated() {
            handles.add(table, UInt32(i + 2))
            #expect(handles[table] == UInt32(i + 2))
        }
        for (i, table) in tables.enumerated() { #expect(handles[table] == UInt32(i + 2)) }
        #expect(handles[Table("table100")] == nil)
        #expect(handles[tableA] == nil)
        #expect(handles.maxHandle == UInt32(tables.count + 1))
        #expect(handles.tables == tables)
    }

    @Test func addingATableAgainReplacesItsHandle() {
        var handles = TableHandles()
        handles.add(tableA, 3)
        handles.add(tableB, 4)
        handles.add(tableA, 7)
        #expect(handles[tableA] == 7)
        #expect(handles[tableB] == 4)
        #expect(handles.handles == [7, 4])
    }

    @Test func tablesWithTheSameNameHashSlotAreTold() {
        // Names whose hashes share the low bits land in neighbouring slots: each still finds its own.
        var handles = TableHandles()
        let all = (0..<2000).map { Table("t\($0)") }
        let first = all[0]
        let clashing = all.filter { $0.nameHash & 63 == first.nameHash & 63 }.prefix(5)
        #expect(clashing.count == 5)
        for (i, table) in clashing.enumerated() { handles.add(table, UInt32(10 + i)) }
        for (i, table) in clashing.enumerated() { #expect(handles[table] == UInt32(10 + i)) }
        #expect(handles[all.first { $0.nameHash & 63 == first.nameHash & 63 && !clashing.contains($0) }!] == nil)
    }
}

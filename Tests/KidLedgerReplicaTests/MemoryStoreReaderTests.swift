@testable import KidLedgerReplica
import KidLedgerDomain
import Testing
import KidLedgerInMemory

/// `MemoryStore` keeps one read transaction for all its reads: every read must still see the
/// committed state (tables added by a commit, values written in place, nothing of an undone
/// transaction), and the kept transaction must not keep the store alive.
@Suite("MemoryStore's kept reader")
struct MemoryStoreReaderTests {
    struct Boom: Error {}
    let a = Table("a"), b = Table("b")

    func value(_ store: MemoryStore, _ table: Table, _ key: [UInt8]) throws -> [UInt8]? {
        try store.read { try $0.get(table, key) }
    }

    func count(_ store: MemoryStore, _ table: Table) throws -> Int {
        try store.read { try $0.count(table) }
    }

    @Test("reads see every commit: new tables, overwrites, deletes")
    func readsFollowCommits() throws {
        let store = MemoryStore()
        #expect(try count(store, a) == 0)  // the reader is made before any table exists
        try store.write { try $0.put(a, [1], [10]) }
        #expect(try value(store, a, [1]) == [10])
        try store.write { w in
            try w.put(a, [1], [11])
            try w.put(b, [2], [20])
        }
        #expect(try value(store, a, [1]) == [11])
        #expect(try value(store, b, [2]) == [20])
        try store.write { try $0.delete(a, [1]) }
        #expect(try value(store, a, [1]) == nil)
        #expect(try count(store, a) == 0 && count(store, b) == 1)
    }

    @Test("an undone transaction leaves nothing, a table it made included")
    func undoneWritesAreNotSeen() throws {
        let store = MemoryStore()
        try store.write { try $0.put(a, [1], [10]) }
        #expect(try value(store, a, [1]) == [10])
        #expect(throws: Boom.self) {
            try store.write { w in
                try w.put(a, [1], [99])
                try w.put(b, [2], [20])
                throw Boom()
            }
        }
        #expect(try value(store, a, [1]) == [10])
        #expect(try count(store, b) == 0)
        try store.write { try $0.put(b, [3], [30]) }
        #expect(try value(store, b, [3]) == [30] && count(store, b) == 1)
    }

    @Test("a read inside a write sees the committed tables, written in place")
    func readInsideAWrite() throws {
        let store = MemoryStore()
        try store.write { try $0.put(a, [1], [10]) }
        try store.write { w in
            try w.put(a, [1], [11])
            try w.put(b, [2], [20])
            #expect(try value(store, a, [1]) == [11])
            #expect(try count(store, b) == 0)  // made by this transaction: not committed yet
        }
        #expect(try value(store, b, [2]) == [20])
    }

    @Test("the kept reader does not keep its store alive")
    func noCycle() throws {
        weak var gone: MemoryStore?
        try {
            let store = MemoryStore()
            try store.write { try $0.put(a, [1], [10]) }
            #expect(try value(store, a, [1]) == [10])
            gone = store
        }()
        #expect(gone == nil)
    }
}

import KidLedgerDomain
import Testing

@Suite("Record id text forms")
struct RecordIDTextTests {
    @Test("canonical and hex forms, and the undo id derived from the canonical form's text")
    func forms() {
        var g = SplitMix64(seed: 11)
        let fixed = RecordID(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
        #expect(fixed.description == "01234567-89ab-cdef-fedc-ba9876543210")
        #expect(fixed.hex == "0123456789abcdeffedcba9876543210")
        for id in [fixed, .zero, RecordID(high: .max, low: .max)] + (0..<200).map({ _ in
            RecordID(high: g.next(), low: g.next())
        }) {
            #expect(id.hex == id.description.filter { $0 != "-" })
            #expect(RecordID(string: id.description) == id && RecordID(string: id.hex) == id)
            // The undo id is the version-5 id of the text "undo:<canonical form>".
            #expect(LedgerTransaction.undoID(for: id) == RecordID.v5(namespace: .namespaceKidLedger,
                                                                      name: Array(("undo:" + id.description).utf8)))
        }
        // Pinned (Python: uuid.uuid5(UUID("6b1d3c2e-5f2a-4c39-9a57-2f0f6c8e1d40"), "undo:01234567-…")),
        // so a change of the derivation shows up here and not only against old stores.
        #expect(LedgerTransaction.undoID(for: fixed).description == "4a8b6151-96d4-5443-9acd-1ae09dfeff95")
    }

    @Test("undo ids asked for again, and for ids alike in their low bits, are the derived ones")
    func undoIDsOfSimilarIDs() {
        func derived(_ id: RecordID) -> RecordID {
            RecordID.v5(namespace: .namespaceKidLedger, name: Array(("undo:" + id.description).utf8))
        }
        // Ids equal in their low ten bits of high ^ low (they shared a slot of the cache there
        // once was) must still each get their own.
        let ids = (0..<8).map { RecordID(high: UInt64($0) << 32, low: UInt64($0) << 32 | 0x2A5) }
            + [RecordID(high: 0x2A5, low: 0), RecordID(high: 0, low: 0x2A5), .zero, RecordID(high: 1, low: 1)]
        for _ in 0..<3 {
            for id in ids + ids.reversed() { #expect(LedgerTransaction.undoID(for: id) == derived(id)) }
        }
    }
}

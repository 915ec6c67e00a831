import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerRelay
import KidLedgerSecurity
import KidLedgerTestSupport
import Testing

/// The owner change after a recovery (docs/RELAY-DESIGN.md, "Running a relay"): a statement signed
/// by the household's recovery key re-pins the relay's owner; every other statement is refused
/// with nothing installed and nothing persisted.
@Suite("Relay owner changes signed by the recovery key")
struct RelayOwnerChangeTests {
    let relay = try! Identity(seed: [UInt8](repeating: 0x21, count: 32))
    let otherRelay = try! Identity(seed: [UInt8](repeating: 0x22, count: 32))
    let recovery = try! Identity(seed: [UInt8](repeating: 0x23, count: 32))
    let thiefRecovery = try! Identity(seed: [UInt8](repeating: 0x24, count: 32))
    let formerOwner = try! Identity(seed: [UInt8](repeating: 0x25, count: 32))
    let newOwner = try! Identity(seed: [UInt8](repeating: 0x26, count: 32))

    var pin: RelayPin { RelayPin(owner: formerOwner.publicKey, recovery: recovery.publicKey, term: 0) }

    func signed(_ number: UInt64, _ key: UInt8, by owner: Identity) throws -> SignedRelayAccessList {
        SignedRelayAccessList.sign(try list(number, [key: 1 << 20]), relay: relay.publicKey, owner: owner)
    }

    /// A relay whose former owner (the thief) installed a list naming only itself at the highest
    /// number.
    func withThiefsRelay(_ body: (RelayStore) throws -> Void) throws {
        try withRelayStore { store, _ in
            #expect(try store.install(try signed(1, 1, by: formerOwner).verified(relay: relay.publicKey, owner: formerOwner.publicKey)))
            #expect(try store.install(try signed(UInt64.max, 9, by: formerOwner).verified(relay: relay.publicKey, owner: formerOwner.publicKey)))
            try body(store)
        }
    }

    @Test func theRecoveryKeysStatementRepinsAndReplacesTheThiefsList() throws {
        try withThiefsRelay { store in
            let statement = RelayOwnerStatement.sign(relay: relay.publicKey, newOwner: newOwner.publicKey, term: 1, recovery: recovery)
            #expect(try RelayOwnerStatement.decode(statement.encoded) == statement)
            let payload = statement.encoded + (try signed(5, 2, by: newOwner)).encoded
            var saved: [RelayPin] = []
            let next = try RelayOwnerChange.apply(payload, relay: relay.publicKey, pin: pin, peer: newOwner.publicKey, store: store,
                                                  persist: { saved.append($0) })
            #expect(next == RelayPin(owner: newOwner.publicKey, recovery: recovery.publicKey, term: 1, statement: statement))
            #expect(RelayPin(text: next.text) == next, "the statement is kept, to hand members with their mailbox")
            #expect(saved == [next])
            #expect(try store.accessList()?.number == 5, "the new owner's list replaced the one numbered at the maximum")
            #expect(try store.accessList()?.quotas[member(2)] != nil)
            // Its answer lost, the laptop sends it again: answered, nothing changed.
            #expect(try RelayOwnerChange.apply(payload, relay: relay.publicKey, pin: next, peer: newOwner.publicKey, store: store,
                                               persist: { saved.append($0) }) == next)
            #expect(saved.count == 1)
            // Afterwards the former owner is just another key: its lists no longer verify.
            #expect(throws: RelaySessionError.self) { try signed(6, 9, by: formerOwner).verified(relay: relay.publicKey, owner: next.owner) }
        }
    }

    @Test func everyOtherStatementIsRefusedAndNothingPersisted() throws {
        let list = try signed(5, 2, by: newOwner)
        let atTerm3 = RelayPin(owner: formerOwner.publicKey, recovery: recovery.publicKey, term: 3)
        let forged = RelayOwnerStatement.sign(relay: relay.publicKey, newOwner: newOwner.publicKey, term: 4, recovery: thiefRecovery)
        let cases: [(String, [UInt8], RelayPin, PublicKey)] = [
            ("forged signature", forged.encoded + list.encoded, atTerm3, newOwner.publicKey),
            ("wrong relay", RelayOwnerStatement.sign(relay: otherRelay.publicKey, newOwner: newOwner.publicKey, term: 4, recovery: recovery).encoded
                + list.encoded, atTerm3, newOwner.publicKey),
            ("lower term", RelayOwnerStatement.sign(relay: relay.publicKey, newOwner: newOwner.publicKey, term: 2, recovery: recovery).encoded
                + list.encoded, atTerm3, newOwner.publicKey),
            ("equal term", RelayOwnerStatement.sign(relay: relay.publicKey, newOwner: newOwner.publicKey, term: 3, recovery: recovery).encoded
                + list.encoded, atTerm3, newOwner.publicKey),
            ("peer not the new owner", RelayOwnerStatement.sign(relay: relay.publicKey, newOwner: newOwner.publicKey, term: 4, recovery: recovery).encoded
                + list.encoded, atTerm3, formerOwner.publicKey),
            ("the list not the new owner's", RelayOwnerStatement.sign(relay: relay.publicKey, newOwner: newOwner.publicKey, term: 4, recovery: recovery).encoded
                + (try signed(5, 9, by: formerOwner)).encoded, atTerm3, newOwner.publicKey),
            ("no recovery key pinned", RelayOwnerStatement.sign(relay: relay.publicKey, newOwner: newOwner.publicKey, term: 4, recovery: recovery).encoded
                + list.encoded, RelayPin(owner: formerOwner.publicKey, recovery: nil), newOwner.publicKey),
            ("truncated", Array((forged.encoded + list.encoded).dropLast()), atTerm3, newOwner.publicKey),
            ("trailing", forged.encoded + list.encoded + [0], atTerm3, newOwner.publicKey),
        ]
        for (what, payload, pin, peer) in cases {
            try withThiefsRelay { store in
                var saved: [RelayPin] = []
                #expect(throws: RelaySessionError.self, "\(what)") {
                    try RelayOwnerChange.apply(payload, relay: relay.publicKey, pin: pin, peer: peer, store: store, persist: { saved.append($0) })
                }
                #expect(saved.isEmpty, "\(what): persisted")
                let held = try store.accessList()?.number
                #expect(held == UInt64.max, "\(what): the held list changed")
            }
        }
        for cut in 0..<(forged.encoded.count + list.encoded.count) {
            _ = try? RelayOwnerChange.decode(Array((forged.encoded + list.encoded).prefix(cut)))
        }
    }

    @Test func thePinFileRoundTripsAndReadsAnOlderOne() {
        let full = RelayPin(owner: newOwner.publicKey, recovery: recovery.publicKey, term: 7)
        #expect(RelayPin(text: full.text) == full)
        #expect(RelayPin(text: formerOwner.publicKey.hex + "\n") == RelayPin(owner: formerOwner.publicKey, recovery: nil, term: 0))
        #expect(RelayPin(text: "") == nil)
        #expect(RelayPin(text: formerOwner.publicKey.hex + "\nzz\n1\n") == nil)
        #expect(RelayPin(text: formerOwner.publicKey.hex + "\n" + recovery.publicKey.hex + "\n") == nil)
        // A statement that names another owner or term than the pin's is not this pin's.
        let other = RelayOwnerStatement.sign(relay: relay.publicKey, newOwner: newOwner.publicKey, term: 8, recovery: recovery)
        #expect(RelayPin(text: full.text + Hex.encode(other.encoded) + "\n") == nil)
    }
}

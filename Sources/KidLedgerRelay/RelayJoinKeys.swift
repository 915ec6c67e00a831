import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerSecurity

/// The epoch keys a joiner learns from the relay before it applies anything
/// (docs/RELAY-DESIGN.md, "Joining through the relay"). The owner's box gives it the newest
/// epoch's key only; the envelopes stored earlier are sealed under older epochs, whose keys the
/// epoch records chain back to (each record's `previous` is the key before, sealed under its
/// own). The records travel inside envelopes, so the joiner opens what it can, reads the records
/// in what it opened, and repeats until no key is new.
public enum RelayJoinKeys {
    /// Most rounds (each opens at least one new epoch's key, or ends).
    public static let roundsMax = 4_096

    /// `keyring` extended with every key the records inside `envelopes` chain back to. A record
    /// counts first when its outer signature is `owner`'s for `household`; an epoch no such record
    /// gives is taken from any record that opens under a held key (a record signed by a former
    /// owner, before a recovery). A wrong key costs the joiner only envelopes that do not open:
    /// what it applies is authenticated by its members' signed heads whatever key opened it.
    public static func discover(_ envelopes: [[UInt8]], keyring: EpochKeyring, owner: PublicKey, household: RecordID) -> EpochKeyring {
        var keys = keyring
        var records: [(record: EpochRecord, byOwner: Bool)] = []
        // Each header is read once and each envelope opened at most once: the first round opens
        // the epochs already held, each later round only the epochs the one before learned.
        var unopened: [UInt32: [(index: Int, stream: RelayStreamTag)]] = [:]
        for (i, envelope) in envelopes.enumerated() {
            guard let header = try? RelayEnvelope.header(of: envelope) else { continue }
            unopened[header.epoch, default: []].append((i, header.stream))
        }
        var ready = unopened.keys.filter { keys[$0] != nil }
        for _ in 0..<roundsMax {
            for epoch in ready {
                for (i, stream) in unopened.removeValue(forKey: epoch) ?? [] {
                    guard let payload = try? RelayEnvelope.open(envelopes[i], stream: stream, keys: keys).payload,
                          case .changes(let changes, _, _)? = try? Message.decode(type: 4, payload: payload) else { continue }
                    for change in changes {
                        for case .relayEpoch(let e) in change.operations {
                            guard let record = try? EpochRecord.decode(e.record) else { continue }
                            let signed = Identity.verify(signature: e.signature, message: Membership.relayEpochMessage(household: household, e), key: owner)
                            records.append((record, signed))
                        }
                    }
                }
            }
            ready = []
            for byOwner in [true, false] {
                for (record, signed) in records where signed == byOwner && record.epoch > 0 && keys[record.epoch - 1] == nil {
                    guard let key = keys[record.epoch], let earlier = try? record.previousKey(with: key) else { continue }
                    keys.insert(earlier)
                    ready.append(earlier.epoch)
                }
            }
            guard !ready.isEmpty else { break }
        }
        return keys
    }
}

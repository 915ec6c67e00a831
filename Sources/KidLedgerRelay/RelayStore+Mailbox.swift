import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity

extension RelayStore {
    /// Files `box` (one member's box of an epoch record, ``EpochRecord/boxBytes`` bytes, opaque
    /// to the relay) in `recipient`'s mailbox under `epoch`. Returns false, storing nothing, when
    /// the same box is held (a replay) or the mailbox is full of newer epochs; when full, the
    /// lowest epoch is dropped for a newer one (a newer key opens the older ones through the
    /// records). The first box of an epoch is kept: another one for it is refused. A guest key
    /// (a joiner's, ``RelayAccessList/guests``) posts only its join request, under the epoch
    /// ``RelayJoinRequest/slot(of:)`` of its own key (≥ 2^31), so it can't take a member's epoch slot
    /// or another guest's.
    /// - Throws: ``RelayStoreError/notOnAccessList`` (poster or recipient),
    ///   ``RelayStoreError/invalidArgument(_:)`` (box size, a guest's other epoch), ``RelayStoreError/mailboxSlotTaken(epoch:)``.
    ///
    /// Work: ≤ ``mailboxBoxesMax`` entries.
    public func post(box: [UInt8], epoch: UInt32, to recipient: RelayMemberKey, from poster: RelayMemberKey) throws -> Bool {
        guard box.count == EpochRecord.boxBytes else {
            throw RelayStoreError.invalidArgument("an epoch box is \(EpochRecord.boxBytes) bytes, got \(box.count)")
        }
        return try store.write { w in
            let list = try Self.listing(w, poster)
            _ = try Self.listing(w, recipient)
            if list.isGuest(poster), epoch != RelayJoinRequest.slot(of: poster.bytes) {
                throw RelayStoreError.invalidArgument("a guest key posts only its join request (epoch \(RelayJoinRequest.slot(of: poster.bytes))), not epoch \(epoch)")
            }
            let key = RelayValues.mailboxKey(recipient, epoch)
            if let held = try w.get(RelayTables.mailbox, key) {
                guard held == box else { throw RelayStoreError.mailboxSlotTaken(epoch: epoch) }
                return false
            }
            let boxes = try Self.mailbox(w, recipient)
            if boxes.count >= Self.mailboxBoxesMax {
                guard let lowest = boxes.first, lowest.epoch < epoch else { return false }
                try w.delete(RelayTables.mailbox, RelayValues.mailboxKey(recipient, lowest.epoch))
            }
            try w.put(RelayTables.mailbox, key, box)
            return true
        }
    }

    /// `member`'s mailbox, epochs ascending (≤ ``mailboxBoxesMax``).
    public func mailbox(of member: RelayMemberKey) throws -> [(epoch: UInt32, box: [UInt8])] {
        try store.read { try Self.mailbox($0, member) }
    }

    static func mailbox(_ r: any KeyValueReader, _ member: RelayMemberKey) throws -> [(epoch: UInt32, box: [UInt8])] {
        var boxes: [(epoch: UInt32, box: [UInt8])] = []
        try r.scan(RelayTables.mailbox, prefix: member.bytes) { key, value in
            guard key.count == RelayMemberKey.byteCount + 4, value.count == EpochRecord.boxBytes,
                  boxes.count < mailboxBoxesMax else {
                throw RelayTables.damaged(RelayTables.mailbox, "an entry of \(key.count)/\(value.count) bytes or too many boxes")
            }
            let epoch = key[RelayMemberKey.byteCount...].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            boxes.append((epoch, value))
            return true
        }
        return boxes
    }
}

import KidLedgerDomain

/// One entry of the conflict journal: a register write that lost to a concurrent one (say, two
/// parents renaming Ben at once while apart) and the value that won.
public struct FieldConflict: Equatable, Sendable {
    /// The child (or household) whose field it was.
    public var entity: RecordID
    /// Which field.
    public var field: Field
    /// The losing value.
    public var loserValue: FieldValue
    /// Who wrote it and when: the replica and its hybrid logical clock.
    public var loserStamp: Stamp
    /// The value that won.
    public var winnerValue: FieldValue
    /// Who wrote the winner and when.
    public var winnerStamp: Stamp
}

/// One write to a register as kept in its history.
struct RegisterWrite: Equatable {
    var stamp: Stamp
    var base: Stamp?
    var value: FieldValue

    /// Its key and value in the register history.
    func entry(entity: RecordID, field: Field) -> (key: [UInt8], value: [UInt8]) {
        var key = ByteWriter(capacity: 40)
        key.write(id: entity)
        key.write(field.rawValue)
        RecordCodec.encode(stamp, into: &key)
        var v = ByteWriter(capacity: 48)
        if let base {
            v.write(1)
            RecordCodec.encode(base, into: &v)
        } else {
            v.write(0)
        }
        RecordCodec.encode(value, into: &v)
        return (key.bytes, v.bytes)
    }

    static func decode(key: [UInt8], value: [UInt8]) throws -> (RecordID, Field, RegisterWrite) {
        do {
            var k = ByteReader(key)
            let entity = try k.readID()
            guard let field = Field(rawValue: try k.readByte()) else { throw DecodeError.invalid("field") }
            let stamp = try RecordCodec.decodeStamp(&k)
            var v = ByteReader(value)
            let base: Stamp? = try v.readBool() ? try RecordCodec.decodeStamp(&v) : nil
            let written = try RecordCodec.decodeValue(&v)
            return (entity, field, RegisterWrite(stamp: stamp, base: base, value: written))
        } catch {
            throw LedgerError.corrupted("register history: \(error)")
        }
    }
}

extension Replica {
    /// Everything ``fieldConflicts(entity:)`` reads: its answer is a function of these tables
    /// alone (`QueryTablesTests` checks).
    public static let conflictJournalTables: [Table] = [Tables.registerHistory, Tables.registers]

    /// The conflict journal: every register write that lost to a write it had not seen, with the
    /// winner, oldest first; optionally for one entity.
    ///
    /// Derived from the full history of each register, so it is the same on every replica that
    /// holds the same changes, whatever order they arrived in: a write is a lost conflict when it
    /// is neither the winner nor one of the writes the winner was built on (following each
    /// write's base).
    public func fieldConflicts(entity: RecordID? = nil) throws -> [FieldConflict] {
        try store.read { r in
            var histories: [[UInt8]: (RecordID, Field, [Stamp: RegisterWrite])] = [:]
            try r.scan(Tables.registerHistory, prefix: entity.map(Keys.id) ?? []) { key, value in
                let (e, f, write) = try RegisterWrite.decode(key: key, value: value)
                let register = Keys.register(e, f)
                histories[register, default: (e, f, [:])].2[write.stamp] = write
                return true
            }
            var result: [FieldConflict] = []
            // A member's name has one writer (`Replica+Names`): writes under others' origins are
            // not concurrent edits, and never shown.
            for (register, (e, f, writes)) in histories where f != .memberName {
                guard let raw = try r.get(Tables.registers, register) else { continue }
                let winner = try StoredRegister.decode(raw)
                var ancestry = Set<Stamp>()
                var cursor: Stamp? = winner.stamp
                while let stamp = cursor, ancestry.insert(stamp).inserted { cursor = writes[stamp]?.base }
                for write in writes.values where !ancestry.contains(write.stamp) {
                    result.append(FieldConflict(entity: e, field: f, loserValue: write.value, loserStamp: write.stamp,
                                                winnerValue: winner.value, winnerStamp: winner.stamp))
                }
            }
            return result.sorted { ($0.loserStamp, $0.entity, $0.field.rawValue) < ($1.loserStamp, $1.entity, $1.field.rawValue) }
        }
    }
}

import KidLedgerDomain

/// The household's time zone: a last-writer-wins register of the household (``Field/householdTimeZone``)
/// whose days are the allowance days on every laptop (docs/CRDT.md, "The household's time zone").
extension Replica {
    /// The household's zone as its register holds it: the name, and whether this replica's zone
    /// database knows it (when not, or when the register is unset, days are UTC days).
    public struct TimeZoneSetting: Equatable, Sendable {
        /// The register's value, or nil when it was never set (a household made before it).
        public var name: String?
        /// Whether ``Replica/zones`` knows ``name`` (false when `name` is nil).
        public var known: Bool
        /// The name days are computed in: ``name`` when known, else UTC.
        public var effective: String { known ? name ?? HouseholdTime.defaultZoneName : HouseholdTime.defaultZoneName }
    }

    /// The household's time zone setting (unset before `init` or `join`).
    public func householdTimeZone() throws -> TimeZoneSetting {
        try store.read { r in
            let name = try Self.zoneName(r)
            return TimeZoneSetting(name: name, known: name.map { zones.rules(for: $0) != nil } ?? false)
        }
    }

    /// The rules allowance days are computed with now (``zone(_:_:)``).
    public func householdZoneRules() throws -> any ZoneRules {
        try store.read { r in try Self.zone(r, zones) }
    }

    /// The register's value (nil: unset, or no household).
    static func zoneName(_ r: any KeyValueReader) throws -> String? {
        guard let pin = try pinnedHousehold(r),
              case .text(let name)? = try register(pin.id, .householdTimeZone, r) else { return nil }
        return name
    }

    /// The rules days are computed with: the household's zone when this replica knows it, else UTC.
    static func zone(_ r: any KeyValueReader, _ zones: any ZoneDatabase) throws -> any ZoneRules {
        try zoneName(r).flatMap(zones.rules(for:)) ?? FixedOffsetZone(millis: 0)
    }

    /// Refuses a name that is not a tz database name or that ``zones`` does not know.
    func checkZone(_ name: String) throws {
        guard HouseholdTime.isValidName(name), zones.rules(for: name) != nil else {
            throw LedgerError.badName("\"\(name)\" is not a time zone this laptop knows (a tz database name such as Europe/Paris or America/Los_Angeles)")
        }
    }

    /// Sets the household's time zone to `name` (a zone ``zones`` knows). Allowance periods are
    /// that zone's days from the next check on (a period in progress: docs/CRDT.md).
    @discardableResult
    public func setHouseholdTimeZone(_ name: String) throws -> TimeZoneSetting {
        try checkZone(name)
        try commitLocal { w, _ in
            let household = try Self.requireHousehold(w)
            if try Self.zoneName(w) == name { throw LedgerError.unchanged("the household's time zone is already \(name)") }
            return ([.setField(entity: household.id, field: .householdTimeZone, value: .text(name),
                               base: try Self.registerStamp(household.id, .householdTimeZone, w))], ())
        }
        return try householdTimeZone()
    }
}

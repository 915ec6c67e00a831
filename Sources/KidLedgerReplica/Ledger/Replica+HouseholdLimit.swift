import KidLedgerDomain

/// The household's limit for asking first: a last-writer-wins register of the household
/// (``Field/householdConfirmAbove``, in cents) that every laptop's page reads before a give or take
/// (docs/CRDT.md, "The household's limit for asking first"). It merges like the time zone.
extension Replica {
    /// The household's limit in cents: the register's winner, ``HouseholdLimit/defaultCents`` when
    /// it was never set (or there is no household), ``HouseholdLimit/neverCents`` for "never ask".
    public func householdConfirmAbove() throws -> Int64 {
        try store.read { r in try Self.confirmAbove(r) ?? HouseholdLimit.defaultCents }
    }

    /// The register's value (nil: unset, or no household).
    static func confirmAbove(_ r: any KeyValueReader) throws -> Int64? {
        guard let pin = try pinnedHousehold(r),
              case .integer(let cents)? = try register(pin.id, .householdConfirmAbove, r) else { return nil }
        return cents
    }

    /// Sets the household's limit to `cents` (0 or more; ``HouseholdLimit/neverCents``: never ask).
    /// Any member may, as with the time zone. Setting the value it has (the default included,
    /// when unset) changes nothing and is refused as ``LedgerError/unchanged(_:)``.
    @discardableResult
    public func setHouseholdConfirmAbove(_ cents: Int64) throws -> Int64 {
        guard cents >= 0 else { throw LedgerError.badAmount(.negative) }
        try commitLocal { w, _ in
            let household = try Self.requireHousehold(w)
            let current = try Self.confirmAbove(w)
            if (current ?? HouseholdLimit.defaultCents) == cents {
                throw LedgerError.unchanged("the household's limit is already " + Self.limitText(cents))
            }
            return ([.setField(entity: household.id, field: .householdConfirmAbove, value: .integer(cents),
                               base: try Self.registerStamp(household.id, .householdConfirmAbove, w))], ())
        }
        return try householdConfirmAbove()
    }

    /// The limit as a sentence part: "$1000.00", or "never ask".
    public static func limitText(_ cents: Int64) -> String {
        cents == HouseholdLimit.neverCents ? "never ask" : Money.format(cents: cents)
    }
}

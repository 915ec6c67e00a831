/// The household's limit for asking first (docs/CRDT.md, "The household's limit for asking
/// first"): a give or take above it asks before it goes through, on every laptop's page. A
/// register of the household (``Field/householdConfirmAbove``), in cents.
public enum HouseholdLimit {
    /// The limit of a household whose register was never set: $1,000.
    public static let defaultCents: Int64 = 100_000
    /// The register's value meaning "never ask".
    public static let neverCents: Int64 = 0

    /// Whether an amount of `cents` (its magnitude) asks first under `limit`.
    public static func asks(_ cents: Int64, limit: Int64) -> Bool {
        limit != neverCents && cents.magnitude > limit.magnitude
    }
}

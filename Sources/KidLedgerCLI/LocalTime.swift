import Foundation
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerDaemon

/// Times in text output: the household's zone (``Context/time``), else the local time zone (`$TZ`,
/// else the system's), or UTC with `--utc`.
/// JSON output keeps Unix milliseconds and is not affected.
struct LocalTime: Sendable {
    /// The zone times are shown in.
    let zone: TimeZone
    /// Whether it is UTC (shown as "UTC" whatever the zone's own abbreviation).
    let isUTC: Bool

    /// UTC.
    static let utc = LocalTime(zone: TimeZone(secondsFromGMT: 0) ?? .current, isUTC: true)

    /// The zone `environment`'s `TZ` names, as the C library reads it: unset is the system's zone
    /// (/etc/localtime), empty is UTC, a leading ':' is ignored, a zone name (`Europe/Paris`,
    /// `EST5EDT`, `UTC`) or an abbreviation Foundation knows is that zone, anything else is UTC.
    static func from(environment: [String: String]) -> LocalTime {
        guard var name = environment["TZ"] else { return LocalTime(zone: .current) }
        if name.hasPrefix(":") { name.removeFirst() }
        if name.isEmpty { return .utc }
        if let zone = TimeZone(identifier: name) ?? TimeZone(abbreviation: name) { return LocalTime(zone: zone) }
        return .utc
    }

    init(zone: TimeZone, isUTC: Bool? = nil) {
        self.zone = zone
        let utcNames: Set<String> = ["UTC", "GMT", "Etc/UTC", "Etc/GMT", "Etc/Universal", "Etc/Zulu", "Universal", "Zulu", "UCT", "Etc/UCT", "GMT0", "UTC0"]
        self.isUTC = isUTC ?? (utcNames.contains(zone.identifier) || (zone.identifier.hasPrefix("GMT") && zone.secondsFromGMT() == 0 && zone.nextDaylightSavingTimeTransition == nil))
    }

    /// The zone's offset from UTC at `millis`, in milliseconds.
    func offsetMillis(_ millis: Int64) -> Int64 {
        if isUTC { return 0 }
        let date = Date(timeIntervalSince1970: Double(millis / 1000))
        return Int64(zone.secondsFromGMT(for: date)) * 1000
    }

    /// "2026-11-18 06:06": the minute in this zone.
    func short(_ millis: Int64) -> String {
        let offset = offsetMillis(millis)
        let (shifted, overflow) = millis.addingReportingOverflow(offset)
        return Timestamp.short(millis: overflow ? millis : shifted)
    }

    /// The zone's name at `millis`: "UTC", "EST", "CET", or "+05:30" when it has no abbreviation.
    func label(_ millis: Int64) -> String {
        if isUTC { return "UTC" }
        let date = Date(timeIntervalSince1970: Double(millis / 1000))
        if let abbreviation = zone.abbreviation(for: date), !abbreviation.hasPrefix("GMT"), !abbreviation.isEmpty,
           abbreviation.first != "+", abbreviation.first != "-" {
            return abbreviation
        }
        let seconds = zone.secondsFromGMT(for: date)
        if seconds == 0 { return "UTC" }
        let sign = seconds < 0 ? "-" : "+"
        let minutes = abs(seconds) / 60
        let hh = minutes / 60, mm = minutes % 60
        return sign + (hh < 10 ? "0" : "") + "\(hh):" + (mm < 10 ? "0" : "") + "\(mm)"
    }

    /// "2026-11-18 06:06 EST".
    func stamped(_ millis: Int64) -> String { short(millis) + " " + label(millis) }

    /// The zone label for a column of times: the one label they all share, else the zone's name.
    func label(for times: [Int64]) -> String {
        let labels = Set(times.map(label))
        if labels.count == 1, let only = labels.first { return only }
        return isUTC ? "UTC" : zone.identifier
    }
}

extension Context {
    /// How text output shows times: UTC with `--utc`; else the household's zone (once a replica
    /// was opened, when the household has one this laptop knows); else the local zone (`TZ`,
    /// /etc/localtime): docs/UI.md, "Times".
    var time: LocalTime { LocalTime.household(householdZone.withLock { $0 }, utc: utc, environment: environment) }
}

extension LocalTime {
    /// The zone a household created on this laptop starts with: `TZ` as ``from(environment:)``
    /// reads it, else the system's (/etc/localtime); nil when that is no tz database name the
    /// database knows (then the household's days are UTC days until `household timezone` sets one).
    static func householdZoneName(environment: [String: String]) -> String? {
        let local = from(environment: environment)
        let name = local.isUTC ? HouseholdTime.defaultZoneName : local.zone.identifier
        return FoundationZones().rules(for: name) != nil ? name : nil
    }

    /// Times shown in the household's zone: UTC with `--utc`; else the household's zone (when set
    /// and known here); else the local zone (`TZ`, /etc/localtime).
    static func household(_ setting: Replica.TimeZoneSetting?, utc: Bool, environment: [String: String]) -> LocalTime {
        if utc { return .utc }
        if let name = setting?.name, setting?.known == true {
            if HouseholdTime.utcNames.contains(name) { return .utc }
            if let zone = TimeZone(identifier: name) { return LocalTime(zone: zone) }
        }
        return from(environment: environment)
    }
}

import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerReplica

/// Two laptops that share no sync protocol version (issue 43, point 2; docs/PROTOCOL.md,
/// "Versions"; docs/SYNC.md, "Updating"): which one runs the older kidledger, in plain words.
/// The newer side shows it on the peer (`peers`, `status`); the older side's `status` is
/// `attentionRequired` until a sync with that laptop works again.
public struct VersionGap: Equatable {
    /// The other laptop's kidledger version, when it said (or its protocol names a release).
    var peerProduct: String?
    var peerVersions: ClosedRange<UInt16>
    var mine: ClosedRange<UInt16>
    var myProduct: String

    /// Whether the other laptop runs the newer kidledger (this one must be updated).
    var peerIsNewer: Bool { peerVersions.lowerBound > mine.upperBound }

    /// The gap a failed session shows: this side found no common version (`versionMismatch`),
    /// or the peer did and said so (an `error` of code 3).
    init?(_ failure: ProtocolError?, mine: ClosedRange<UInt16>, product: String) {
        self.mine = mine
        myProduct = product
        switch failure {
        case .versionMismatch(let lo, let hi)?:
            peerVersions = lo...hi
            peerProduct = KnownReleases.name(speaking: lo...hi)
        case .peer(let code, let text)? where code == ProtocolError.versionMismatch(peerMin: 0, peerMax: 0).code:
            guard let said = VersionRefusal.parse(text) else { return nil }
            (peerProduct, peerVersions) = said
        default:
            return nil
        }
        guard peerVersions.lowerBound > mine.upperBound || peerVersions.upperBound < mine.lowerBound else { return nil }
    }

    static func protocols(_ r: ClosedRange<UInt16>) -> String {
        r.lowerBound == r.upperBound ? "\(r.lowerBound)" : "\(r.lowerBound) to \(r.upperBound)"
    }

    /// "Dad's laptop runs kidledger 0.1: update it to sync (...)", for `laptop` ("Dad's laptop").
    func message(laptop: String) -> String {
        let theirs = peerProduct.map { "kidledger \($0)" } ?? "a kidledger that speaks sync protocol \(Self.protocols(peerVersions))"
        let details = "\(laptop) speaks sync protocol \(Self.protocols(peerVersions)), this laptop's kidledger \(myProduct) speaks \(Self.protocols(mine))"
        if peerIsNewer {
            return "\(laptop) runs \(theirs), newer than this laptop's kidledger \(myProduct): update kidledger on this laptop to sync with it (\(details))"
        }
        return "\(laptop) runs \(theirs): update it to sync (\(details))"
    }

    /// The device setting the older side keeps while a newer laptop refuses it: the newer
    /// laptop's member key (hex), a tab, the message. Cleared by the next sync with that laptop
    /// that works.
    static let setting = "updateRequired"

    /// The message of ``setting``, when set.
    public static func pending(_ replica: Replica) throws -> String? {
        guard let value = try replica.device.setting(setting), let tab = value.firstIndex(of: "\t") else { return nil }
        return String(value[value.index(after: tab)...])
    }

    /// Records what a sync with the laptop of `peerKey` showed: a newer laptop's refusal sets
    /// ``setting``; a sync that worked with the laptop it names clears it.
    public static func record(_ gap: VersionGap?, message: String, peerKey: [UInt8]?, succeeded: Bool, in replica: Replica) {
        let key = peerKey.map(Hex.encode) ?? "?"
        if let gap, gap.peerIsNewer {
            try? replica.device.setSetting(setting, key + "\t" + message)
        } else if succeeded, let value = try? replica.device.setting(setting), value.hasPrefix(key + "\t") {
            try? replica.device.setSetting(setting, "")
        }
    }

    /// The device setting naming why the daemon last refused the session of the member `key`
    /// (its laptop dials in): shown on its line of `peers` and `status`; cleared by its next
    /// session that works.
    static func inboundSetting(_ key: [UInt8]) -> String { "versionGap." + Hex.encode(key) }

    /// Why the daemon last refused the member `key`'s session for its versions, when it did.
    public static func refusedInbound(_ key: [UInt8], in replica: Replica) throws -> String? {
        try replica.device.setting(inboundSetting(key)).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// "Dad's laptop" for the member of `key`, else "the laptop at ADDRESS".
    static func laptop(_ replica: Replica, key: [UInt8]?, address: String) -> String {
        if let key, let member = try? replica.members().first(where: { $0.key == key }) {
            return member.isOwner && member.chosenName == nil ? "the owner's laptop" : "\(TextEscaping.terminal(member.name))'s laptop"
        }
        return "the laptop at \(address)"
    }

    /// The device setting naming what sessions with the member `key`'s laptop held back because it
    /// speaks an older protocol: "COUNT<tab>VERSION" (its highest protocol version), or empty.
    /// Written by every session with it that completes (``recordWithheld(_:of:in:)``).
    static func withheldSetting(_ key: [UInt8]) -> String { "withheld." + Hex.encode(key) }

    /// Records what a completed session with the member `key` held back (``SessionSummary/changesWithheld``),
    /// or that it held back nothing; written only when it changed.
    static func recordWithheld(_ summary: SessionSummary, of key: [UInt8]?, in replica: Replica) {
        guard let key else { return }
        let value = summary.changesWithheld > 0 ? "\(summary.changesWithheld)\t\(summary.protocolVersion ?? 0)" : ""
        guard ((try? replica.device.setting(withheldSetting(key))) ?? nil ?? "") != value else { return }
        try? replica.device.setSetting(withheldSetting(key), value)
    }

    /// What the last completed session with the member `key` held back: how many changes, and the
    /// highest protocol version its laptop speaks; nil when nothing.
    public static func withheld(_ key: [UInt8], in replica: Replica) throws -> (count: Int, peerVersion: UInt16)? {
        guard let value = try replica.device.setting(withheldSetting(key)) else { return nil }
        let parts = value.split(separator: "\t")
        guard parts.count == 2, let count = Int(parts[0]), count > 0, let version = UInt16(parts[1]) else { return nil }
        return (count, version)
    }

    /// "Dad's laptop runs kidledger 0.1.0: update it to get 3 changes it can't read yet (...)".
    public static func withheldMessage(laptop: String, count: Int, peerVersion: UInt16) -> String {
        let theirs = KnownReleases.name(highest: peerVersion).map { "kidledger \($0)" } ?? "a kidledger that speaks sync protocol \(peerVersion)"
        return "\(laptop) runs \(theirs): update it to get \(Wording.plural(count, "change")) it can't read yet "
            + "(it speaks sync protocol \(peerVersion), this laptop's kidledger \(KidLedgerVersion.current) speaks "
            + "\(protocols(protocolVersionMin...protocolVersionMax)); it gets everything else)"
    }
}

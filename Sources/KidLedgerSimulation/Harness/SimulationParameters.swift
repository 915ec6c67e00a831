import KidLedgerDomain
import KidLedgerInMemory

/// Everything a simulation run draws from its seed (swarm testing: each seed its own fault rates
/// and operation mix). Printed first, so a failing run can be read and reproduced.
public struct SimulationParameters: Equatable, Sendable, CustomStringConvertible {
    /// The seed everything else is drawn from.
    public var seed: UInt64
    /// How many replicas.
    public var replicaCount: Int
    /// Virtual milliseconds of the fault phase; after it everything heals and the run continues until quiet.
    public var faultPhaseMillis: Int64
    /// Mean virtual milliseconds between user operations on one replica.
    public var operationIntervalMillis: Int64
    /// Mean virtual milliseconds between a replica's gossip attempts.
    public var gossipIntervalMillis: Int64
    /// Largest one-way network delay.
    public var delayMillisMax: Int64
    /// Chance, in per mille, that a chunk of bytes is lost during the fault phase.
    public var lossPerMille: Int
    /// Chance, in per mille, that a chunk is delivered twice.
    public var duplicationPerMille: Int
    /// Chance, in per mille, that a chunk may overtake earlier ones.
    public var reorderPerMille: Int
    /// Chance, in per mille per gossip tick, of a partition change (split or heal).
    public var partitionPerMille: Int
    /// Chance, in per mille per operation tick, that a replica crashes.
    public var crashPerMille: Int
    /// Chance, in per mille, that a crashed replica comes back from a stale copy of its files.
    public var staleRestorePerMille: Int
    /// Largest wall-clock skew of a replica, either way: at most 20 minutes in drawn runs, so two
    /// clocks stay within `Limits.clockAheadMillisMax` (an hour) of each other and no change is
    /// held back for skew (scenarios and hostile members go past it on purpose).
    public var skewMillisMax: Int64
    /// Whether replicas talk only to their neighbours in a line (0–1–2–…), so forwarding is needed.
    public var lineTopology: Bool
    /// Operation weights: add, rename, archive/restore, give, take, give-all/take-all, undo,
    /// allowance set/stop, child merge (the last two each drawn from a generator of its own, so
    /// adding them changed no other parameter of a seed).
    public var operationWeights: [Int]
    /// Whether replicas keep their state in LMDB (temporary directories) instead of memory.
    public var usesLMDB: Bool
    /// Chance, in per mille, that each of the run's two revocation slots (random times in the fault
    /// phase) fires: the owner revokes a random other member.
    public var revocationPerMille: Int
    /// Chance, in per mille per operation tick, that a replica switches to another account (it
    /// freezes: no local changes, no sync) until it switches back (or the faults heal).
    public var accountChangePerMille: Int
    /// The hostile member's replica (never the owner's, 0), or nil for a run of honest members
    /// only (``HostileStrategy``; `--hostile`).
    public var hostileReplica: Int? = nil
    /// What the hostile member does (drawn from the seed: ``HostileStrategy/draw(seed:)``).
    public var hostileStrategies: [HostileStrategy] = []
    /// Whether the owner revokes the hostile member during the fault phase, while a member lags
    /// (``Simulator/revokeHostile()``): with ``HostileStrategy/writeAfterRevocation`` always, else
    /// in one seed in four, whatever the mix (then it learns its revocation from a refusal, and stops).
    public var hostileRevoked = false
    /// The household's time zone at creation (``SimZones``; nil: never set, a household from
    /// before the register, whose days are UTC's). Drawn from a generator of its own; nil in
    /// scenarios, which set one with a step.
    public var householdZone: String? = nil
    /// Chance, in per mille, that an allowance operation first changes the household's time zone
    /// to a drawn one (drawn like ``householdZone``).
    public var zoneChangePerMille = 0
    /// Whether the run has a relay (`--relays`): the owner adds it at the start, some pairs of
    /// replicas meet only through it during the fault phase, and it turns hostile at drawn times
    /// (all drawn from the simulator's relay generator; ``Simulator/relayFault()``).
    public var relays = false

    /// Gives the run a relay (`--relays`).
    public mutating func addRelay() { relays = true }

    /// Makes one member replica hostile, with the strategy mix drawn from the seed (`--hostile`).
    public mutating func makeHostile() {
        var g = SplitMix64(seed: seed ^ 0x4057_11E)
        hostileReplica = Int.random(in: 1...max(1, replicaCount - 1), using: &g)
        hostileStrategies = HostileStrategy.draw(seed: seed)
        hostileRevoked = Int.random(in: 0..<4, using: &g) == 0 || hostileStrategies.contains(.writeAfterRevocation)
    }

    /// Draws parameters from `seed`, with a replica count in `replicas`.
    public static func draw(seed: UInt64, replicas: ClosedRange<Int> = 2...5, lmdbPerMille: Int = 0) -> SimulationParameters {
        var g = SplitMix64(seed: seed ^ 0x5EED_0F_5EED)
        func pick(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &g) }
        func maybe(_ perMille: Int, _ value: Int) -> Int { pick(0...999) < perMille ? value : 0 }
        return SimulationParameters(
            seed: seed,
            replicaCount: pick(replicas),
            faultPhaseMillis: Int64(pick(2_000...20_000)),
            operationIntervalMillis: Int64(pick(20...400)),
            gossipIntervalMillis: Int64(pick(50...1_000)),
            delayMillisMax: Int64(pick(1...200)),
            lossPerMille: maybe(600, pick(1...80)),
            duplicationPerMille: maybe(500, pick(1...80)),
            reorderPerMille: maybe(500, pick(1...80)),
            partitionPerMille: maybe(600, pick(10...200)),
            crashPerMille: maybe(600, pick(1...30)),
            staleRestorePerMille: maybe(400, pick(100...600)),
            skewMillisMax: Int64(maybe(600, pick(1...1_200_000))),
            lineTopology: pick(0...3) == 0,
            operationWeights: (0..<7).map { _ in pick(0...10) } .enumerated().map { $0.offset == 0 ? $0.element + 3 : $0.element },
            usesLMDB: pick(0...999) < lmdbPerMille,
            revocationPerMille: maybe(500, pick(300...1000)),
            accountChangePerMille: maybe(500, pick(2...40)))
            .withAllowanceWeight(seed: seed)
            .withMergeWeight(seed: seed)
            .withHouseholdZone(seed: seed)
    }

    /// These parameters with the household's time zone and the zone-change chance drawn from the
    /// seed by a generator of their own (so adding them changed no other parameter of a seed).
    func withHouseholdZone(seed: UInt64) -> SimulationParameters {
        var g = SplitMix64(seed: seed ^ 0x7123_20E5)
        var copy = self
        let i = Int.random(in: 0...SimZones.names.count, using: &g)
        copy.householdZone = i == SimZones.names.count ? nil : SimZones.names[i]
        copy.zoneChangePerMille = Int.random(in: 0...1, using: &g) == 0 ? 0 : Int.random(in: 50...400, using: &g)
        return copy
    }

    /// These parameters with the child-merge operation's weight (0 to 3) appended, drawn from the
    /// seed by a generator of its own.
    func withMergeWeight(seed: UInt64) -> SimulationParameters {
        var g = SplitMix64(seed: seed ^ 0x3E56_EC41)
        var copy = self
        copy.operationWeights.append(Int.random(in: 0...3, using: &g))
        return copy
    }

    /// These parameters with the allowance operation's weight (0 to 6) appended, drawn from the
    /// seed by a generator of its own.
    func withAllowanceWeight(seed: UInt64) -> SimulationParameters {
        var g = SplitMix64(seed: seed ^ 0xA110_A4CE)
        var copy = self
        copy.operationWeights.append(Int.random(in: 0...6, using: &g))
        return copy
    }

    /// The fault kinds this draw enables, each counted once (for swarm-coverage checks).
    public func faultKinds() -> [String: Int] {
        var kinds: [String: Int] = [:]
        if lossPerMille > 0 { kinds["loss"] = 1 }
        if duplicationPerMille > 0 { kinds["duplication"] = 1 }
        if reorderPerMille > 0 { kinds["reorder"] = 1 }
        if partitionPerMille > 0 { kinds["partition"] = 1 }
        if crashPerMille > 0 { kinds["crash"] = 1 }
        if crashPerMille > 0 && staleRestorePerMille > 0 { kinds["staleRestore"] = 1 }
        if skewMillisMax > 0 { kinds["skew"] = 1 }
        if revocationPerMille > 0 && replicaCount > 1 { kinds["revocation"] = 1 }
        if accountChangePerMille > 0 { kinds["accountChange"] = 1 }
        return kinds
    }

    /// One line per parameter.
    public var description: String {
        """
        seed=\(seed) replicas=\(replicaCount) faultPhaseMillis=\(faultPhaseMillis) opIntervalMillis=\(operationIntervalMillis) \
        gossipIntervalMillis=\(gossipIntervalMillis) delayMillisMax=\(delayMillisMax) loss=\(lossPerMille)‰ \
        duplication=\(duplicationPerMille)‰ reorder=\(reorderPerMille)‰ partition=\(partitionPerMille)‰ \
        crash=\(crashPerMille)‰ staleRestore=\(staleRestorePerMille)‰ skewMillisMax=\(skewMillisMax) \
        line=\(lineTopology) weights=\(operationWeights.map(String.init).joined(separator: ",")) store=\(usesLMDB ? "lmdb" : "memory") \
        revocation=\(revocationPerMille)‰ accountChange=\(accountChangePerMille)‰ \
        zone=\(householdZone ?? "unset") zoneChange=\(zoneChangePerMille)‰
        """ + (hostileReplica.map { " hostile=r\($0):" + hostileStrategies.map(\.rawValue).joined(separator: ",") } ?? "")
            + (hostileRevoked && !hostileStrategies.contains(.writeAfterRevocation) ? "+revoked" : "")
            + (relays ? " relay=on" : "")
    }
}

@testable import KidLedgerSimulation

/// A simulator for `seed` with two replicas of one household, set up as a seed would be (no
/// events run).
func twoReplicaSimulator(seed: UInt64) throws -> Simulator {
    let sim = Simulator(parameters: SimulationParameters.draw(seed: seed, replicas: 2...2))
    try sim.setUp()
    return sim
}

@testable import KidLedgerSimulation

extension SimNode {
    /// Every child a drawn user operation may pick, in list order (``pickableChild(at:)`` for each
    /// index), checked to list as many as ``childCount()`` says.
    func pickableChildren() throws -> [PickableChild] {
        let count = try childCount()
        return try (0..<count).map { index in
            let listed = try pickableChild(at: index)
            precondition(listed.count == count, "lists \(listed.count) of \(count) children")
            return listed.child!
        }
    }
}

/// A simulator for `seed` with two replicas of one household, set up as a seed would be (no
/// events run).
func twoReplicaSimulator(seed: UInt64) throws -> Simulator {
    let sim = Simulator(parameters: SimulationParameters.draw(seed: seed, replicas: 2...2))
    try sim.setUp()
    return sim
}

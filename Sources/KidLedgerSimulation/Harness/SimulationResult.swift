/// The outcome of one simulation run.
public struct SimulationResult: Sendable {
    /// What the seed drew.
    public var parameters: SimulationParameters
    /// Failed checks; empty when the run passed.
    public var failures: [String]
    /// SHA-256 of the whole trace: equal for two runs of one seed.
    public var traceHash: String
    /// The trace lines, when kept.
    public var trace: [String]
    /// Events processed.
    public var events: Int
    /// Virtual milliseconds simulated.
    public var virtualMillis: Int64
    /// How many faults of each kind were injected.
    public var faults: [String: Int]
    /// The final digest shared by all replicas (when they converged).
    public var digest: String
    /// Change-log entries the revocation rule rejected at the end (on every replica alike).
    public var rejectedChanges: Int = 0
    /// Virtual milliseconds (from the start) at which the first check failed, when one did.
    public var failureMillis: Int64?
    /// When recorded (`record: true`): every user operation and fault the run drew, at its virtual
    /// time, as scenario steps (``Scenario/eventList(_:)`` turns them into a scenario).
    public var generated: [Scenario.Step]?
    /// When recorded: what the space-time diagram draws (``SpaceTimeDiagram``).
    public var diagram: DiagramLog?
    /// How many ways to reach the converged state agreed or were compared: 2 (incremental sync,
    /// full sync from empty), 3 with LMDB (restart from the files); 0 when the run did not converge.
    public var equivalentWays = 0
    /// SHA-256 of the trace up to the end of the event loop, before the final checks: what a
    /// ``Simulator/FinalChecks/skipped`` rerun is compared by.
    public var loopTraceHash = ""

    /// Whether every check held.
    public var passed: Bool { failures.isEmpty }
}

#if canImport(Glibc)
import Glibc
#endif
import KidLedgerSimulation

// The executable is the only place that reads a wall clock: to report rates.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
let started = monotonicSeconds()
// Reproduction lines name the program as the user ran it (its path as invoked).
exit(SimulatorCLI.run(arguments: Array(CommandLine.arguments.dropFirst()), program: CommandLine.arguments.first ?? SimulatorCLI.defaultProgram,
                      elapsedSeconds: { monotonicSeconds() - started }))

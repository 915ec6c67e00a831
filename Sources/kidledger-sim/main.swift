#if canImport(Glibc)
import Glibc
#endif
import KidLedgerSimulation
import KidLedgerSystem

// The executable is the only place that reads a clock: to report rates.
let started = Monotonic.seconds()
// Reproduction lines name the program as the user ran it (its path as invoked).
exit(SimulatorCLI.run(arguments: Array(CommandLine.arguments.dropFirst()), program: CommandLine.arguments.first ?? SimulatorCLI.defaultProgram,
                      elapsedSeconds: { Monotonic.seconds() - started }))

#if canImport(Glibc)
import Glibc
#endif
import KidLedgerCLI

var environment: [String: String] = [:]
var entry = environ
while let pointer = entry.pointee {
    let pair = String(cString: pointer)
    if let eq = pair.firstIndex(of: "=") {
        environment[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
    }
    entry += 1
}
// A read of a damaged data file through LMDB's memory map ends the process with a message and
// exit 70 instead of SIGBUS/SIGSEGV (docs/ERRORS.md).
CLI.installStoreFaultGuard()
let code = CLI.run(arguments: Array(CommandLine.arguments.dropFirst()), environment: environment, console: StandardConsole())
exit(code)

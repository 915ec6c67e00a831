// Prints the files of the Debian package that come from the program itself (Scripts/package.sh):
//   kidledger-package version | man DATE | bash-completion | user-unit
#if canImport(Glibc)
import Glibc
#endif
import KidLedgerCLI

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "version": print(PackageFiles.version)
case "man" where arguments.count == 2: print(PackageFiles.manPage(date: arguments[1]), terminator: "")
case "bash-completion": print(PackageFiles.bashCompletion(), terminator: "")
case "user-unit": print(PackageFiles.userUnit(), terminator: "")
default:
    let usage = "usage: kidledger-package version | man YYYY-MM-DD | bash-completion | user-unit\n"
    _ = usage.withCString { write(2, $0, strlen($0)) }
    exit(64)
}

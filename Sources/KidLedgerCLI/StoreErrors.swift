import KidLedgerLMDB

/// Maps storage errors to a readable message and exit code.
func storeError(_ error: any Error) -> CLIError? {
    guard let e = error as? LMDBError else { return nil }
    if e.indicatesDamage { return CLIError(storeDamagedMessage(e.description), code: .software) }
    switch e {
    case .noSpace:
        return CLIError("the disk is full (\(e)); nothing was written. Free some space and try again", code: .temporaryFailure)
    case .mapFull:
        return CLIError("the ledger store is full: it reached its size limit (\(e)); nothing was written. Raise \(Context.mapSizeMaxVariable) or free space and try again", code: .temporaryFailure)
    case .readersFull, .mapResized:
        return CLIError("the ledger store is busy (\(e)); try again", code: .temporaryFailure)
    case .versionMismatch, .incompatible:
        return CLIError("the ledger store can't be opened: \(e). Nothing was changed; keep a copy of the home before repairing it", code: .software)
    case .permissionDenied:
        return CLIError("the ledger store can't be opened: permission denied", code: .software)
    default:
        return CLIError("ledger store error: \(e)", code: .software)
    }
}

/// The message for a damaged store (exit 70): what was found, and what to do.
func storeDamagedMessage(_ detail: String) -> String {
    "the ledger store is damaged: \(detail). Nothing was changed. Keep a copy of the home, then restore the ledger from a backup or join the household again from another device"
}

extension CLI {
    /// Makes a memory fault while reading a damaged data file end the process with the damaged-store
    /// message and exit 70 rather than a crash (``MapFaultGuard``). The `kidledger` executable calls
    /// it first thing; tests running commands in process do not.
    public static func installStoreFaultGuard() {
        let detail = "reading its data file failed (a page is missing or overwritten)"
        MapFaultGuard.install(message: "kidledger: \(storeDamagedMessage(detail))\n", exitCode: ExitCode.software.rawValue)
    }
}

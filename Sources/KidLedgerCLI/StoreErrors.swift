import KidLedgerLMDB

/// Maps storage errors to a readable message and exit code.
func storeError(_ error: any Error) -> CLIError? {
    guard let e = error as? LMDBError else { return nil }
    switch e {
    case .mapFull, .noSpace:
        return CLIError("the disk is full (\(e)); nothing was written. Free some space and try again", code: .temporaryFailure)
    case .readersFull, .mapResized:
        return CLIError("the ledger store is busy (\(e)); try again", code: .temporaryFailure)
    case .corrupted, .panic, .invalid, .versionMismatch, .incompatible:
        return CLIError("the ledger store can't be opened: \(e). Nothing was changed; keep a copy of the home before repairing it", code: .software)
    case .permissionDenied:
        return CLIError("the ledger store can't be opened: permission denied", code: .software)
    default:
        return CLIError("ledger store error: \(e)", code: .software)
    }
}

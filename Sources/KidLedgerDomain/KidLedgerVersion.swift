/// The product version: the one place it is written (`kidledger --version`, the store's
/// `meta/writer`, what a laptop tells another whose sync protocol it can't speak). Releases
/// before it was written anywhere are named by the protocol they spoke (`KnownReleases` in
/// KidLedgerProtocol).
public enum KidLedgerVersion {
    /// This build's version.
    public static let current = "0.3.0"
}

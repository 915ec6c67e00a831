/// A failure of the daemon's machinery that ends the command: its message and which sysexits(3)
/// code the CLI exits with (`CLIError.from` maps it, docs/ERRORS.md).
public struct DaemonError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The sysexits(3) codes the machinery fails with.
    public enum Kind: Sendable, Equatable {
        /// EX_USAGE (64): a setting given to it is wrong.
        case usage
        /// EX_DATAERR (65): a path it can't write into a unit.
        case dataError
        /// EX_SOFTWARE (70): this program's own path can't be found.
        case software
        /// EX_IOERR (74): a file could not be opened.
        case ioError
        /// EX_TEMPFAIL (75): busy (another daemon holds the home).
        case temporaryFailure
    }

    /// What to print after "kidledger: ".
    public var message: String
    public var kind: Kind

    public init(_ message: String, kind: Kind) {
        self.message = message
        self.kind = kind
    }

    public var description: String { message }
}

/// Counted nouns in the daemon's log lines and the CLI's output alike: "1 change", "3 changes".
public enum Wording {
    public static func plural(_ n: Int, _ one: String, _ many: String? = nil) -> String {
        "\(n) \(n == 1 ? one : (many ?? one + "s"))"
    }
}

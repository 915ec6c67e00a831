import KidLedgerDomain
import KidLedgerReplica
import KidLedgerDaemon

/// Process exit codes, following sysexits(3). See docs/ERRORS.md.
public enum ExitCode: Int32, Sendable {
    /// Success.
    case ok = 0
    /// EX_USAGE: the command line is wrong.
    case usage = 64
    /// EX_DATAERR: bad input data (amount, unknown child, bad CSV) or a ledger rule refused it.
    case dataError = 65
    /// EX_UNAVAILABLE: no peer reachable.
    case unavailable = 69
    /// EX_SOFTWARE: internal error (a bug, or a store that can't be opened or is damaged).
    case software = 70
    /// EX_IOERR: a file could not be read or written.
    case ioError = 74
    /// EX_TEMPFAIL: temporary failure (disk or map full, store busy); try again.
    case temporaryFailure = 75
    /// EX_NOPERM: not permitted (revoked, attention required).
    case notPermitted = 77

    /// The code's name in a `--json` error (`"code"`): camelCase, like the case.
    public var name: String {
        switch self {
        case .ok: "ok"
        case .usage: "usage"
        case .dataError: "dataError"
        case .unavailable: "unavailable"
        case .software: "software"
        case .ioError: "ioError"
        case .temporaryFailure: "temporaryFailure"
        case .notPermitted: "notPermitted"
        }
    }
}

/// A failure the CLI reports: a message and an exit code.
public struct CLIError: Error, Sendable, CustomStringConvertible {
    /// What to print after "kidledger: ", on one line: it may hold text from anyone (a name, a
    /// peer's error), so ``CLI/run(arguments:environment:console:clock:)`` prints it through
    /// `TextEscaping.terminal`, new lines included.
    public var message: String
    /// The exit code.
    public var code: ExitCode
    /// kidledger's own second line after the message (a usage line), if any.
    public var usageLine: String?

    /// Creates an error.
    public init(_ message: String, code: ExitCode, usageLine: String? = nil) {
        self.message = message
        self.code = code
        self.usageLine = usageLine
    }

    /// A usage error (exit 64), with a second line of kidledger's own (`usageLine`).
    public static func usage(_ message: String, then usageLine: String? = nil) -> CLIError {
        CLIError(message, code: .usage, usageLine: usageLine)
    }

    /// The message and its usage line.
    public var description: String { message + (usageLine.map { "\n" + $0 } ?? "") }

    /// The error as it reaches a terminal after "kidledger: ": the message escaped on one line
    /// (``TextEscaping/terminal(_:)``), then the usage line.
    public var terminalText: String { TextEscaping.terminal(message) + (usageLine.map { "\n" + TextEscaping.terminal($0) } ?? "") }

    /// The error as `--json` prints it (one line on standard error):
    /// `{"error":{"code":"dataError","exitCode":65,"message":"..."}}`.
    public var json: JSON {
        .object([("error", .object([("code", .string(code.name)), ("exitCode", .int(code.rawValue)), ("message", .string(description))]))])
    }

    /// Maps any error thrown by the layers below to a message and exit code.
    public static func from(_ error: any Error) -> CLIError {
        switch error {
        case let e as CLIError: return e
        case let e as DaemonError:
            switch e.kind {
            case .usage: return CLIError.usage(e.message)
            case .dataError: return CLIError(e.message, code: .dataError)
            case .software: return CLIError(e.message, code: .software)
            case .ioError: return CLIError(e.message, code: .ioError)
            case .temporaryFailure: return CLIError(e.message, code: .temporaryFailure)
            }
        case let e as LedgerError:
            switch e {
            case .corrupted, .schemaMismatch, .storeFromNewerVersion: return CLIError(e.description, code: .software)
            default: return CLIError(e.description, code: .dataError)
            }
        case let e as MoneyError: return CLIError(e.description, code: .dataError)
        case let e as CSVError: return CLIError(e.description, code: .dataError)
        case let e as DecodeError: return CLIError("damaged record: \(e)", code: .software)
        default:
            if let mapped = storeError(error) { return mapped }
            return CLIError("internal error: \(error)", code: .software)
        }
    }
}

import KidLedgerDomain

/// A parsed command line: positionals, options with values, and flags.
public struct ParsedArguments: Sendable {
    /// Words that are not options, in order (after the command words).
    public var positionals: [String] = []
    /// Options that take a value, by name without dashes.
    public var values: [String: String] = [:]
    /// Flags present, by name without dashes.
    public var flags: Set<String> = []

    /// Whether `--name` was given.
    public func has(_ name: String) -> Bool { flags.contains(name) }
}

/// What a command accepts.
public struct CommandSpec: Sendable {
    /// The command words, e.g. "child add".
    public var name: String
    /// The argument synopsis, e.g. "CHILD AMOUNT [--note T]".
    public var synopsis: String
    /// One line for the command list.
    public var summary: String
    /// More text for `--help`.
    public var details: String
    /// Options that take a value (without dashes).
    public var valueOptions: [String] = []
    /// Flags (without dashes).
    public var flagOptions: [String] = []
    /// Positional argument count range.
    public var arguments: ClosedRange<Int> = 0...0

    /// The full help text.
    public var help: String {
        var text = "usage: kidledger \(name)\(synopsis.isEmpty ? "" : " " + synopsis)\n\n\(summary)\n"
        if !details.isEmpty { text += "\n\(details)\n" }
        text += ArgumentParser.globalOptionsHelp
        return text
    }
}

/// Splits raw arguments for one command. Global options (`--home DIR`, `--json`, `--help`) are
/// accepted anywhere; `--name=value` and `--name value` both work; `--` ends options.
public enum ArgumentParser {
    /// Options every command accepts that take a value.
    static let globalValueOptions = ["home"]
    /// Flags every command accepts.
    static let globalFlags = ["json", "utc", "help"]

    /// The "Global options" part of every command's help.
    static let globalOptionsHelp = """

        Global options:
          --home DIR   the ledger home (else $KIDLEDGER_HOME, else ~/.kidledger)
          --json       machine-readable output (an error is a JSON object on standard error)
          --utc        show times in UTC (default: the household's time zone)
          --help       show this help

        """

    /// Parses `words` (the words after the command name) against `spec`.
    ///
    /// - Throws: a usage ``CLIError`` naming the problem.
    public static func parse(_ words: [String], spec: CommandSpec) throws(CLIError) -> ParsedArguments {
        try parse(ArgumentTokens(words), spec: spec)
    }

    /// Parses `tokens` (the command line without the command words) against `spec`.
    ///
    /// - Throws: a usage ``CLIError`` naming the problem.
    static func parse(_ tokens: ArgumentTokens, spec: CommandSpec) throws(CLIError) -> ParsedArguments {
        var parsed = ParsedArguments()
        let valueOptions = Set(spec.valueOptions + globalValueOptions)
        let flagOptions = Set(spec.flagOptions + globalFlags)
        let known = (spec.valueOptions + spec.flagOptions + globalValueOptions + globalFlags).map { "--" + $0 }
        func unknown(_ word: String) -> CLIError {
            .usage("unknown option \(word) for `\(spec.name)`\(Suggestions.didYouMean(word, in: known, quoted: false)) (see `kidledger \(spec.name) --help`)")
        }
        for token in tokens.tokens {
            switch token.kind {
            case .positional(let word, _):
                parsed.positionals.append(word)
            case .endOfOptions:
                continue
            case .short("-h"):
                parsed.flags.insert("help")
            case .short(let word):
                throw unknown(word)
            case .option(let name, let inline, let value) where valueOptions.contains(name):
                guard parsed.values[name] == nil else { throw .usage("--\(name) is given twice; give it once") }
                guard let given = inline ?? value else { throw .usage("--\(name) needs a value") }
                parsed.values[name] = given
            case .option(let name, let inline, let value) where flagOptions.contains(name):
                // No name is a flag of one command and a value option of another (``ArgumentTokens``).
                assert(value == nil, "--\(name) is a flag here and took a value")
                guard inline == nil else { throw .usage("--\(name) takes no value") }
                guard name == "help" || !parsed.flags.contains(name) else { throw .usage("--\(name) is given twice; give it once") }
                parsed.flags.insert(name)
            case .option(let name, _, _):
                throw unknown("--" + name)
            }
        }
        if parsed.has("help") { return parsed }
        if !spec.arguments.contains(parsed.positionals.count) {
            let expected = spec.arguments.lowerBound == spec.arguments.upperBound
                ? "\(spec.arguments.lowerBound)" : "\(spec.arguments.lowerBound) to \(spec.arguments.upperBound)"
            throw .usage("`\(spec.name)` takes \(expected) argument\(spec.arguments.upperBound == 1 ? "" : "s"), got \(parsed.positionals.count)", then: "usage: kidledger \(spec.name) \(spec.synopsis)")
        }
        return parsed
    }

    /// "-5" and "-1.25" are positionals (so `take` can explain that amounts are positive).
    static func isNegativeNumber(_ word: String) -> Bool {
        let rest = word.dropFirst()
        return word.hasPrefix("-") && !rest.isEmpty && rest.allSatisfy { $0.isNumber || $0 == "." || $0 == "$" }
    }
}

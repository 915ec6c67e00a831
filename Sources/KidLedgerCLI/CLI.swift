import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB
import KidLedgerDaemon

/// The `kidledger` command line: parses arguments, runs one command, prints, returns the exit code.
public enum CLI {
    /// The version printed by `--version`.
    public static let version = KidLedgerVersion.current

    /// A command: what it accepts and what it does.
    struct Command: Sendable {
        var spec: CommandSpec
        var run: @Sendable (Context, ParsedArguments) throws -> Void
    }

    /// Every command, in help order.
    static let commands: [Command] = LedgerCommands.all + AllowanceCommands.all + DataCommands.all + PeerCommands.all + NetworkCommands.all + AccountCommands.all
        + RecoveryCommands.all + PageCommands.all + OpenCommand.all + ServiceCommands.all + HouseholdCommands.all + BackupCommands.all + RelayCommands.all

    /// Runs the command line `arguments` (without the program name).
    public static func run(arguments: [String], environment: [String: String], console: Console,
                           clock: any WallClock = SystemClock()) -> Int32 {
        let tokens = ArgumentTokens(arguments)
        do {
            return try dispatch(tokens, environment: environment, console: console, clock: clock).rawValue
        } catch {
            let failure = CLIError.from(error)
            if tokens.givesFlag("json") {
                console.err(failure.json.rendered() + "\n")
            } else {
                console.err("kidledger: \(failure.terminalText)\n")
            }
            return failure.code.rawValue
        }
    }

    /// Options and flags accepted without a command (`kidledger --help`, `kidledger --version`).
    static let topLevelOptions = (ArgumentParser.globalValueOptions + ArgumentParser.globalFlags + ["version"]).map { "--" + $0 }

    /// The first words of every command, and `help`.
    static var commandFirstWords: [String] {
        var seen: [String] = []
        for c in commands {
            let first = String(c.spec.name.split(separator: " ")[0])
            if !seen.contains(first) { seen.append(first) }
        }
        return seen + ["help"]
    }

    /// The error for command words that name no command, with the nearest command.
    static func unknownCommand(_ words: [String]) -> CLIError {
        let group = commands.filter { $0.spec.name.hasPrefix(words[0] + " ") }
        var typed = words[0]
        var suggestion: String?
        if !group.isEmpty && words.count > 1 {
            typed = words.prefix(2).joined(separator: " ")
            let seconds = group.map { String($0.spec.name.split(separator: " ")[1]) }
            suggestion = Suggestions.nearest(words[1], in: seconds).map { words[0] + " " + $0 }
        } else {
            suggestion = Suggestions.nearest(words[0], in: commandFirstWords)
        }
        let near = suggestion.map { "; did you mean `\($0)`?" } ?? ""
        return CLIError.usage("unknown command `\(typed)`\(near)", then: "Run `kidledger --help` to list the commands.")
    }

    /// `kidledger help [COMMAND]`: the overview, a group's subcommands or a command's help.
    static func help(_ words: [String], console: Console) throws -> ExitCode {
        if words.isEmpty {
            console.out(overview())
            return .ok
        }
        if let command = match(words), command.spec.name.split(separator: " ").count == words.count {
            console.out(command.spec.help)
            return .ok
        }
        if words.count == 1, let text = groupUsage(words[0]) {
            console.out(text)
            return .ok
        }
        throw unknownCommand(words)
    }

    /// The usage of a command group (`kidledger child`), or nil when `word` is not one.
    static func groupUsage(_ word: String) -> String? {
        let group = commands.filter { $0.spec.name.hasPrefix(word + " ") }
        guard !group.isEmpty else { return nil }
        var text = "usage: kidledger \(word) SUBCOMMAND\n\nSubcommands:\n"
        for c in group { text += "  kidledger \(c.spec.name) \(c.spec.synopsis)".trimmingSuffixSpaces() + "\n" }
        return text
    }

    static func dispatch(_ tokens: ArgumentTokens, environment: [String: String], console: Console,
                         clock: any WallClock, sharedStore: LMDBEnvironment? = nil, messages: Console? = nil) throws -> ExitCode {
        let positioned = tokens.commandWords
        let words = positioned.map(\.word)
        // Only before `--`: after it, "--version" is a name or an amount.
        if tokens.hasWordBeforeEnd("--version") {
            console.out("kidledger \(version)\n")
            return .ok
        }
        guard let command = match(words) else {
            if words.first == "help" { return try help(Array(words.dropFirst()), console: console) }
            let wantsHelp = tokens.hasWord("--help") || tokens.hasWord("-h")
            if !wantsHelp, let option = tokens.unknownTopLevelOption() {
                let near = Suggestions.didYouMean(option, in: topLevelOptions, quoted: false)
                throw CLIError.usage("unknown option \(option)\(near)", then: "usage: kidledger [--home DIR] [--json] [--utc] COMMAND [ARGS]; `kidledger --help` lists the commands")
            }
            if words.count <= 1, let text = groupUsage(words.first ?? "") {
                console.out(text)
                return wantsHelp ? .ok : .usage
            }
            if words.isEmpty {
                console.out(overview())
                return wantsHelp ? .ok : .usage
            }
            throw unknownCommand(words)
        }
        // Remove the command words at their positions (not an option value that happens to be
        // spelled like one) and parse the rest.
        let commandPositions = Set(positioned.prefix(command.spec.name.split(separator: " ").count).map(\.index))
        let parsed = try ArgumentParser.parse(tokens.removing(commandPositions), spec: command.spec)
        if parsed.has("help") {
            console.out(command.spec.help)
            return .ok
        }
        let home = parsed.values["home"] ?? environment["KIDLEDGER_HOME"] ?? ((environment["HOME"] ?? ".") + "/.kidledger")
        guard !home.isEmpty else { throw CLIError.usage("--home needs a directory") }
        let context = Context(home: home, json: parsed.has("json"), utc: parsed.has("utc"), console: console, clock: clock, environment: environment,
                              sharedStore: sharedStore, messages: messages)
        try command.run(context, parsed)
        return .ok
    }

    /// Options of any command that take a value: their values are not command words.
    static let valueOptionNames: Set<String> = Set(commands.flatMap(\.spec.valueOptions) + ["home"])

    /// The longest command whose words start the non-option words.
    static func match(_ words: [String]) -> Command? {
        var best: Command?
        for command in commands {
            let name = command.spec.name.split(separator: " ").map(String.init)
            if words.count >= name.count && Array(words.prefix(name.count)) == name {
                if best == nil || name.count > best!.spec.name.split(separator: " ").count { best = command }
            }
        }
        return best
    }

    /// The list of commands.
    static func overview() -> String {
        var text = "usage: kidledger [--home DIR] [--json] [--utc] COMMAND [ARGS]\n\nA local-first family allowance ledger.\n\nCommands:\n"
        let lines = commands.map { ($0.spec.name + ($0.spec.synopsis.isEmpty ? "" : " " + $0.spec.synopsis), $0.spec.summary) }
            + [("help [COMMAND]", "this overview, or a command's help")]
        let width = lines.map(\.0.count).max() ?? 20
        for (left, summary) in lines {
            text += "  " + left + String(repeating: " ", count: max(2, width - left.count + 2)) + summary + "\n"
        }
        text += "\nAmounts: dollars ('$1.25', '$0.10', 5) or coins (penny, nickel, dime, quarter, half, dollar);\n"
        text += "quote an amount with $ ('$1.25'): unquoted, the shell replaces $1 before kidledger sees it.\n"
        text += "A child is named by name (any case) or by an id prefix.\n"
        text += "Times are shown in the household's time zone; --utc shows UTC; --json gives Unix milliseconds.\n"
        text += "Run `kidledger help COMMAND` (or `kidledger COMMAND --help`) for details.\n"
        text += "Exit codes: 0 ok, 64 usage, 65 bad data, 69 no peer reachable, 70 internal error or damaged store,\n"
        text += "74 file error, 75 temporary failure (retry), 77 not permitted.\n"
        return text
    }
}

extension String {
    /// The string without trailing spaces.
    func trimmingSuffixSpaces() -> String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}

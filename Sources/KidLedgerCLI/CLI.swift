import KidLedgerDomain
import KidLedgerReplica
import KidLedgerLMDB

/// The `kidledger` command line: parses arguments, runs one command, prints, returns the exit code.
public enum CLI {
    /// The version printed by `--version`.
    public static let version = "0.1.0"

    /// A command: what it accepts and what it does.
    struct Command: Sendable {
        var spec: CommandSpec
        var run: @Sendable (Context, ParsedArguments) throws -> Void
    }

    /// Every command, in help order.
    static let commands: [Command] = LedgerCommands.all + DataCommands.all + PeerCommands.all + NetworkCommands.all + AccountCommands.all
        + RecoveryCommands.all + PageCommands.all + ServiceCommands.all

    /// Runs the command line `arguments` (without the program name).
    public static func run(arguments: [String], environment: [String: String], console: Console,
                           clock: any WallClock = SystemClock()) -> Int32 {
        do {
            return try dispatch(arguments, environment: environment, console: console, clock: clock).rawValue
        } catch {
            let failure = CLIError.from(error)
            console.err("kidledger: \(TextEscaping.terminal(failure.message, keepingNewlines: true))\n")
            return failure.code.rawValue
        }
    }

    static func dispatch(_ arguments: [String], environment: [String: String], console: Console,
                         clock: any WallClock, sharedStore: LMDBEnvironment? = nil, messages: Console? = nil) throws -> ExitCode {
        let positioned = commandWords(arguments)
        let words = positioned.map(\.word)
        // Only before `--`: after it, "--version" is a name or an amount.
        if arguments.prefix(while: { $0 != "--" }).contains("--version") {
            console.out("kidledger \(version)\n")
            return .ok
        }
        guard let command = match(words) else {
            let groups = commands.filter { $0.spec.name.hasPrefix((words.first ?? "") + " ") }
            if !groups.isEmpty && words.count <= 1 {
                var text = "usage: kidledger \(words[0]) SUBCOMMAND\n\nSubcommands:\n"
                for c in groups { text += "  kidledger \(c.spec.name) \(c.spec.synopsis)".trimmingSuffixSpaces() + "\n" }
                console.out(text)
                return arguments.contains("--help") || arguments.contains("-h") ? .ok : .usage
            }
            if words.isEmpty {
                console.out(overview())
                return arguments.contains("--help") || arguments.contains("-h") ? .ok : .usage
            }
            throw CLIError.usage("unknown command `\(words.prefix(2).joined(separator: " "))`\n\n" + overview())
        }
        // Remove the command words at their positions (not an option value that happens to be
        // spelled like one) and parse the rest.
        let commandPositions = Set(positioned.prefix(command.spec.name.split(separator: " ").count).map(\.index))
        let rest = arguments.enumerated().filter { !commandPositions.contains($0.offset) }.map(\.element)
        let parsed = try ArgumentParser.parse(rest, spec: command.spec)
        if parsed.has("help") {
            console.out(command.spec.help)
            return .ok
        }
        let home = parsed.values["home"] ?? environment["KIDLEDGER_HOME"] ?? ((environment["HOME"] ?? ".") + "/.kidledger")
        guard !home.isEmpty else { throw CLIError.usage("--home needs a directory") }
        let context = Context(home: home, json: parsed.has("json"), console: console, clock: clock, environment: environment,
                              sharedStore: sharedStore, messages: messages)
        try command.run(context, parsed)
        return .ok
    }

    /// Options of any command that take a value: their values are not command words.
    static let valueOptionNames: Set<String> = Set(commands.flatMap(\.spec.valueOptions) + ["home"])

    /// The words that are neither options nor option values, with their positions.
    static func commandWords(_ arguments: [String]) -> [(word: String, index: Int)] {
        var words: [(word: String, index: Int)] = []
        var i = 0
        while i < arguments.count {
            let word = arguments[i]
            i += 1
            if word == "--" {
                words += (i..<arguments.count).map { (arguments[$0], $0) }
                break
            }
            if word.hasPrefix("--") {
                let name = String(word.dropFirst(2))
                if valueOptionNames.contains(name) { i += 1 }
                continue
            }
            if word.hasPrefix("-") && !ArgumentParser.isNegativeNumber(word) { continue }
            words.append((word, i - 1))
        }
        return words
    }

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
        var text = "usage: kidledger [--home DIR] [--json] COMMAND [ARGS]\n\nA local-first family allowance ledger.\n\nCommands:\n"
        let width = commands.map { $0.spec.name.count + 1 + $0.spec.synopsis.count }.max() ?? 20
        for c in commands {
            let left = c.spec.name + (c.spec.synopsis.isEmpty ? "" : " " + c.spec.synopsis)
            text += "  " + left + String(repeating: " ", count: max(2, width - left.count + 2)) + c.spec.summary + "\n"
        }
        text += "\nAmounts: dollars (1.25, $0.10, 5) or coins (penny, nickel, dime, quarter, half, dollar).\n"
        text += "A child is named by name (any case) or by an id prefix.\n"
        text += "Run `kidledger COMMAND --help` for details. Exit codes: docs/ERRORS.md.\n"
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

/// A command line split into tokens once: every reader of the arguments (the JSON-error check of
/// ``CLI/run(arguments:environment:console:clock:)``, the command lookup, `--version`, `--help`,
/// the top-level option check and ``ArgumentParser``) reads these, never the raw words.
///
/// An option that some command declares as taking a value (``CLI/valueOptionNames``) takes the
/// next word as its value, unless it has one inline (`--name=value`); no name is a value option of
/// one command and a flag of another, so this binding is the one every command's parser makes.
/// After `--` every word is a positional.
struct ArgumentTokens: Sendable {
    /// One token: its kind and the position of its (first) word among the arguments.
    struct Token: Sendable {
        enum Kind: Sendable {
            /// A word that is not an option: a command word or a positional. `afterOptions`: after `--`.
            case positional(String, afterOptions: Bool)
            /// `--`: the end of options.
            case endOfOptions
            /// A single-dash option such as `-h` or `-x` (not `-` and not a negative number).
            case short(String)
            /// `--name`, `--name=inline` or `--name VALUE` (`value`: the next word, for a value
            /// option without an inline value; nil at the end of the arguments).
            case option(name: String, inline: String?, value: String?)
        }
        var kind: Kind
        var index: Int
    }

    /// The tokens, in order.
    let tokens: [Token]

    /// Splits `arguments`; `valueOptions` are the names (without dashes) that take a value.
    init(_ arguments: [String], valueOptions: Set<String> = CLI.valueOptionNames) {
        var tokens: [Token] = []
        var i = 0
        var optionsEnded = false
        while i < arguments.count {
            let word = arguments[i]
            let index = i
            i += 1
            if optionsEnded || !word.hasPrefix("-") || word == "-" || ArgumentParser.isNegativeNumber(word) {
                tokens.append(Token(kind: .positional(word, afterOptions: optionsEnded), index: index))
            } else if word == "--" {
                optionsEnded = true
                tokens.append(Token(kind: .endOfOptions, index: index))
            } else if !word.hasPrefix("--") {
                tokens.append(Token(kind: .short(word), index: index))
            } else {
                var name = String(word.dropFirst(2))
                var inline: String?
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                var value: String?
                if inline == nil && valueOptions.contains(name) && i < arguments.count {
                    value = arguments[i]
                    i += 1
                }
                tokens.append(Token(kind: .option(name: name, inline: inline, value: value), index: index))
            }
        }
        self.tokens = tokens
    }

    private init(tokens: [Token]) { self.tokens = tokens }

    /// The tokens before `--`.
    private var options: ArraySlice<Token> {
        tokens.prefix { if case .endOfOptions = $0.kind { false } else { true } }
    }

    /// Whether the flag `--name` is given as an option (not as an option's value, not after `--`).
    func givesFlag(_ name: String) -> Bool {
        options.contains { if case .option(name, nil, _) = $0.kind { true } else { false } }
    }

    /// Whether `word` is one of the words before the first `--` word (an option's value too):
    /// `--version` is honoured there.
    func hasWordBeforeEnd(_ word: String) -> Bool {
        tokens.lazy.flatMap(Self.words(of:)).prefix { $0 != "--" }.contains(word)
    }

    /// Whether `word` is any of the words, anywhere (`--help`, `-h`).
    func hasWord(_ word: String) -> Bool {
        tokens.contains { Self.words(of: $0).contains(word) }
    }

    /// The raw words of a token.
    private static func words(of token: Token) -> [String] {
        switch token.kind {
        case .positional(let word, _): [word]
        case .endOfOptions: ["--"]
        case .short(let word): [word]
        case .option(let name, let inline, let value): ["--" + name + (inline.map { "=" + $0 } ?? "")] + (value.map { [$0] } ?? [])
        }
    }

    /// The words that may name the command (positionals, but not `-` before `--`), with their positions.
    var commandWords: [(word: String, index: Int)] {
        tokens.compactMap { token in
            guard case .positional(let word, let afterOptions) = token.kind, afterOptions || word != "-" else { return nil }
            return (word, token.index)
        }
    }

    /// The first option before `--` that no command accepts at the top level, e.g. `--bogus` or
    /// `-x` in `kidledger --bogus`.
    func unknownTopLevelOption() -> String? {
        for token in options {
            switch token.kind {
            case .short(let word) where word != "-h":
                return String(word.split(separator: "=", maxSplits: 1).first ?? "")
            case .option(let name, _, _) where !CLI.topLevelOptions.contains("--" + name):
                return "--" + name
            default:
                continue
            }
        }
        return nil
    }

    /// These tokens without the ones at `indices` (the command words).
    func removing(_ indices: Set<Int>) -> ArgumentTokens {
        ArgumentTokens(tokens: tokens.filter { !indices.contains($0.index) })
    }
}

import Testing
@testable import KidLedgerCLI

/// The command line is split once (``ArgumentTokens``); every reader sees the same split.
@Suite struct ArgumentTokensTests {
    @Test("an option's value is neither a flag nor a command word, and `--` ends options")
    func valuesAndEndOfOptions() {
        let tokens = ArgumentTokens(["--home", "give", "give", "Ava", "5", "--note", "--json", "--", "--utc", "-"])
        #expect(tokens.commandWords.map(\.word) == ["give", "Ava", "5", "--utc", "-"])
        #expect(tokens.commandWords.map(\.index) == [2, 3, 4, 8, 9])
        #expect(!tokens.givesFlag("json"))
        #expect(!tokens.givesFlag("utc"))
        #expect(tokens.hasWordBeforeEnd("--json"))
        #expect(!tokens.hasWordBeforeEnd("--utc"))
        #expect(tokens.hasWord("--utc"))
        #expect(tokens.unknownTopLevelOption() == "--note")
    }

    @Test("inline values, single-dash options, negative numbers and a lone dash")
    func shapesOfWords() throws {
        let tokens = ArgumentTokens(["--home=/tmp/x", "take", "-5", "-", "-x=1", "--json"])
        #expect(tokens.commandWords.map(\.word) == ["take", "-5"])
        #expect(tokens.givesFlag("json"))
        #expect(tokens.unknownTopLevelOption() == "-x")
        let spec = CommandSpec(name: "take", synopsis: "", summary: "", details: "", arguments: 0...3)
        let parsed = try ArgumentParser.parse(ArgumentTokens(["--home=/tmp/x", "-5", "-", "--json"]), spec: spec)
        #expect(parsed.values["home"] == "/tmp/x")
        #expect(parsed.positionals == ["-5", "-"])
        #expect(parsed.has("json"))
        #expect(throws: CLIError.self) { try ArgumentParser.parse(ArgumentTokens(["-x=1"]), spec: spec) }
    }
}

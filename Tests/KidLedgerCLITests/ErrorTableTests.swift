import Foundation
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
#if canImport(Glibc)
import Glibc
#endif

/// One row of the "Messages" table in docs/ERRORS.md.
struct ErrorRow: Sendable, CustomTestStringConvertible {
    /// Its line in docs/ERRORS.md.
    var line: Int
    var situation: String
    /// "standard" or "empty".
    var home: String
    /// The commands cell with its code span removed.
    var commands: String
    var code: Int32
    /// The message with its code span removed; "..." stands for any text.
    var message: String

    var testDescription: String { "\(situation) (docs/ERRORS.md:\(line))" }

    /// For a row checked by another test: that test's file name and the fragment it must contain.
    var checkedElsewhere: (file: String, fragment: String)? {
        guard commands.hasPrefix("(checked in "), commands.hasSuffix("\")"),
              let colon = commands.firstIndex(of: ":") else { return nil }
        let file = String(commands[commands.index(commands.startIndex, offsetBy: 12)..<colon])
        let quoted = commands[commands.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard quoted.count >= 3, quoted.hasPrefix("\"") else { return nil }
        return (file, String(quoted.dropFirst().dropLast(2)))
    }
}

/// docs/ERRORS.md, read relative to this file, and its two tables.
enum ErrorsDoc {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let path = repository.appendingPathComponent("docs/ERRORS.md").path
    static let lines: [String] = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
        .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)

    /// The cells of a table row (`| a | b |`), or nil for a line that is not one or is a header/separator.
    static func cells(_ line: String) -> [String]? {
        guard line.hasPrefix("| "), line.hasSuffix(" |"), !line.hasPrefix("|---") else { return nil }
        return line.dropFirst(2).dropLast(2).components(separatedBy: " | ").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    /// Removes a Markdown code span: "`x`" or "`` x ``".
    static func unquote(_ cell: String) -> String {
        if cell.hasPrefix("`` ") && cell.hasSuffix(" ``") { return String(cell.dropFirst(3).dropLast(3)) }
        if cell.count >= 2 && cell.hasPrefix("`") && cell.hasSuffix("`") { return String(cell.dropFirst().dropLast()) }
        return cell
    }

    /// The exit codes of the codes table (the table before "## Messages").
    static let codes: [Int32] = {
        let end = lines.firstIndex(of: "## Messages") ?? lines.count
        return lines[..<end].compactMap { line in cells(line).flatMap { $0.first.flatMap { Int32($0) } } }
    }()

    /// The rows of the messages table.
    static let rows: [ErrorRow] = {
        guard let start = lines.firstIndex(of: "## Messages") else { return [] }
        var rows: [ErrorRow] = []
        for (offset, line) in lines[start...].enumerated() {
            guard let c = cells(line), c.count == 5, c[0] != "situation" else { continue }
            rows.append(ErrorRow(line: start + offset + 1, situation: c[0], home: c[1], commands: unquote(c[2]),
                                 code: Int32(c[3]) ?? -1, message: unquote(c[4])))
        }
        return rows
    }()
}

/// Splits one command into words: spaces separate, `"..."` quotes (with `\"` and `\n` inside).
func commandWords(_ text: String) -> [String] {
    var words: [String] = []
    var word = ""
    var quoted = false, inWord = false
    var characters = Array(text)[...]
    while let c = characters.popFirst() {
        if quoted {
            if c == "\\", let next = characters.popFirst() {
                word.append(next == "n" ? "\n" : next)
            } else if c == "\"" {
                quoted = false
            } else {
                word.append(c)
            }
        } else if c == " " {
            if inWord { words.append(word) }
            word = ""
            inWord = false
        } else if c == "\"" {
            quoted = true
            inWord = true
        } else {
            word.append(c)
            inWord = true
        }
    }
    if inWord { words.append(word) }
    return words
}

/// Whether `text` matches `pattern`, where "..." in the pattern stands for any text.
func matches(_ text: String, pattern: String) -> Bool {
    let parts = pattern.components(separatedBy: "...")
    guard parts.count > 1 else { return text == pattern }
    guard text.hasPrefix(parts[0]), text.hasSuffix(parts[parts.count - 1]),
          text.count >= parts[0].count + parts[parts.count - 1].count else { return false }
    var rest = Substring(text.dropFirst(parts[0].count).dropLast(parts[parts.count - 1].count))
    for part in parts.dropFirst().dropLast() where !part.isEmpty {
        guard let range = rest.range(of: part) else { return false }
        rest = rest[range.upperBound...]
    }
    return true
}

@Suite("docs/ERRORS.md messages table")
struct ErrorTableTests {
    static let standard = "init Home ; child add Ava ; child add Ben ; give Ava 1"

    /// The table is there and looks as the tests below expect.
    @Test func tableIsReadable() {
        #expect(ErrorsDoc.codes == [0, 64, 65, 69, 70, 74, 75, 77], "codes table of \(ErrorsDoc.path)")
        #expect(ErrorsDoc.rows.count >= 50, "messages table of \(ErrorsDoc.path)")
        for row in ErrorsDoc.rows {
            #expect(["standard", "empty"].contains(row.home), "\(row)")
            #expect(ErrorsDoc.codes.contains(row.code) && row.code != 0, "\(row): code \(row.code) is not in the codes table")
            #expect(!row.message.isEmpty && !row.commands.isEmpty, "\(row)")
        }
    }

    /// Every exit code of the codes table other than 0 is produced by at least one row.
    @Test func everyCodeHasARow() {
        for code in ErrorsDoc.codes where code != 0 {
            #expect(ErrorsDoc.rows.contains { $0.code == code }, "exit code \(code) has no row in the messages table")
        }
    }

    /// Rows checked by another test name a test file that holds the fragment, which is part of the message.
    /// `pending` lists the files of work not merged yet: for them only the fragment is checked.
    static let pending: Set<String> = []

    @Test func rowsCheckedElsewhere() throws {
        let elsewhere = ErrorsDoc.rows.filter { $0.commands.hasPrefix("(") }
        #expect(elsewhere.count <= 6, "keep the rows that are checked elsewhere few")
        for row in elsewhere {
            let named = try #require(row.checkedElsewhere, "\(row): write (checked in NAME: \"FRAGMENT\")")
            #expect(named.fragment.count >= 10 && row.message.contains(named.fragment), "\(row): fragment not in the message")
            let file = ErrorsDoc.repository.appendingPathComponent("Tests/KidLedgerCLITests/\(named.file).swift").path
            guard let source = try? String(contentsOfFile: file, encoding: .utf8) else {
                #expect(Self.pending.contains(named.file), "\(row): \(file) does not exist")
                continue
            }
            #expect(source.contains(named.fragment), "\(row): \(named.file).swift does not check \"\(named.fragment)\"")
        }
    }

    @Test(arguments: ErrorsDoc.rows.filter { !$0.commands.hasPrefix("(") })
    func rowIsReproduced(_ row: ErrorRow) throws {
        let port = try refusingPort()
        defer { close(port.fd) }
        try withLedger { l in
            var code = ""
            func expand(_ text: String) -> String {
                var out = text.replacingOccurrences(of: "{tmp}", with: l.directory)
                    .replacingOccurrences(of: "{port}", with: String(port.port))
                    .replacingOccurrences(of: "{code}", with: code)
                while let open = out.range(of: "{x"), let close = out[open.upperBound...].firstIndex(of: "}"),
                      let n = Int(out[open.upperBound..<close]) {
                    out.replaceSubrange(open.lowerBound...close, with: String(repeating: "x", count: n))
                }
                return out
            }
            // Expanded only when run: `{code}` comes from an earlier command's output.
            let commands = row.commands.components(separatedBy: " ; ").map(commandWords)
            if row.home == "standard" {
                for command in Self.standard.components(separatedBy: " ; ") { l.ok(commandWords(command)) }
            }
            for raw in commands.dropLast() {
                let command = raw.map(expand)
                switch command.first {
                case "file":
                    try #require(command.count == 3, "file PATH TEXT")
                    let path = l.file(command[1])
                    try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                            withIntermediateDirectories: true)
                    try command[2].write(toFile: path, atomically: false, encoding: .utf8)
                case "chmod":
                    try #require(command.count == 3, "chmod MODE PATH")
                    #expect(chmod(l.file(command[2]), mode_t(command[1], radix: 8) ?? 0) == 0)
                default:
                    // A set-up step may warn (`invite` on a loopback address) but must succeed.
                    let outcome = l.run(command)
                    let warnings = outcome.stderr.split(separator: "\n").allSatisfy { $0.hasPrefix("kidledger: warning: ") }
                    #expect(outcome.code == 0 && warnings, "kidledger \(command.joined(separator: " ")): \(outcome)")
                    let out = outcome.stdout
                    if let word = out.split(whereSeparator: { $0 == " " || $0 == "\n" }).first(where: { $0.hasPrefix("KL1-") }) {
                        code = String(word)
                    }
                }
            }
            let last = try #require(commands.last).map(expand)
            let before = row.home == "standard" ? l.state() : ""
            let outcome = l.run(last)
            #expect(outcome.code == row.code, "\(outcome)")
            let first = outcome.stderr.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
            #expect(matches(first, pattern: "kidledger: " + expand(row.message)), "expected: kidledger: \(expand(row.message))\ngot: \(first)")
            if row.home == "standard" { #expect(l.state() == before, "the failed command changed the ledger") }
        }
    }

    /// The matcher and the word splitter the table relies on.
    @Test func helpers() {
        #expect(matches("a b c", pattern: "a b c"))
        #expect(!matches("a b c", pattern: "a b"))
        #expect(matches("cannot listen on x: because", pattern: "cannot listen on x: ..."))
        #expect(matches("a (1, 2) z", pattern: "a (...) z"))
        #expect(!matches("a z", pattern: "a (...) z"))
        #expect(matches("xyz", pattern: "x...y...z") && !matches("xzy", pattern: "x...y...z"))
        #expect(commandWords("give Ava \"\"") == ["give", "Ava", ""])
        #expect(commandWords("file a.csv \"x,\\\"y\\n\"") == ["file", "a.csv", "x,\"y\n"])
        #expect(commandWords("account switch \"bad name!\"") == ["account", "switch", "bad name!"])
    }
}

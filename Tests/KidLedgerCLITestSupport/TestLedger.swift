import Foundation
import KidLedgerTestSupport
import Testing
import KidLedgerCLI
import KidLedgerDomain

/// What one command printed and returned.
public struct Outcome: CustomStringConvertible {
    public var code: Int32
    public var stdout: String
    public var stderr: String

    public init(code: Int32, stdout: String, stderr: String) { (self.code, self.stdout, self.stderr) = (code, stdout, stderr) }

    public var description: String { "exit \(code)\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }
}

/// A fresh temporary directory (mkdtemp under /tmp) holding a ledger home that does not exist yet
/// (`<dir>/home`), so tests can also check that a command did not create it.
///
/// Commands run in process through `CLI.run` with a `BufferConsole`. Each run gets a `FixedClock`:
/// the first reads 1_795_000_000_000 (2026-11-18 11:06:40 UTC) and every run after it one minute
/// later. A single clock value for every command would make history order and the undo target
/// depend on the random transaction ids (same-millisecond transactions are ordered by id).
/// The CLI's tests and the page's (KidLedgerUITests, whose runs read the system clock) share it.
public final class TestLedger {
    public static let startMillis: Int64 = 1_795_000_000_000

    public let directory: String
    public let home: String
    public private(set) var millis = TestLedger.startMillis
    /// Advance of the clock after each run.
    public var step: Int64 = 60_000
    /// Variables every run gets besides the home's (``environment``).
    private let extraEnvironment: [String: String]
    /// The clock of every run instead of the fixed one, when set.
    private let clock: (any WallClock)?

    /// A ledger in a fresh `/tmp/PREFIX-XXXXXX`. Every run also gets `environment` (the page's tests
    /// run as USER "mom") and, with `clock`, reads that clock instead of the fixed one (the page's
    /// own commands read the system clock).
    public init(prefix: String = "kidledger-cli", environment: [String: String] = [:], clock: (any WallClock)? = nil) {
        directory = TemporaryDirectory(prefix: prefix).path
        home = directory + "/home"
        extraEnvironment = environment
        self.clock = clock
    }

    /// A ledger whose home is `home` (e.g. on a file system a test mounted), with `directory` (an
    /// existing directory elsewhere) for everything else.
    public init(directory: String, home: String) {
        self.directory = directory
        self.home = home
        extraEnvironment = [:]
        clock = nil
    }

    /// Sets the clock of the next run.
    public func setClock(_ millis: Int64) { self.millis = millis }

    /// Removes the temporary directory and everything in it.
    public func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// A path in the temporary directory (outside the home).
    public func file(_ name: String) -> String { directory + "/" + name }

    /// The `TZ` of every run (the local time zone tables show); UTC unless a test sets another.
    public var timeZone = "UTC"

    /// The environment of every run: KIDLEDGER_HOME set to ``home``, HOME to ``directory``, TZ to
    /// ``timeZone``, and the variables given at creation.
    public var environment: [String: String] {
        ["KIDLEDGER_HOME": home, "HOME": directory, "TZ": timeZone].merging(extraEnvironment) { $1 }
    }

    /// Runs `kidledger ARGS` in ``environment`` with `adding`'s variables too, on `clock` when given
    /// (else the ledger's).
    @discardableResult
    public func run(_ arguments: [String], adding: [String: String] = [:], clock: (any WallClock)? = nil) -> Outcome {
        let console = BufferConsole()
        let code = CLI.run(arguments: arguments, environment: environment.merging(adding) { $1 }, console: console,
                           clock: clock ?? self.clock ?? FixedClock(millis: millis))
        millis += step
        return Outcome(code: code, stdout: console.stdout, stderr: console.stderr)
    }

    @discardableResult
    public func run(_ arguments: String...) -> Outcome { run(arguments) }

    /// Runs a command that must succeed and returns its standard output.
    @discardableResult
    public func ok(_ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) -> String {
        ok(arguments, sourceLocation: sourceLocation)
    }

    @discardableResult
    public func ok(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) -> String {
        let outcome = run(arguments)
        #expect(outcome.code == 0, "kidledger \(arguments.joined(separator: " ")): \(outcome)", sourceLocation: sourceLocation)
        #expect(outcome.stderr == "", sourceLocation: sourceLocation)
        return outcome.stdout
    }

    /// Output with id prefixes, digests and the home path masked (see ``mask(_:)``).
    public func masked(_ text: String) -> String {
        mask(text.replacingOccurrences(of: home, with: "$HOME").replacingOccurrences(of: directory, with: "$TMP"))
    }

    /// What must not change when a command fails: the digest, the full JSON history and the children.
    public func state() -> String {
        [["digest"], ["history", "--limit", "0", "--json"], ["children", "--all", "--json"]].map { arguments in
            let outcome = run(arguments)
            return "\(outcome.code) \(outcome.stdout)"
        }.joined()
    }
}

/// `text` with every recovery secret (14 dash-separated groups of 4, as `init` prints it) replaced
/// by `<recovery secret>`: it is random.
public func maskRecoverySecret(_ text: String) -> String {
    text.replacingOccurrences(of: "[0-9A-Z]{4}(-[0-9A-Z]{4}){13}", with: "<recovery secret>", options: .regularExpression)
}

/// What `init` prints after its first line, with the secret masked.
public let initRecoveryNotice = """
    Recovery secret (shown only now; write it on paper and keep it away from this laptop):
      <recovery secret>
    If this laptop is lost or stolen, run `kidledger recover` on another member's laptop and type this
    secret: that laptop becomes the owner, so it can revoke this one (docs/SECURITY.md, "A stolen laptop").

    """

/// `text` with every key fingerprint ("3fa2-91c0-7d44-e1b8") written as "xxxx-xxxx-xxxx-xxxx" (the
/// same width, so tables keep their alignment).
public func maskFingerprints(_ text: String) -> String {
    text.replacingOccurrences(of: "[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}", with: "xxxx-xxxx-xxxx-xxxx", options: .regularExpression)
}

/// `text` with the ID column of a `history` table (8 hex digits of a random transaction id) masked.
public func maskIDs(_ text: String) -> String {
    text.replacingOccurrences(of: "  [0-9a-f]{8}(  |\n)", with: "  xxxxxxxx$1", options: .regularExpression)
}

/// Runs `body` with a fresh ledger and removes its directory afterwards.
public func withLedger<T>(_ body: (TestLedger) throws -> T) rethrows -> T {
    let ledger = TestLedger()
    defer { ledger.remove() }
    return try body(ledger)
}

/// Replaces every run of exactly 8 lowercase hex digits (an id prefix) with "########" and every
/// run of exactly 64 (a digest) with "<digest>". A run is delimited by characters that are
/// not ASCII letters or digits. Written without regular expressions.
public func mask(_ text: String) -> String {
    func isWordCharacter(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c.isNumber) }
    func isHex(_ c: Character) -> Bool { c.isASCII && (c.isNumber || ("a"..."f").contains(c)) }
    var out = ""
    var word = ""
    func flush() {
        if word.allSatisfy(isHex) && word.count == 8 {
            out += "########"
        } else if word.allSatisfy(isHex) && word.count == 64 {
            out += "<digest>"
        } else {
            out += word
        }
        word = ""
    }
    for c in text {
        if isWordCharacter(c) {
            word.append(c)
        } else {
            flush()
            out.append(c)
        }
    }
    flush()
    return out
}

// MARK: - JSON

/// Parses one JSON document (the whole text) with Foundation.
public func parseJSON(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> Any? {
    do {
        return try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    } catch {
        Issue.record("not JSON (\(error)): \(text)", sourceLocation: sourceLocation)
        return nil
    }
}

/// camelCase: an ASCII lowercase letter, then ASCII letters and digits only.
public func isCamelCase(_ key: String) -> Bool {
    guard let first = key.first, first.isASCII, first.isLowercase else { return false }
    return key.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
}

/// Every problem found walking `value`: keys that are not camelCase, and values of keys ending in
/// "Cents" that are not integers. `path` names the position for messages.
public func jsonProblems(_ value: Any, path: String = "$") -> [String] {
    var problems: [String] = []
    if let object = value as? [String: Any] {
        for (key, item) in object {
            let here = path + "." + key
            if !isCamelCase(key) { problems.append("\(here): key is not camelCase") }
            if key.hasSuffix("Cents") {
                let isInteger = (item as? NSNumber).map { number in
                    "\(number)".allSatisfy { $0 == "-" || ($0.isASCII && $0.isNumber) }
                } ?? false
                if !isInteger { problems.append("\(here): \(item) is not an integer") }
            }
            problems += jsonProblems(item, path: here)
        }
    } else if let array = value as? [Any] {
        for (i, item) in array.enumerated() { problems += jsonProblems(item, path: "\(path)[\(i)]") }
    }
    return problems
}

/// The raw text after every `"...Cents":` must be an optional minus and digits: no fraction,
/// exponent, quotes or null (JSONSerialization alone can't tell 5 from 5.0).
public func rawCentsProblems(_ text: String) -> [String] {
    var problems: [String] = []
    let chars = Array(text)
    let marker = Array("Cents\":")
    var i = 0
    while i + marker.count <= chars.count {
        guard Array(chars[i..<(i + marker.count)]) == marker else { i += 1; continue }
        var j = i + marker.count
        if j < chars.count && chars[j] == "-" { j += 1 }
        let digitsStart = j
        while j < chars.count && chars[j].isASCII && chars[j].isNumber { j += 1 }
        let terminated = j < chars.count && [",", "}", "]"].contains(chars[j])
        if j == digitsStart || !terminated {
            problems.append("not an integer after \(String(chars[max(0, i - 20)..<min(chars.count, j + 5)]))")
        }
        i = j
    }
    return problems
}

/// Runs `--json ARGS`, expects success, a single JSON line with no text around it, camelCase keys
/// and integer `...Cents`; returns the parsed value.
@discardableResult
public func checkJSON(_ ledger: TestLedger, _ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) -> Any? {
    checkJSON(ledger, arguments, sourceLocation: sourceLocation)
}

@discardableResult
public func checkJSON(_ ledger: TestLedger, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) -> Any? {
    let outcome = ledger.run(["--json"] + arguments)
    let command = arguments.joined(separator: " ")
    #expect(outcome.code == 0, "\(command): \(outcome)", sourceLocation: sourceLocation)
    #expect(outcome.stderr == "", sourceLocation: sourceLocation)
    #expect(outcome.stdout.hasSuffix("}\n") && outcome.stdout.filter { $0 == "\n" }.count == 1,
            "\(command): one JSON object per line expected: \(outcome.stdout)", sourceLocation: sourceLocation)
    guard let value = parseJSON(outcome.stdout, sourceLocation: sourceLocation) else { return nil }
    #expect(value is [String: Any], "\(command): top level is not an object", sourceLocation: sourceLocation)
    #expect(jsonProblems(value) == [], "\(command): \(outcome.stdout)", sourceLocation: sourceLocation)
    #expect(rawCentsProblems(outcome.stdout) == [], "\(command)", sourceLocation: sourceLocation)
    return value
}

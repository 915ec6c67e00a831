import KidLedgerDomain

/// What one CLI command gave: its exit code, its `--json` document, its text message, its error.
public struct CommandOutcome: Equatable, Sendable {
    /// The CLI's exit code (docs/ERRORS.md).
    public var exitCode: Int32
    /// What the command printed in `--json` mode (one JSON document, or empty).
    public var json: String
    /// The message the command prints in text mode (its `say` lines), for the page to show.
    public var message: String
    /// The error message (without "kidledger: "), when it failed.
    public var error: String

    /// Creates an outcome.
    public init(exitCode: Int32, json: String, message: String = "", error: String = "") {
        self.exitCode = exitCode
        self.json = json
        self.message = message
        self.error = error
    }
}

/// Runs one `kidledger` command line (without `--home` and `--json`, which the runner adds) and
/// reports what it gave. The CLI supplies it: the page runs exactly the CLI's commands.
public typealias CommandRunner = @Sendable ([String]) -> CommandOutcome

/// The page's routes: the embedded assets, the read API and the changes, each a CLI command.
/// Pure apart from `run`; the server (``UIServer``) and the tests call ``respond(to:)``.
public struct UIApp: Sendable {
    let gate: UIGate
    let run: CommandRunner

    /// Creates the app behind `gate`, running commands with `run`.
    public init(gate: UIGate, run: @escaping CommandRunner) {
        self.gate = gate
        self.run = run
    }

    /// The response to `request`: the gate's refusal, or the route's answer.
    public func respond(to request: HTTPRequest) -> HTTPResponse {
        if case .answer(let response) = gate.check(request) { return response }
        var response = route(request)
        if request.method == "HEAD" { response.body = [] }
        return response
    }

    func route(_ request: HTTPRequest) -> HTTPResponse {
        let reading = request.method == "GET" || request.method == "HEAD"
        switch request.path {
        case "/":
            guard reading else { return methodNotAllowed("GET") }
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")],
                                body: Array(PageAssets.html(token: gate.changeToken).utf8))
        case "/app.js":
            guard reading else { return methodNotAllowed("GET") }
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/javascript; charset=utf-8"), ("Cache-Control", "no-cache")],
                                body: Array((PageAssets.script + PageAssets.householdScript + PageAssets.relayScript).utf8))
        case "/app.css":
            guard reading else { return methodNotAllowed("GET") }
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/css; charset=utf-8"), ("Cache-Control", "no-cache")],
                                body: Array((PageAssets.style + PageAssets.householdStyle + PageAssets.relayStyle).utf8))
        case "/api/state":
            guard reading else { return methodNotAllowed("GET") }
            return state(ifNoneMatch: request.header("if-none-match"))
        case "/api/history":
            guard reading else { return methodNotAllowed("GET") }
            var words = ["history", "--limit", request.query["limit"] ?? "20"]
            if let child = request.query["child"] { words += ["--", child] }
            return answer(run(words))
        case "/api/backup":
            guard reading else { return methodNotAllowed("GET") }
            return backupDownload()
        case "/api/undo-preview":
            guard reading else { return methodNotAllowed("GET") }
            return answer(run(["undo", "--dry-run"] + (request.query["id"].map { ["--", $0] } ?? [])))
        case let path where Self.householdReads[path] != nil:
            guard reading, let words = Self.householdReads[path] else { return methodNotAllowed("GET") }
            return answer(run(words))
        default:
            guard let make = Self.changes[request.path] ?? Self.householdChanges[request.path] else {
                return request.path.hasPrefix("/api/") ? .json(404, Self.errorJSON("no such API route: \(request.path)", exitCode: nil))
                                                       : .page(404, title: "Not found", message: "There is no page at \(request.path).")
            }
            guard request.method == "POST" else { return methodNotAllowed("POST") }
            let type = (request.header("content-type") ?? "").lowercased()
            guard type.hasPrefix("application/x-www-form-urlencoded") else {
                return .json(415, Self.errorJSON("a change is a POST with an application/x-www-form-urlencoded body", exitCode: nil))
            }
            guard let form = FormDecoding.fields(String(decoding: request.body, as: UTF8.self)) else {
                return .json(400, Self.errorJSON("the form could not be read", exitCode: nil))
            }
            switch make(form) {
            case .success(let words): return answer(run(words))
            case .failure(let missing): return .json(400, Self.errorJSON(missing.message, exitCode: 64))
            }
        }
    }

    /// A form without a field the command needs.
    struct MissingField: Error { var message: String }

    /// The changes: route to the command line it runs. Positionals come after `--`, so a child
    /// named "--home" is a name, never an option.
    static let changes: [String: @Sendable ([String: String]) -> Result<[String], MissingField>] = [
        "/api/give": { f in amount("give", f) },
        "/api/take": { f in amount("take", f) },
        "/api/give-all": { f in all("give-all", f) },
        "/api/take-all": { f in all("take-all", f) },
        "/api/undo": { f in .success(["undo"] + (f["id"].map { ["--", $0] } ?? [])) },
        "/api/child/add": { f in fields(f, ["name"]).map { ["child", "add", "--"] + $0 } },
        "/api/child/rename": { f in fields(f, ["child", "name"]).map { ["child", "rename", "--"] + $0 } },
        "/api/child/archive": { f in fields(f, ["child"]).map { ["child", "archive", "--"] + $0 } },
        "/api/child/restore": { f in fields(f, ["child"]).map { ["child", "restore", "--"] + $0 } },
        "/api/child/merge": { f in fields(f, ["from", "into"]).map { ["child", "merge", "--"] + $0 } },
        "/api/quick": { f in fields(f, ["amounts"]).map { ["quick", "set", "--"] + $0[0].split(separator: " ").map(String.init) } },
        "/api/allowance/set": { f in
            fields(f, ["child", "amount", "every"]).map { v in
                ["allowance", "set", "--every", v[2]] + (f["on"].map { ["--on", $0] } ?? []) + (f["note"].map { ["--note", $0] } ?? []) + ["--", v[0], v[1]]
            }
        },
        "/api/allowance/stop": { f in fields(f, ["child"]).map { ["allowance", "stop", "--"] + $0 } },
        "/api/household/timezone": { f in fields(f, ["zone"]).map { ["household", "timezone", "--"] + $0 } },
    ]

    static func fields(_ form: [String: String], _ names: [String]) -> Result<[String], MissingField> {
        var values: [String] = []
        for name in names {
            guard let value = form[name] else { return .failure(MissingField(message: "the form needs a field \"\(name)\"")) }
            values.append(value)
        }
        return .success(values)
    }

    static func amount(_ command: String, _ form: [String: String]) -> Result<[String], MissingField> {
        fields(form, ["child", "amount"]).map { [command, "--note", form["note"] ?? "", "--"] + $0 }
    }

    static func all(_ command: String, _ form: [String: String]) -> Result<[String], MissingField> {
        fields(form, ["amount"]).map { [command, "--note", form["note"] ?? "", "--"] + $0 }
    }

    /// The parts of ``state(ifNoneMatch:)``: key, command. A part whose command fails is null
    /// (`undo` fails when there is nothing to undo); the first part must succeed.
    static let stateParts: [(String, [String])] = [
        ("children", ["children", "--all"]), ("status", ["status"]), ("quick", ["quick", "show"]),
        ("undo", ["undo", "--dry-run"]), ("members", ["members"]), ("history", ["history", "--limit", "200"]),
        ("page", ["ui", "--address-only"]), ("allowances", ["allowance", "list"]), ("conflicts", ["conflicts"]),
        ("account", ["account", "show"]),
        ("zone", ["household", "timezone"]),
    ]

    /// Everything the home screen shows, with an ETag so a poll that finds nothing new costs one 304.
    func state(ifNoneMatch: String?) -> HTTPResponse {
        var text = "{"
        for (i, (key, words)) in Self.stateParts.enumerated() {
            let outcome = run(words)
            if outcome.exitCode != 0 && i == 0 { return answer(outcome) }
            text += (i > 0 ? "," : "") + Self.quote(key) + ":" + (outcome.exitCode == 0 && !outcome.json.isEmpty ? outcome.json : "null")
        }
        text += "}"
        let tag = "\"" + SHA256.hash(Array(text.utf8)).prefix(12).map { String($0, radix: 16).leftPadded(to: 2) }.joined() + "\""
        if ifNoneMatch == tag { return HTTPResponse(status: 304, headers: [("ETag", tag), ("Cache-Control", "no-cache")]) }
        return .json(200, text, headers: [("ETag", tag)])
    }

    /// The command's answer: `{"result":…,"message":…}` with 200, or its error with the status
    /// its exit code maps to (``status(forExitCode:)``).
    func answer(_ outcome: CommandOutcome) -> HTTPResponse {
        guard outcome.exitCode == 0 else {
            return .json(Self.status(forExitCode: outcome.exitCode), Self.errorJSON(outcome.error, exitCode: outcome.exitCode))
        }
        let result = outcome.json.isEmpty ? "null" : outcome.json
        return .json(200, "{\"result\":\(result),\"message\":\(Self.quote(outcome.message))}")
    }

    /// The HTTP status for a CLI exit code: 64 (usage) and 65 (bad amount, unknown child, a ledger
    /// rule) are 400; 77 (attention required, revoked) is 423; 69 and 75 (try again) are 503;
    /// anything else is 500.
    public static func status(forExitCode code: Int32) -> Int {
        switch code {
        case 0: 200
        case 64, 65: 400
        case 77: 423
        case 69, 75: 503
        default: 500
        }
    }

    func methodNotAllowed(_ allowed: String) -> HTTPResponse {
        var r = HTTPResponse.json(405, Self.errorJSON("use \(allowed) here", exitCode: nil))
        r.headers.append(("Allow", allowed == "GET" ? "GET, HEAD" : allowed))
        return r
    }

    /// `{"error":{"message":…,"exitCode":…}}`.
    public static func errorJSON(_ message: String, exitCode: Int32?) -> String {
        "{\"error\":{\"message\":\(quote(message)),\"exitCode\":\(exitCode.map(String.init) ?? "null")}}"
    }

    /// A JSON string literal.
    static func quote(_ s: String) -> String { TextEscaping.jsonString(s) }
}

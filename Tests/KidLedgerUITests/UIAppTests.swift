import Synchronization
import KidLedgerDomain
import Testing
@testable import KidLedgerUI
import KidLedgerTestSupport

/// The gate and the routes with a recording runner: what reaches a command, and what never does.
@Suite struct UIAppTests {
    static let token = String(repeating: "ab", count: 32)
    static let port: UInt16 = 4718
    static let now: Int64 = 1_800_000_000_000
    static let rotated = String(repeating: "ef", count: 32)

    final class Recorder: Sendable {
        let calls = Mutex<[[String]]>([])
        let outcome: CommandOutcome
        init(_ outcome: CommandOutcome = CommandOutcome(exitCode: 0, json: "{\"ok\":true}", message: "Done.")) { self.outcome = outcome }
        var recorded: [[String]] { calls.withLock { $0 } }
        func app() -> UIApp {
            UIApp(gate: UIGate(key: UIAppTests.token, port: UIAppTests.port, clock: FixedClock(millis: UIAppTests.now)) { UIAppTests.rotated }) { words in
                self.calls.withLock { $0.append(words) }
                return self.outcome
            }
        }
    }

    func request(_ method: String = "GET", _ target: String, headers: [String: String] = [:], body: String = "") -> HTTPRequest {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: \(headers["Host"] ?? "127.0.0.1:\(Self.port)")\r\n"
        for (k, v) in headers.sorted(by: { $0.key < $1.key }) where k != "Host" { text += "\(k): \(v)\r\n" }
        text += "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        guard case .complete(let r, _) = HTTPRequestParser.parse(Array(text.utf8)) else { preconditionFailure("test request") }
        return r
    }

    static let cookieName = UIGate.cookiePrefix + String(port)
    var cookie: [String: String] { ["Cookie": "x=1; \(UIGate.cookiePrefix)1=other; \(Self.cookieName)=\(SignIn.cookie(key: Self.token))"] }

    func post(_ path: String, _ body: String, extra: [String: String] = [:]) -> HTTPRequest {
        request("POST", path, headers: ["X-KidLedger-Token": SignIn.changeToken(key: Self.token), "Content-Type": "application/x-www-form-urlencoded",
                                        "Origin": "http://127.0.0.1:\(Self.port)"].merging(extra) { $1 }, body: body)
    }

    @Test func aOneTimeCodeSetsAStrictHttpOnlyCookieForMonthsAndLeavesTheAddress() {
        let app = Recorder().app()
        let r = app.respond(to: request("GET", "/?code=" + SignIn.code(key: Self.token, nowMillis: Self.now)))
        #expect(r.status == 303)
        #expect(r.header("Location") == "/")
        #expect(r.header("Set-Cookie") == "\(Self.cookieName)=\(SignIn.cookie(key: Self.token)); Max-Age=15552000; HttpOnly; SameSite=Strict; Path=/")
        // Neither the key nor the code is in the cookie or the answer.
        #expect(!(r.header("Set-Cookie") ?? "").contains(Self.token))
        #expect(app.respond(to: request("GET", "/", headers: cookie)).status == 200)
    }

    @Test func aCodeWorksOnceAndNoKeyInTheAddressSignsIn() {
        let recorder = Recorder()
        let app = recorder.app()
        let code = SignIn.code(key: Self.token, nowMillis: Self.now)
        #expect(app.respond(to: request("GET", "/?code=" + code)).status == 303)
        let again = app.respond(to: request("GET", "/?code=" + code))
        #expect(again.status == 401)
        #expect(again.header("Set-Cookie") == nil)
        #expect(String(decoding: again.body, as: UTF8.self).contains("used or has expired"))
        // The long-lived key itself is no sign-in address.
        #expect(app.respond(to: request("GET", "/?code=" + Self.token)).status == 401)
        #expect(app.respond(to: request("GET", "/?token=" + Self.token)).status == 401)
        // A code under another key, or with one changed digit, is refused.
        #expect(app.respond(to: request("GET", "/?code=" + SignIn.code(key: Self.rotated, nowMillis: Self.now))).status == 401)
        var forged = Array(SignIn.code(key: Self.token, nowMillis: Self.now))
        forged[forged.count - 1] = forged.last == "0" ? "1" : "0"
        #expect(app.respond(to: request("GET", "/?code=" + String(forged))).status == 401)
        #expect(recorder.recorded.isEmpty)
    }

    /// The clock is injected: a code is good from when it is issued for ``SignIn/codeLifetimeMillis``,
    /// never when issued before the server started or in the future.
    @Test func aCodeExpiresAfterAMinute() {
        func gate(at millis: Int64, startedAt start: Int64 = UIAppTests.now) -> (UIGate, (Int64) -> Void) {
            let clock = TestClock(start)
            let g = UIGate(key: Self.token, port: Self.port, clock: clock) { Self.rotated }
            clock.millis = millis
            return (g, { clock.millis = $0 })
        }
        let code = SignIn.code(key: Self.token, nowMillis: Self.now)
        func status(_ g: UIGate) -> Int? {
            if case .answer(let r) = g.check(request("GET", "/?code=" + code)) { return r.status }
            return nil
        }
        #expect(status(gate(at: Self.now + SignIn.codeLifetimeMillis).0) == 303)
        #expect(status(gate(at: Self.now + SignIn.codeLifetimeMillis + 1).0) == 401)
        #expect(status(gate(at: Self.now - 5_000).0) == 401)
        // Issued before this server started (spent, perhaps, on the one before it).
        #expect(status(gate(at: Self.now + 10, startedAt: Self.now + 1).0) == 401)
    }

    @Test func signOutClearsThisBrowsersCookieAndSignOutAllReplacesTheKey() {
        let recorder = Recorder()
        let app = recorder.app()
        let one = app.respond(to: post("/api/sign-out", "", extra: cookie))
        #expect(one.status == 200)
        #expect(one.header("Set-Cookie") == "\(Self.cookieName)=; Max-Age=0; HttpOnly; SameSite=Strict; Path=/")
        // Without the change token nothing is signed out.
        var bare = post("/api/sign-out-all", "", extra: cookie)
        bare.headers[UIGate.tokenHeader] = nil
        #expect(app.respond(to: bare).status == 403)
        #expect(app.respond(to: request("GET", "/", headers: cookie)).status == 200)
        let all = app.respond(to: post("/api/sign-out-all", "", extra: cookie))
        #expect(all.status == 200)
        #expect(app.gate.key == Self.rotated)
        // Every old cookie, change token and unspent code is worthless; the new key's work.
        #expect(app.respond(to: request("GET", "/", headers: cookie)).status == 401)
        #expect(app.respond(to: post("/api/give", "child=Ava&amount=1", extra: cookie)).status == 403)
        #expect(app.respond(to: request("GET", "/?code=" + SignIn.code(key: Self.token, nowMillis: Self.now))).status == 401)
        #expect(app.respond(to: request("GET", "/?code=" + SignIn.code(key: Self.rotated, nowMillis: Self.now))).status == 303)
        #expect(app.respond(to: request("GET", "/", headers: ["Cookie": "\(Self.cookieName)=\(SignIn.cookie(key: Self.rotated))"])).status == 200)
        #expect(recorder.recorded.isEmpty)
    }

    @Test func theCookieOpensThePageWithTheTokenForItsPosts() {
        let r = Recorder().app().respond(to: request("GET", "/", headers: cookie))
        #expect(r.status == 200)
        #expect(String(decoding: r.body, as: UTF8.self).contains("content=\"\(SignIn.changeToken(key: Self.token))\""))
        #expect(!String(decoding: r.body, as: UTF8.self).contains(Self.token))
        #expect(r.header("Content-Type") == "text/html; charset=utf-8")
        #expect(Recorder().app().respond(to: request("GET", "/app.js", headers: cookie)).status == 200)
    }

    @Test(arguments: ["evil.example:4718", "127.0.0.1:9999", "localhost", "attacker.127.0.0.1.nip.io:4718"])
    func aForeignHostIs403(host: String) {
        let recorder = Recorder()
        var headers = cookie
        headers["Host"] = host
        #expect(recorder.app().respond(to: request("GET", "/api/state", headers: headers)).status == 403)
        #expect(recorder.app().respond(to: post("/api/give", "child=Ava&amount=1", extra: ["Host": host])).status == 403)
        #expect(recorder.recorded.isEmpty)
    }

    @Test func localhostAndIPv6LoopbackAreAccepted() {
        for host in ["localhost:4718", "[::1]:4718", "LOCALHOST:4718"] {
            var headers = cookie
            headers["Host"] = host
            #expect(Recorder().app().respond(to: request("GET", "/", headers: headers)).status == 200, "\(host)")
        }
    }

    @Test func aForeignOriginOrACrossSiteFetchChangesNothing() {
        let recorder = Recorder()
        let app = recorder.app()
        let r = app.respond(to: post("/api/give", "child=Ava&amount=1", extra: ["Origin": "http://evil.example"]))
        #expect(r.status == 403)
        #expect(String(decoding: r.body, as: UTF8.self).contains("another site"))
        #expect(app.respond(to: post("/api/give", "child=Ava&amount=1", extra: ["Origin": "null"])).status == 403)
        #expect(app.respond(to: post("/api/give", "child=Ava&amount=1", extra: ["Sec-Fetch-Site": "cross-site"])).status == 403)
        #expect(recorder.recorded.isEmpty)
    }

    @Test func aPostWithoutTheTokenHeaderIs403EvenWithTheCookie() {
        let recorder = Recorder()
        let app = recorder.app()
        var r = post("/api/give", "child=Ava&amount=1", extra: cookie)
        r.headers[UIGate.tokenHeader] = nil
        #expect(app.respond(to: r).status == 403)
        r.headers[UIGate.tokenHeader] = String(repeating: "ab", count: 31) + "ac"
        #expect(app.respond(to: r).status == 403)
        #expect(recorder.recorded.isEmpty)
    }

    @Test func aChangeByGetIs405AndAReadByPostIs405() {
        let recorder = Recorder()
        let app = recorder.app()
        #expect(app.respond(to: request("GET", "/api/give?child=Ava&amount=1", headers: cookie)).status == 405)
        #expect(app.respond(to: post("/api/state", "")).status == 405)
        #expect(recorder.recorded.isEmpty)
    }

    @Test func aChangeNeedsAFormBodyAndItsFields() {
        let recorder = Recorder()
        let app = recorder.app()
        #expect(app.respond(to: post("/api/give", "{}", extra: ["Content-Type": "application/json"])).status == 415)
        let missing = app.respond(to: post("/api/give", "child=Ava"))
        #expect(missing.status == 400)
        #expect(String(decoding: missing.body, as: UTF8.self).contains("amount"))
        #expect(app.respond(to: post("/api/give", "child=%zz")).status == 400)
        #expect(recorder.recorded.isEmpty)
    }

    @Test func namesAndAmountsArePositionalsAfterDoubleDash() {
        let recorder = Recorder()
        let app = recorder.app()
        #expect(app.respond(to: post("/api/give", "child=--home&amount=-5&note=--json")).status == 200)
        #expect(app.respond(to: post("/api/child/rename", "child=Ava&name=--help")).status == 200)
        #expect(app.respond(to: post("/api/quick", "amounts=0.05+0.10+quarter")).status == 200)
        #expect(app.respond(to: post("/api/undo", "")).status == 200)
        #expect(app.respond(to: post("/api/undo", "id=--mine")).status == 200)
        #expect(app.respond(to: request("GET", "/api/undo-preview?id=--mine", headers: cookie)).status == 200)
        #expect(app.respond(to: request("GET", "/api/undo-preview", headers: cookie)).status == 200)
        #expect(recorder.recorded == [["give", "--note", "--json", "--", "--home", "-5"], ["child", "rename", "--", "Ava", "--help"],
                                      ["quick", "set", "--", "0.05", "0.10", "quarter"], ["undo"], ["undo", "--", "--mine"],
                                      ["undo", "--dry-run", "--", "--mine"], ["undo", "--dry-run"]])
    }

    /// The merge route runs `child merge -- FROM INTO` (the page sends ids); its gates as any change.
    @Test func theMergeRouteRunsChildMergeAfterDoubleDashBehindTheGates() {
        let recorder = Recorder()
        let app = recorder.app()
        #expect(app.respond(to: post("/api/child/merge", "from=--home&into=abcdef01")).status == 200)
        #expect(app.respond(to: post("/api/child/merge", "from=abcdef01")).status == 400)
        #expect(app.respond(to: request("GET", "/api/child/merge?from=a&into=b", headers: cookie)).status == 405)
        var noToken = post("/api/child/merge", "from=a&into=b", extra: cookie)
        noToken.headers[UIGate.tokenHeader] = nil
        #expect(app.respond(to: noToken).status == 403)
        #expect(app.respond(to: post("/api/child/merge", "from=a&into=b", extra: ["Origin": "http://evil.example"])).status == 403)
        #expect(recorder.recorded == [["child", "merge", "--", "--home", "abcdef01"]])
    }

    /// The relay's routes (issue 44): `relay add -- CODE` and `relay remove -- FINGERPRINT`, values
    /// after `--`; a form without its field is refused (400) and runs nothing; each behind the gates.
    @Test func theRelayRoutesRunRelayAddAndRemoveAfterDoubleDash() {
        let recorder = Recorder()
        let app = recorder.app()
        #expect(app.respond(to: post("/api/relay/add", "code=KLR1-AbCd_eF")).status == 200)
        #expect(app.respond(to: post("/api/relay/add", "code=--address")).status == 200)
        #expect(app.respond(to: post("/api/relay/remove", "relay=1a2b-3c4d-5e6f-7a8b")).status == 200)
        let missing = app.respond(to: post("/api/relay/add", "relay=KLR1-x"))
        #expect(missing.status == 400 && String(decoding: missing.body, as: UTF8.self).contains("needs a field \\\"code\\\""))
        let noRelay = app.respond(to: post("/api/relay/remove", ""))
        #expect(noRelay.status == 400 && String(decoding: noRelay.body, as: UTF8.self).contains("needs a field \\\"relay\\\""))
        #expect(app.respond(to: request("GET", "/api/relay/remove?relay=x", headers: cookie)).status == 405)
        #expect(app.respond(to: post("/api/relay/remove", "relay=x", extra: ["Origin": "http://evil.example"])).status == 403)
        #expect(recorder.recorded == [["relay", "add", "--", "KLR1-AbCd_eF"], ["relay", "add", "--", "--address"],
                                      ["relay", "remove", "--", "1a2b-3c4d-5e6f-7a8b"]])
    }

    /// The CLI's refusals of a relay reach the page with their status: not the owner (77) is 423,
    /// a bad code (65) 400, an unreachable relay (69) 503, each with the CLI's message.
    @Test(arguments: [(Int32(77), 423, "only the household's owner can add a relay"), (65, 400, "that is not a relay code (KLR1-…)"),
                      (69, 503, "the relay at 127.0.0.1:9 is unreachable")])
    func aRelayRefusalKeepsTheCLIsMessage(code: Int32, status: Int, message: String) {
        let recorder = Recorder(CommandOutcome(exitCode: code, json: "", error: message))
        let r = recorder.app().respond(to: post("/api/relay/add", "code=KLR1-x"))
        #expect(r.status == status)
        #expect(String(decoding: r.body, as: UTF8.self) == UIApp.errorJSON(message, exitCode: code))
    }

    @Test(arguments: [(Int32(64), 400), (65, 400), (77, 423), (69, 503), (75, 503), (70, 500), (74, 500)])
    func exitCodesMapToStatuses(code: Int32, status: Int) {
        let recorder = Recorder(CommandOutcome(exitCode: code, json: "", error: "amount must be positive"))
        let r = recorder.app().respond(to: post("/api/give", "child=Ava&amount=-1"))
        #expect(r.status == status)
        #expect(String(decoding: r.body, as: UTF8.self) == "{\"error\":{\"message\":\"amount must be positive\",\"exitCode\":\(code)}}")
    }

    @Test func theStateHasAnETagAndAnUnchangedPollIs304() {
        let recorder = Recorder()
        let app = recorder.app()
        let first = app.respond(to: request("GET", "/api/state", headers: cookie))
        #expect(first.status == 200)
        let tag = try! #require(first.header("ETag"))
        #expect(String(decoding: first.body, as: UTF8.self).hasPrefix("{\"children\":{\"ok\":true},\"status\":"))
        var headers = cookie
        headers["If-None-Match"] = tag
        let second = app.respond(to: request("GET", "/api/state", headers: headers))
        #expect(second.status == 304)
        #expect(second.body.isEmpty)
    }

    @Test func theUndoPreviewIsARead() {
        let recorder = Recorder()
        let app = recorder.app()
        #expect(app.respond(to: post("/api/undo-preview", "")).status == 405)
        #expect(app.respond(to: request("GET", "/api/undo-preview")).status == 401)
        #expect(recorder.recorded.isEmpty)
    }

    /// Everything is in the binary: no address of another server, no web font, no imported sheet.
    @Test func thePageLoadsNothingFromElsewhere() {
        let all = PageAssets.html(token: Self.token) + PageAssets.style + PageAssets.script
        let addresses = all.split(separator: "\"").filter { $0.hasPrefix("http:") || $0.hasPrefix("https:") || $0.hasPrefix("//") }
        #expect(addresses == ["http://www.w3.org/2000/svg"])
        for banned in ["@import", "@font-face", "url(", "<iframe", "eval(", "innerHTML"] { #expect(!all.contains(banned), "\(banned)") }
    }

    /// Labelled for screen readers: every input of the HTML is inside a label, every button has words.
    @Test func theShellsControlsAreLabelled() {
        let html = PageAssets.html(token: Self.token)
        var label = 0
        var i = html.startIndex
        while let open = html[i...].firstRange(of: "<") {
            let tag = html[open.upperBound...].prefix { $0 != " " && $0 != ">" }
            if tag == "label" { label += 1 } else if tag == "/label" { label -= 1 }
            if tag == "input" || tag == "select" {
                let named = label > 0 || html[open.upperBound...].prefix(200).contains("aria-label")
                #expect(named, "\(html[open.lowerBound...].prefix(80))")
            }
            if tag == "button", let end = html[open.upperBound...].firstRange(of: "</button>") {
                let inner = html[open.upperBound..<end.lowerBound].drop { $0 != ">" }.dropFirst()
                let blank = inner.allSatisfy { $0.isWhitespace }
                #expect(!blank, "\(html[open.lowerBound...].prefix(80))")
            }
            i = open.upperBound
        }
    }

    @Test func unknownRoutesAre404() {
        #expect(Recorder().app().respond(to: request("GET", "/api/nope", headers: cookie)).status == 404)
        #expect(Recorder().app().respond(to: request("GET", "/etc/passwd", headers: cookie)).status == 404)
    }
}


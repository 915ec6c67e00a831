import Foundation
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerTestSupport
import KidLedgerCLITestSupport
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerReplica
@testable import KidLedgerUI
@testable import KidLedgerDaemon

/// The page's commands and the real API over a real home: the CLI's messages, statuses, and that
/// refused requests change nothing.
@Suite struct PageCommandTests {
    func family() -> PageHome {
        let h = PageHome()
        #expect(h.run("init", "The Smiths").code == 0)
        #expect(h.run("child", "add", "Ava").code == 0)
        return h
    }

    /// A read of `target` with the page's cookie, as the page's script makes it.
    func get(_ app: UIApp, _ target: String) -> HTTPResponse {
        let text = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:4718\r\nCookie: \(app.gate.cookieName)=\(app.gate.cookieValue)\r\n\r\n"
        guard case .complete(let request, _) = HTTPRequestParser.parse(Array(text.utf8)) else { preconditionFailure("request") }
        return app.respond(to: request)
    }

    func post(_ app: UIApp, _ path: String, _ body: String, origin: String = "http://127.0.0.1:4718", token: String? = nil) -> HTTPResponse {
        let text = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:4718\r\nOrigin: \(origin)\r\nX-KidLedger-Token: \(token ?? app.gate.changeToken)\r\n"
            + "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
        guard case .complete(let r, _) = HTTPRequestParser.parse(Array(text.utf8)) else { preconditionFailure("request") }
        return app.respond(to: r)
    }

    func body(_ r: HTTPResponse) -> String { String(decoding: r.body, as: UTF8.self) }

    @Test func quickAmountsDefaultSetAndRefused() {
        let h = family()
        #expect(h.run("quick", "show").stdout == "$0.05 $0.10 $0.15 $0.20 $0.25 $0.50\n")
        #expect(h.run("quick", "show", "--json").stdout == "{\"quickAmountsCents\":[5,10,15,20,25,50],\"confirmAboveCents\":100000}\n")
        #expect(h.run("quick", "set", "0.05", "quarter", "1").stdout == "Quick amounts on this device: $0.05 $0.25 $1.00\n")
        #expect(h.run("quick", "show", "--json").stdout == "{\"quickAmountsCents\":[5,25,100],\"confirmAboveCents\":100000}\n")
        let twice = h.run("quick", "set", "0.25", "quarter")
        #expect(twice.code == 65)
        #expect(twice.stderr == "kidledger: $0.25 is given twice; each quick amount once\n")
        #expect(h.run("quick", "set", "1", "2", "3", "4", "5", "6", "7").code == 65)
        #expect(h.run("quick", "set", "0.001").code == 65)
        #expect(h.run("quick", "set", "--", "-1").code == 65)
        #expect(h.run("quick", "show", "--json").stdout == "{\"quickAmountsCents\":[5,25,100],\"confirmAboveCents\":100000}\n")
    }

    @Test func undoDryRunNamesWhatAndWhoseAndChangesNothing() {
        let h = family()
        #expect(h.run("undo", "--dry-run").code == 65)
        h.run("give", "Ava", "1.25", "--note", "chores")
        let digest = h.run("digest").stdout
        let preview = h.run("undo", "--dry-run")
        #expect(preview.code == 0)
        #expect(preview.stdout.hasPrefix("Undo would reverse +$1.25 for Ava ("))
        #expect(preview.stdout.contains("made by mom ("))
        #expect(h.run("undo", "--dry-run", "--json").stdout.hasPrefix("{\"wouldUndo\":{\"transaction\":{"))
        #expect(h.run("digest").stdout == digest)
        #expect(h.run("undo").stdout.hasPrefix("Undid +$1.25 for Ava"))
        #expect(h.run("undo", "--dry-run").code == 65)
    }

    @Test func uiPrintsAOneTimeAddressAndTheKeyStaysInAFileOnlyTheUserReads() throws {
        let h = family()
        // The page server first: it takes no code issued before it started.
        let app = try h.app()
        let r = h.run("ui")
        #expect(r.code == 0)
        let token = try TokenFile.loadOrCreate(home: h.home)
        #expect(r.stdout.hasPrefix("http://127.0.0.1:4718/?code="))
        #expect(!r.stdout.contains(token))
        #expect(r.stderr.contains("not being served now"))
        let attributes = try FileManager.default.attributesOfItem(atPath: h.home + "/ui-token")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        // Each address is new; each signs a browser in once.
        let second = h.run("ui").stdout
        #expect(second != r.stdout)
        for url in [r.stdout, second] {
            let target = String(url.dropFirst("http://127.0.0.1:4718".count).dropLast())
            #expect(get(app, target).status == 303)
            let again = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:4718\r\n\r\n"
            guard case .complete(let request, _) = HTTPRequestParser.parse(Array(again.utf8)) else { preconditionFailure("request") }
            #expect(app.respond(to: request).status == 401)
        }
        #expect(h.run("ui", "--address-only").stdout == "http://127.0.0.1:4718/\n")
    }

    @Test func signOutEveryBrowserReplacesTheKeyFile() throws {
        let h = family()
        let app = try h.app()
        let before = try TokenFile.loadOrCreate(home: h.home)
        #expect(post(app, "/api/sign-out-all", "").status == 200)
        let after = try TokenFile.loadOrCreate(home: h.home)
        #expect(after != before && app.gate.key == after)
        let attributes = try FileManager.default.attributesOfItem(atPath: h.home + "/ui-token")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        // `ui` signs in with the new key at once.
        let target = String(h.run("ui").stdout.dropFirst("http://127.0.0.1:4718".count).dropLast())
        #expect(get(app, target).status == 303)
    }

    /// No daemon and no systemd user manager to start one (here: no systemctl on PATH): `open`
    /// says what to run instead, exit 69, and starts nothing.
    @Test func openWithoutADaemonOrSystemdSaysToRunServe() {
        let h = family()
        let empty = h.ledger.file("empty-path")
        try? FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let open = h.ledger.run(["open"], adding: ["PATH": empty])
        #expect(open.code == 69)
        #expect(open.stderr.contains("systemctl was not found on PATH") && open.stderr.contains("kidledger serve"), "\(open.stderr)")
        #expect(DaemonLock.holder(home: h.home) == nil)
    }

    @Test func serveRefusesAPageOffLoopbackWithoutTheFlag() {
        let h = family()
        let r = h.run("serve", "--listen", "127.0.0.1:0", "--ui", "0.0.0.0:0")
        #expect(r.code == 64)
        #expect(r.stderr.contains("not a loopback address"))
    }

    @Test func aGiveThroughTheAPIHasTheCLIsMessageAndShape() throws {
        let h = family()
        let app = try h.app()
        let r = post(app, "/api/give", "child=ava&amount=1.25&note=chores")
        #expect(r.status == 200)
        #expect(body(r).hasSuffix(",\"message\":\"Gave $1.25 to Ava. Balance: $1.25\"}"))
        #expect(body(r).hasPrefix("{\"result\":{\"transaction\":{\"id\":"))
        #expect(h.run("balance", "Ava").stdout == "Ava: $1.25\n")
    }

    @Test(arguments: [("amount=1.005", "amount has a fraction of a cent: use at most 2 decimal places"), ("amount=-5", nil), ("amount=0", nil)])
    func aBadAmountIs400WithTheCLIsMessageAndChangesNothing(form: String, message: String?) throws {
        let h = family()
        let app = try h.app()
        let digest = h.run("digest").stdout
        let r = post(app, "/api/give", "child=Ava&" + form)
        #expect(r.status == 400)
        let cli = h.run("give", "--", "Ava", String(form.dropFirst("amount=".count)))
        #expect(cli.code == 65)
        #expect(body(r) == "{\"error\":{\"message\":\(UIApp.quote(String(cli.stderr.dropFirst("kidledger: ".count).dropLast()))),\"exitCode\":65}}")
        if let message { #expect(cli.stderr == "kidledger: \(message)\n") }
        #expect(h.run("digest").stdout == digest)
    }

    /// The relay's routes over a real home with no relay: a code that is not one, an address, and a
    /// removal are refused with the CLI's messages (400), nothing changes, and the state names no
    /// relay (the page reads the relays from `status`, which lists none).
    @Test func relayRoutesRefuseWithTheCLIsMessagesAndChangeNothing() throws {
        let h = family()
        let app = try h.app()
        let digest = h.run("digest").stdout
        let notACode = post(app, "/api/relay/add", "code=hello")
        #expect(notACode.status == 400 && body(notACode).contains("that is not a relay code (KLR1-…)"), "\(body(notACode))")
        let address = post(app, "/api/relay/add", "code=127.0.0.1%3A9")
        #expect(address.status == 400 && body(address).contains("not an address"), "\(body(address))")
        let none = post(app, "/api/relay/remove", "relay=1a2b")
        #expect(none.status == 400 && body(none).contains("no relay is granted"), "\(body(none))")
        #expect(h.run("digest").stdout == digest)
        let state = body(get(app, "/api/state"))
        #expect(state.contains("\"zone\":") && !state.contains("\"relay"), "\(state)")
    }

    @Test func anUnknownChildIs400AndAForeignOriginOrAMissingTokenChangesNothing() throws {
        let h = family()
        let app = try h.app()
        let digest = h.run("digest").stdout
        #expect(post(app, "/api/give", "child=Zed&amount=1").status == 400)
        #expect(post(app, "/api/give", "child=Ava&amount=1", origin: "http://evil.example").status == 403)
        #expect(post(app, "/api/give", "child=Ava&amount=1", token: "0").status == 403)
        #expect(post(app, "/api/child/rename", "child=Ava&name=", origin: "http://evil.example").status == 403)
        #expect(h.run("digest").stdout == digest)
    }

    @Test func attentionRequiredIs423WithTheCLIsMessageAndChangesNothing() throws {
        let h = family()
        let app = try h.app()
        #expect(h.run("account", "switch", "other", "--create").code == 0)
        let digest = h.run("digest").stdout
        let r = post(app, "/api/give", "child=Ava&amount=1")
        #expect(r.status == 423)
        let cli = h.run("give", "Ava", "1")
        #expect(cli.code == 77)
        #expect(body(r) == "{\"error\":{\"message\":\(UIApp.quote(String(cli.stderr.dropFirst("kidledger: ".count).dropLast()))),\"exitCode\":77}}")
        #expect(body(r).contains("attention required: "))
        #expect(h.run("digest").stdout == digest)
        #expect(h.run("account", "switch", "default").code == 0)
        #expect(post(app, "/api/give", "child=Ava&amount=1").status == 200)
    }

    @Test func renameUndoQuickAndTheStateThroughTheAPI() throws {
        let h = family()
        let app = try h.app()
        #expect(post(app, "/api/give", "child=Ava&amount=quarter").status == 200)
        #expect(post(app, "/api/child/rename", "child=Ava&name=Ava+Rose").status == 200)
        #expect(post(app, "/api/quick", "amounts=0.10+1").status == 200)
        let undo = post(app, "/api/undo", "")
        #expect(undo.status == 200)
        #expect(body(undo).contains("\"message\":\"Undid +$0.25 for Ava Rose"))
        #expect(post(app, "/api/child/add", "name=Ben").status == 200)
        #expect(post(app, "/api/give-all", "amount=1").status == 200)
        #expect(post(app, "/api/child/archive", "child=Ben").status == 200)
        let text = "GET /api/state HTTP/1.1\r\nHost: 127.0.0.1:4718\r\nCookie: \(app.gate.cookieName)=\(app.gate.cookieValue)\r\n\r\n"
        guard case .complete(let request, _) = HTTPRequestParser.parse(Array(text.utf8)) else { preconditionFailure("request") }
        let state = body(app.respond(to: request))
        #expect(state.contains("\"name\":\"Ava Rose\""))
        #expect(state.contains("\"quick\":{\"quickAmountsCents\":[10,100],\"confirmAboveCents\":100000}"))
        #expect(state.contains("\"status\":{\"state\":\"alone\""))
        #expect(state.contains("\"zone\":{\"timeZone\":"), "the household's time zone for the page")
        #expect(state.contains("\"archived\":true"))
        #expect(h.run("balance", "Ava Rose").stdout == "Ava Rose: $1.00\n")
    }
}

/// The allowance schedules through the page's API (issue 24 point 3): set, shown in the state, stopped.
@Suite struct PageAllowanceTests {
    @Test func setShownAndStoppedThroughTheAPI() throws {
        let page = PageCommandTests()
        let h = page.family()
        let app = try h.app()
        let set = page.post(app, "/api/allowance/set", "child=Ava&amount=5&every=week&on=monday")
        #expect(set.status == 200, "\(page.body(set))")
        #expect(page.body(set).contains("\"message\":\"Ava's allowance: $5.00"), "\(page.body(set))")
        let text = "GET /api/state HTTP/1.1\r\nHost: 127.0.0.1:4718\r\nCookie: \(app.gate.cookieName)=\(app.gate.cookieValue)\r\n\r\n"
        guard case .complete(let request, _) = HTTPRequestParser.parse(Array(text.utf8)) else { preconditionFailure("request") }
        let state = page.body(app.respond(to: request))
        #expect(state.contains("\"allowances\":{\"schedules\":[{"), "\(state)")
        #expect(state.contains("\"amountCents\":500") && state.contains("\"every\":\"week\""), "\(state)")
        // The CLI's rules and messages: a bad day is a 400 with the CLI's words, and changes nothing.
        let bad = page.post(app, "/api/allowance/set", "child=Ava&amount=5&every=month&on=31")
        #expect(bad.status == 400 && page.body(bad).contains("not every month has a day 31"), "\(page.body(bad))")
        #expect(page.post(app, "/api/allowance/set", "child=Ava&amount=5").status == 400)
        #expect(page.post(app, "/api/allowance/stop", "child=Ava").status == 200)
        #expect(h.run("allowance", "list").stdout.contains("Ava"))
        #expect(page.post(app, "/api/allowance/stop", "child=Ava").status == 400)
    }
}

/// The token file: made once with mode 0600, the same token after, refused when others can read it.
@Suite struct TokenFileTests {
    @Test func madeOnceReadableByTheUserOnly() throws {
        let directory = TemporaryDirectory(prefix: "kidledger-token")
        defer { directory.remove() }
        let token = try TokenFile.loadOrCreate(home: directory.path)
        #expect(token.count == 64 && token.allSatisfy(\.isHexDigit))
        #expect(try TokenFile.loadOrCreate(home: directory.path) == token)
        let path = directory.path + "/" + TokenFile.fileName
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) == 0o600)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        #expect(throws: TokenFileError.self) { try TokenFile.loadOrCreate(home: directory.path) }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        try "not a token\n".write(toFile: path, atomically: false, encoding: .utf8)
        #expect(throws: TokenFileError.self) { try TokenFile.loadOrCreate(home: directory.path) }
    }
}

/// The page's gaps of issue 24 closed: undo of what the preview showed, the take's warning, the
/// conflicts and same names in the state.
@Suite struct PageIssue24Tests {
    let page = PageCommandTests()

    /// The undo bar undoes what it showed (`undo ID`), also when a newer entry arrived since (from
    /// the other laptop); a bad id is the CLI's refusal and changes nothing.
    @Test func undoReversesWhatThePreviewShowedEvenAfterANewerEntry() throws {
        let h = page.family()
        let app = try h.app()
        #expect(page.post(app, "/api/give", "child=Ava&amount=1.25").status == 200)
        let preview = page.get(app, "/api/undo-preview")
        #expect(preview.status == 200)
        let text = page.body(preview)
        let marker = "{\"result\":{\"wouldUndo\":{\"transaction\":{\"id\":\""
        #expect(text.hasPrefix(marker), "\(text)")
        let id = String(text.dropFirst(marker.count).prefix(36))
        #expect(page.body(page.get(app, "/api/undo-preview?id=" + id)) == text)
        #expect(h.run("give", "Ava", "2").code == 0)   // newer: the plain `undo` would reverse this one
        let digest = h.run("digest").stdout
        let bad = page.post(app, "/api/undo", "id=nonsense")
        #expect(bad.status == 400)
        #expect(page.body(bad).contains("is not a transaction id"))
        #expect(h.run("digest").stdout == digest)
        let undo = page.post(app, "/api/undo", "id=" + id)
        #expect(undo.status == 200, "\(page.body(undo))")
        #expect(page.body(undo).contains("\"message\":\"Undid +$1.25 for Ava"))
        #expect(h.run("balance", "Ava").stdout == "Ava: $2.00\n")
        let again = page.post(app, "/api/undo", "id=" + id)
        #expect(again.status == 400)
        #expect(h.run("balance", "Ava").stdout == "Ava: $2.00\n")
    }

    /// A take that leaves a balance below zero is written, and the answer carries the CLI's warning.
    @Test func aTakeBelowZeroCarriesTheCLIsWarning() throws {
        let h = page.family()
        let app = try h.app()
        let r = page.post(app, "/api/take", "child=Ava&amount=1")
        #expect(r.status == 200)
        #expect(page.body(r).contains("\"warnings\":[\"Ava's balance is now negative (-$1.00): Ava owes that much\"]"), "\(page.body(r))")
        let cli = h.run("take", "Ava", "1")
        #expect(cli.stderr == "kidledger: warning: Ava's balance is now negative (-$2.00): Ava owes that much\n")
        let all = page.post(app, "/api/take-all", "amount=0.5")
        #expect(page.body(all).contains("\"warnings\":[\"Ava's balance is now negative (-$2.50): Ava owes that much\"]"), "\(page.body(all))")
    }

    /// The state has the conflicts (`conflicts --json`) and the same-name groups (`children --json`).
    @Test func theStateCarriesConflictsAndSameNames() throws {
        let h = page.family()
        let app = try h.app()
        let state = page.body(page.get(app, "/api/state"))
        #expect(state.contains("\"conflicts\":{\"fieldConflicts\":[],\"transactionConflicts\":0,\"sameIdConflicts\":[]}"), "\(state)")
        #expect(state.contains("\"sameNames\":[]"), "\(state)")
    }
}

/// Same-name children made one on the page (`POST /api/child/merge`): the CLI's `child merge`, by
/// full ids, with its message; refusals with the CLI's message change nothing.
@Suite struct PageChildMergeTests {
    let page = PageCommandTests()

    /// Max on this laptop and max as the other laptop added it while apart ($1.00 and $2.00): their full ids.
    func twoMaxes(_ h: PageHome) throws -> (upper: String, lower: String) {
        #expect(h.run("init", "The Smiths").code == 0)
        #expect(h.run("child", "add", "Max").code == 0)
        let other = RecordID(high: 0xABCD_EF01_0000_4000, low: 0x8000_0000_0000_0001)
        do {
            // Written past this laptop's own check (it refuses a second active "Max"), as a sync would bring it.
            let replica = try Context(home: h.home, json: false, console: BufferConsole(), clock: SystemClock()).openReplicaForChanges()
            defer { (replica.store as? LMDBEnvironment)?.close() }
            try replica.commitLocal { _, hlc in
                ([.createChild(ChildRecord(id: other, createdAtMillis: hlc.millis)),
                  .setField(entity: other, field: .childName, value: .text("max")),
                  .setField(entity: other, field: .childArchived, value: .flag(false)),
                  .setField(entity: other, field: .childSortOrder, value: .integer(5))], ())
            }
        }
        #expect(h.run("give", "Max", "1").code == 0)
        #expect(h.run("give", "max", "2").code == 0)
        let doc = try JSONSerialization.jsonObject(with: Data(h.run("children", "--json").stdout.utf8)) as? [String: Any]
        let list = doc?["children"] as? [[String: Any]] ?? []
        let upper = try #require(list.first { $0["name"] as? String == "Max" }?["id"] as? String)
        #expect(doc?["sameNames"] as? [[String]] == [[upper, other.description]], "\(String(describing: doc))")
        return (upper, other.description)
    }

    @Test func mergedByIdWithTheCLIsMessageTheSumAndNoSameNamesLeft() throws {
        let h = PageHome()
        let (upper, lower) = try twoMaxes(h)
        let app = try h.app()
        let r = page.post(app, "/api/child/merge", "from=\(upper)&into=\(lower)")
        #expect(r.status == 200, "\(page.body(r))")
        #expect(page.body(r).hasSuffix(",\"message\":\"Merged Max (\(upper.prefix(8))) into max (abcdef01). Balance: $3.00\"}"), "\(page.body(r))")
        #expect(page.body(r).hasPrefix("{\"result\":{\"from\":{"), "\(page.body(r))")
        #expect(h.run("children").stdout == "NAME  BALANCE  ID\nmax     $3.00  abcdef01\n")
        #expect(h.run("balance", "max").stdout == "max: $3.00\n")
        let state = page.body(page.get(app, "/api/state"))
        #expect(state.contains("\"sameNames\":[]"), "\(state)")
        #expect(state.contains("\"mergedInto\":\"\(lower)\""), "\(state)")
        // Merged already: the CLI's refusal, nothing changed.
        let digest = h.run("digest").stdout
        let again = page.post(app, "/api/child/merge", "from=\(upper)&into=\(lower)")
        #expect(again.status == 400)
        #expect(page.body(again).contains("Max was merged into max already"), "\(page.body(again))")
        #expect(h.run("digest").stdout == digest)
        // `child unmerge` (the CLI) undoes it: both count on their own again.
        #expect(h.run("child", "unmerge", upper).code == 0)
        #expect(h.run("balance", "Max").stdout == "Max: $1.00\n")
    }

    @Test func aBadOrUnknownChildIs400WithTheCLIsMessageAndChangesNothing() throws {
        let h = PageHome()
        let (upper, lower) = try twoMaxes(h)
        let app = try h.app()
        let digest = h.run("digest").stdout
        for (from, into) in [("Zed", lower), (upper, "0000dead"), (upper, upper), (lower, "ffff")] {
            let r = page.post(app, "/api/child/merge", "from=\(from)&into=\(into)")
            let cli = h.run("child", "merge", "--", from, into)
            #expect(cli.code == 65, "\(cli)")
            #expect(r.status == 400)
            #expect(page.body(r) == "{\"error\":{\"message\":\(UIApp.quote(String(cli.stderr.dropFirst("kidledger: ".count).dropLast()))),\"exitCode\":65}}")
        }
        #expect(page.body(page.post(app, "/api/child/merge", "from=\(upper)&into=\(upper)")).contains("can't merge Max into itself"))
        #expect(page.body(page.post(app, "/api/child/merge", "from=Zed&into=\(lower)")).contains("no child named \\\"Zed\\\""))
        let missing = page.post(app, "/api/child/merge", "from=\(upper)")
        #expect(missing.status == 400 && page.body(missing).contains("the form needs a field \\\"into\\\""), "\(page.body(missing))")
        #expect(h.run("digest").stdout == digest)
        #expect(h.run("children").stdout.contains("note: Max ("))
    }

    @Test func withoutTheTokenOrByGetNothingIsMerged() throws {
        let h = PageHome()
        let (upper, lower) = try twoMaxes(h)
        let app = try h.app()
        let digest = h.run("digest").stdout
        #expect(page.post(app, "/api/child/merge", "from=\(upper)&into=\(lower)", token: "0").status == 403)
        #expect(page.post(app, "/api/child/merge", "from=\(upper)&into=\(lower)", origin: "http://evil.example").status == 403)
        let byGet = page.get(app, "/api/child/merge?from=\(upper)&into=\(lower)")
        #expect(byGet.status == 405)
        #expect(byGet.header("Allow") == "POST")
        #expect(h.run("digest").stdout == digest)
        #expect(h.run("balance", "Max").stdout == "Max: $1.00\n")
    }
}

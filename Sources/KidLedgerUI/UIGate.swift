import KidLedgerDomain
import Synchronization

/// Who may use the page: the checks every request passes before it reaches a route.
///
/// 1. **Host** must name the loopback address the page is served on (`127.0.0.1:PORT`,
///    `localhost:PORT`, `[::1]:PORT`, or the bound address): a DNS-rebinding page on another name
///    is refused.
/// 2. **Origin**, when sent, must be this page's own (`http://` + the Host); `Sec-Fetch-Site:
///    cross-site` is refused: another site's form or script changes nothing.
/// 3. **Sign-in** (``SignIn``): the page's address carries a one-time `?code=…` (from `kidledger
///    ui` or `kidledger open`); a right, unspent, unexpired code is spent and turned into an
///    HttpOnly, SameSite=Strict cookie that lasts months, and a redirect to the same path without
///    the code. Every later request needs the cookie; every POST also needs the change token in the
///    `X-KidLedger-Token` header (the page reads it from its own HTML, which no other site can).
/// 4. **Sign-out**: `POST /api/sign-out` clears this browser's cookie; `POST /api/sign-out-all`
///    replaces the page key (``rotate``), so every browser's cookie stops working.
///
/// The long-lived key itself never travels: not in an address, a cookie or a page.
public final class UIGate: Sendable {
    /// The start of the cookie's name; the port follows, because browsers share cookies between
    /// the ports of one host and two homes' pages (two users of one laptop) must not overwrite
    /// each other's.
    public static let cookiePrefix = "kidledger_token_"
    /// The header a state change carries.
    public static let tokenHeader = "x-kidledger-token"
    /// The most spent codes remembered at once (each only until it would have expired anyway).
    public static let spentMax = 4_096

    /// The Host values accepted.
    public let hosts: Set<String>
    /// The cookie's name: ``cookiePrefix`` and the port.
    public let cookieName: String
    let clock: any WallClock
    /// Makes and stores a new page key, returning it ("Sign out every browser").
    let rotate: @Sendable () throws -> String
    /// Codes issued before this moment are refused: a code spent before a restart of the server
    /// can't be spent again after it.
    let startedMillis: Int64

    struct State {
        var key: String
        /// Spent codes' nonces, with the moment each would have expired.
        var spent: [String: Int64] = [:]
    }
    private let state: Mutex<State>

    /// A gate for a page served on `port` (and on `boundHost`, when it is not loopback), with the
    /// page key `key`. `rotate` replaces the stored key and returns the new one.
    public init(key: String, port: UInt16, boundHost: String = "127.0.0.1", clock: any WallClock,
                rotate: @escaping @Sendable () throws -> String) {
        state = Mutex(State(key: key))
        self.clock = clock
        self.rotate = rotate
        startedMillis = clock.nowMillis()
        cookieName = Self.cookiePrefix + String(port)
        var hosts: Set<String> = ["127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)"]
        hosts.insert((boundHost.contains(":") ? "[\(boundHost)]" : boundHost) + ":\(port)")
        self.hosts = hosts
    }

    /// The page key now.
    public var key: String { state.withLock { $0.key } }
    /// The cookie's value now.
    public var cookieValue: String { SignIn.cookie(key: key) }
    /// The change token the page's HTML carries now.
    public var changeToken: String { SignIn.changeToken(key: key) }

    /// What to do with a request.
    public enum Decision: Equatable, Sendable {
        /// Serve it.
        case allow
        /// Answer this instead (a refusal, the redirect that sets the cookie, a sign-out).
        case answer(HTTPResponse)
    }

    /// Checks `request` against Host, Origin, and the sign-in.
    public func check(_ request: HTTPRequest) -> Decision {
        guard let host = request.header("host"), hosts.contains(host.lowercased()) else {
            return .answer(.page(403, title: "Wrong address",
                                 message: "This page is served only at http://\(hosts.sorted().first ?? "127.0.0.1") on this laptop. Open Kid Ledger from the applications menu, or run `kidledger open`."))
        }
        if let origin = request.header("origin"), origin.lowercased() != "http://" + host.lowercased() {
            return .answer(refusal(request, 403, "Refused: the request came from another site (\(origin)). Nothing was changed."))
        }
        if request.header("sec-fetch-site") == "cross-site" {
            return .answer(refusal(request, 403, "Refused: the request came from another site. Nothing was changed."))
        }
        if let offered = request.query["code"], request.method == "GET" || request.method == "HEAD" {
            guard redeem(offered) else {
                return .answer(.page(401, title: "This sign-in link was used or has expired",
                                     message: "A sign-in link works once, within a minute. Open Kid Ledger from the applications menu (or run `kidledger open`) to sign in again. If you did not use this link yourself, choose \"Sign out every browser\" on the page."))
            }
            return .answer(HTTPResponse(status: 303, headers: [
                ("Location", request.path.hasPrefix("/api/") ? "/" : request.path),
                ("Set-Cookie", "\(cookieName)=\(cookieValue); Max-Age=\(SignIn.cookieLifetimeSeconds); HttpOnly; SameSite=Strict; Path=/"),
                ("Cache-Control", "no-store"),
                ("Referrer-Policy", "no-referrer"),
            ]))
        }
        if request.method == "POST" {
            guard let offered = request.header(Self.tokenHeader), Self.equal(offered, changeToken) else {
                return .answer(refusal(request, 403, "Refused: a change needs this page's token. Reload the page (or open it again from the applications menu). Nothing was changed."))
            }
            switch request.path {
            case "/api/sign-out": return .answer(signedOut("This browser is signed out."))
            case "/api/sign-out-all": return .answer(signOutEveryBrowser())
            default: return .allow
            }
        }
        guard let cookie = Self.cookie(request.header("cookie") ?? "", named: cookieName), Self.equal(cookie, cookieValue) else {
            return .answer(refusal(request, 401, "This browser is not signed in to the page. Open Kid Ledger from the applications menu, or run `kidledger open` (or open the address `kidledger ui` prints) on this laptop."))
        }
        return .allow
    }

    /// Spends `code` when it is right, unspent, and issued within ``SignIn/codeLifetimeMillis``
    /// (and not before this gate started).
    func redeem(_ code: String) -> Bool {
        let now = clock.nowMillis()
        return state.withLock { state in
            guard let (issued, nonce) = SignIn.verify(code, key: state.key) else { return false }
            let expires = issued + SignIn.codeLifetimeMillis
            // Not from the future (a second of slack for another process's clock read), not spent
            // on a server that ran before this one.
            guard issued >= startedMillis, issued <= now + 1_000, now <= expires else { return false }
            state.spent = state.spent.filter { $0.value >= now }
            guard state.spent[nonce] == nil, state.spent.count < Self.spentMax else { return false }
            state.spent[nonce] = expires
            return true
        }
    }

    /// "Sign out every browser": a new key, so no cookie, change token or unspent code works.
    func signOutEveryBrowser() -> HTTPResponse {
        do {
            let fresh = try rotate()
            state.withLock { $0 = State(key: fresh) }
        } catch {
            return .json(500, UIApp.errorJSON("could not replace the page key: \(error); nothing was signed out", exitCode: nil))
        }
        return signedOut("Every browser is signed out, this one too.")
    }

    /// The answer to a sign-out: a message, and a cookie that expires now.
    func signedOut(_ message: String) -> HTTPResponse {
        .json(200, "{\"result\":null,\"message\":\(UIApp.quote(message))}",
              headers: [("Set-Cookie", "\(cookieName)=; Max-Age=0; HttpOnly; SameSite=Strict; Path=/")])
    }

    /// A refusal as JSON for the API, as a page for a person.
    func refusal(_ request: HTTPRequest, _ status: Int, _ message: String) -> HTTPResponse {
        if request.path.hasPrefix("/api/") { return .json(status, UIApp.errorJSON(message, exitCode: nil)) }
        return .page(status, title: status == 401 ? "Sign-in needed" : "Refused", message: message)
    }

    /// The value of cookie `name` in a Cookie header.
    static func cookie(_ header: String, named name: String) -> String? {
        for part in header.split(separator: ";") {
            let pair = part.trimmingCharacters(in: " ")
            if pair.hasPrefix(name + "=") { return String(pair.dropFirst(name.count + 1)) }
        }
        return nil
    }

    /// Compares without an early exit, so the time taken says nothing about the secret.
    static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<x.count { difference |= x[i] ^ y[i] }
        return difference == 0
    }
}

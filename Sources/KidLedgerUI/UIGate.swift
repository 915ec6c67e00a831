/// Who may use the page: the checks every request passes before it reaches a route.
///
/// 1. **Host** must name the loopback address the page is served on (`127.0.0.1:PORT`,
///    `localhost:PORT`, `[::1]:PORT`, or the bound address): a DNS-rebinding page on another name
///    is refused.
/// 2. **Origin**, when sent, must be this page's own (`http://` + the Host); `Sec-Fetch-Site:
///    cross-site` is refused: another site's form or script changes nothing.
/// 3. **Token**: the page's address carries `?token=…` once; a right token is turned into an
///    HttpOnly, SameSite=Strict cookie and a redirect to `/` (so the token leaves the address bar).
///    Every later request needs the cookie; every POST also needs the token in the
///    `X-KidLedger-Token` header (the page reads it from its own HTML, which no other site can).
public struct UIGate: Sendable {
    /// The start of the cookie's name; the port follows, because browsers share cookies between
    /// the ports of one host and two homes' pages (two users of one laptop) must not overwrite
    /// each other's.
    public static let cookiePrefix = "kidledger_token_"
    /// The header a state change carries.
    public static let tokenHeader = "x-kidledger-token"

    /// The secret (64 hex digits).
    public let token: String
    /// The Host values accepted.
    public let hosts: Set<String>
    /// The cookie's name: ``cookiePrefix`` and the port.
    public let cookieName: String

    /// A gate for a page served on `port` (and on `boundHost`, when it is not loopback).
    public init(token: String, port: UInt16, boundHost: String = "127.0.0.1") {
        self.token = token
        cookieName = Self.cookiePrefix + String(port)
        var hosts: Set<String> = ["127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)"]
        hosts.insert((boundHost.contains(":") ? "[\(boundHost)]" : boundHost) + ":\(port)")
        self.hosts = hosts
    }

    /// What to do with a request.
    public enum Decision: Equatable, Sendable {
        /// Serve it.
        case allow
        /// Answer this instead (a refusal, or the redirect that sets the cookie).
        case answer(HTTPResponse)
    }

    /// Checks `request` against Host, Origin, and the token.
    public func check(_ request: HTTPRequest) -> Decision {
        guard let host = request.header("host"), hosts.contains(host.lowercased()) else {
            return .answer(.page(403, title: "Wrong address",
                                 message: "This page is served only at http://\(hosts.sorted().first ?? "127.0.0.1") on this laptop. Run `kidledger ui` for its address."))
        }
        if let origin = request.header("origin"), origin.lowercased() != "http://" + host.lowercased() {
            return .answer(refusal(request, 403, "Refused: the request came from another site (\(origin)). Nothing was changed."))
        }
        if request.header("sec-fetch-site") == "cross-site" {
            return .answer(refusal(request, 403, "Refused: the request came from another site. Nothing was changed."))
        }
        if let offered = request.query["token"], request.method == "GET" || request.method == "HEAD" {
            guard Self.equal(offered, token) else {
                return .answer(.page(401, title: "This link has expired",
                                     message: "The page's address has a wrong token. Run `kidledger ui` on this laptop for the current address."))
            }
            return .answer(HTTPResponse(status: 303, headers: [
                ("Location", request.path.hasPrefix("/api/") ? "/" : request.path),
                ("Set-Cookie", "\(cookieName)=\(token); HttpOnly; SameSite=Strict; Path=/"),
                ("Cache-Control", "no-store"),
            ]))
        }
        if request.method == "POST" {
            guard let offered = request.header(Self.tokenHeader), Self.equal(offered, token) else {
                return .answer(refusal(request, 403, "Refused: a change needs this page's token. Reload the page from `kidledger ui`'s address. Nothing was changed."))
            }
            return .allow
        }
        guard let cookie = Self.cookie(request.header("cookie") ?? "", named: cookieName), Self.equal(cookie, token) else {
            return .answer(refusal(request, 401, "Open the page with the address `kidledger ui` prints on this laptop (it carries the key)."))
        }
        return .allow
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

    /// Compares without an early exit, so the time taken says nothing about the token.
    static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<x.count { difference |= x[i] ^ y[i] }
        return difference == 0
    }
}

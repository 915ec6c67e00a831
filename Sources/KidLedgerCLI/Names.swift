#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity

/// Members' display names in the CLI: the name chosen at `init`/`join`, `account rename`, how a
/// member is named in `revoke`, and how an author is shown.
extension Context {
    /// The display name `init` and `join` give this member without `--name`: the signed-in
    /// account's name unless it is "default", else the login name (`$USER`, `$LOGNAME`), else
    /// "member".
    var defaultDisplayName: String {
        if accountName != "default" { return accountName }
        for variable in ["USER", "LOGNAME"] {
            if let name = environment[variable].map(Text.trimmed), Membership.memberNameProblem(name) == nil { return name }
        }
        return "member"
    }

    /// The display name of `--name` (checked), or ``defaultDisplayName``.
    func displayName(_ args: ParsedArguments) throws -> String {
        let name = Text.trimmed(args.values["name"] ?? defaultDisplayName)
        if let problem = Membership.memberNameProblem(name) { throw CLIError(problem, code: .dataError) }
        return name
    }
}

enum Names {
    /// "Dad (3fa2-91c0-7d44-e1b8)" for a member key.
    static func label(_ name: String, key: [UInt8]) -> String {
        "\(TextEscaping.terminal(name)) (\(fingerprint(key)))"
    }

    static func fingerprint(_ key: [UInt8]) -> String { PublicKey(bytes: key)?.fingerprint ?? "?" }

    /// How `history` and `status` show an author: the member's name and fingerprint, or the
    /// device id for an origin no member claimed.
    static func label(_ author: Author) -> String {
        guard let key = author.key else { return "device \(author.origin)" }
        return label(author.name ?? "?", key: key)
    }

    static func json(_ author: Author) -> JSON {
        .object([("name", author.name.map(JSON.string) ?? .null), ("fingerprint", author.key.map { .string(fingerprint($0)) } ?? .null),
                 ("key", author.key.map { .string(Hex.encode($0)) } ?? .null), ("device", .string(author.origin.description))])
    }

    /// The one member `query` names, for `revoke`: a member whose shown name equals it (ignoring
    /// case), or whose key's hex starts with it (at least 4 hex digits; dashes ignored, so a
    /// fingerprint's start works). Both kinds of match are collected; exactly one member must
    /// match.
    ///
    /// - Throws: exit 65 when none or several match (the candidates are listed).
    static func resolveMember(_ query: String, in members: [MemberSummary]) throws -> MemberSummary {
        let wanted = Text.trimmed(query).lowercased()
        let digits = wanted.filter { $0 != "-" }
        let isPrefix = digits.count >= 4 && digits.allSatisfy(\.isHexDigit)
        let matches = members.filter { m in
            m.name.lowercased() == wanted || (isPrefix && Hex.encode(m.key).hasPrefix(digits))
        }
        switch matches.count {
        case 1: return matches[0]
        case 0: throw CLIError("no member \"\(query)\" (see `kidledger members`; name a member by its full name or at least 4 digits of its fingerprint)", code: .dataError)
        default:
            let list = matches.map { label($0.name, key: $0.key) }.joined(separator: ", ")
            throw CLIError("\"\(query)\" matches more than one member: \(list); use its full name or a longer fingerprint prefix", code: .dataError)
        }
    }

    /// Asks `question` on the terminal and reads the answer: true for "y" or "yes".
    ///
    /// - Throws: exit 64 when standard input is not a terminal (a script must pass `--yes`).
    static func confirm(_ question: String, ctx: Context, flag: String = "--yes") throws -> Bool {
        guard isatty(0) == 1 else {
            throw CLIError.usage("standard input is not a terminal, so nobody can confirm; pass \(flag) to go ahead without asking")
        }
        ctx.console.err(question + " [y/N] ")
        let answer = readLine(strippingNewline: true).map { Text.trimmed($0).lowercased() } ?? ""
        return answer == "y" || answer == "yes"
    }

    static let accountRename = CLI.Command(spec: CommandSpec(
        name: "account rename", synopsis: "NAME", summary: "change the display name the household knows this member by",
        details: """
        Every member chooses its own display name (at `init` or `join` with --name, here later); `members`,
        `history` and `revoke` use it. Only this member's own devices can set it. At most 64 bytes, no control
        characters. It reaches the other laptops with the next sync.
        """, arguments: 1...1)) { ctx, args in
        let (name, me) = try ctx.change(payingAllowances: false) { replica in
            _ = try LedgerCommands.requireHousehold(replica)
            guard let me = try ctx.identity(creating: false) else { throw CLIError("no identity on this device", code: .notPermitted) }
            guard try replica.members().contains(where: { $0.key == me.publicKey.bytes }) else {
                throw CLIError("this household has no membership to name", code: .dataError)
            }
            return (try replica.setMemberName(args.positionals[0], of: me.publicKey.bytes), me)
        }
        ctx.say("This member is now called \"\(TextEscaping.terminal(name))\" (\(me.publicKey.fingerprint)).")
        ctx.emit(.object([("name", .string(name)), ("fingerprint", .string(me.publicKey.fingerprint)), ("key", .string(me.publicKey.hex))]))
    }
}

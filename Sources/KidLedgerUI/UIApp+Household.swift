/// The page's household routes (issue 41): start or join a household, invite, members, the
/// account, recovery, the undo and merge forms a parent needs on a bad day, and the relay (issue
/// 44). Each runs the CLI's own command, like every other route (docs/UI.md, "The JSON API").
extension UIApp {
    /// The page invites with the longest invitation `invite` makes (a week): it is live until
    /// used, or until the week is over.
    static let inviteMinutes = "10080"

    /// Read routes that work before there is a household: path to command line.
    static let householdReads: [String: [String]] = [
        "/api/account": ["account", "show"],
    ]

    /// The household's changes: route to the command line it runs (positionals after `--`).
    static let householdChanges: [String: @Sendable ([String: String]) -> Result<[String], MissingField>] = [
        "/api/household/start": { f in fields(f, ["name", "yourName"]).map { ["init", "--name", $0[1], "--", $0[0]] } },
        "/api/household/join": { f in
            fields(f, ["code"]).map { v in ["join"] + (f["yourName"].map { ["--name", $0] } ?? []) + ["--", v[0]] }
        },
        "/api/invite": { _ in .success(["invite", "--no-qr", "--minutes", inviteMinutes]) },
        "/api/member/rename": { f in fields(f, ["name"]).map { ["account", "rename", "--"] + $0 } },
        // The page asked already, naming the member and saying what happens.
        "/api/member/revoke": { f in fields(f, ["member"]).map { ["revoke", "--yes", "--"] + $0 } },
        // In this process: the secret is in no shell history and no process list.
        "/api/recover": { f in fields(f, ["secret"]).map { ["recover", "--"] + $0 } },
        "/api/account/switch": { f in fields(f, ["account"]).map { ["account", "switch", "--"] + $0 } },
        "/api/undo-mine": { _ in .success(["undo", "--mine"]) },
        "/api/child/unmerge": { f in fields(f, ["child"]).map { ["child", "unmerge", "--"] + $0 } },
        // The household's limit for asking first (a replicated register); the old route sets it too.
        "/api/household/limit": { f in fields(f, ["amount"]).map { ["household", "limit", "--"] + $0 } },
        "/api/quick/limit": { f in fields(f, ["amount"]).map { ["household", "limit", "--"] + $0 } },
        // The household's relay (issue 44): added by its code, removed by its fingerprint (the page asked first).
        "/api/relay/add": { f in fields(f, ["code"]).map { ["relay", "add", "--"] + $0 } },
        "/api/relay/remove": { f in fields(f, ["relay"]).map { ["relay", "remove", "--"] + $0 } },
    ]
}

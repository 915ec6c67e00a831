#if canImport(Glibc)
import Glibc
#endif
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerDaemon

/// This device's signed-in identity (account) and the membership gate.
extension Context {
    /// Where the device's identities (Ed25519 key files, mode 0600) live.
    var keyStore: KeyStore { KeyStore(directory: home + "/identities") }

    /// The signed-in account's name (the file `HOME/account`; "default" when absent).
    var accountName: String {
        guard let text = try? FileSystem.readFile(home + "/account") else { return "default" }
        let name = Text.trimmed(text)
        return name.isEmpty ? "default" : name
    }

    /// The accounts with a key on this laptop, sorted.
    func accounts() throws -> [String] {
        do { return try keyStore.accounts() } catch { throw CLIError("\(error)", code: .ioError) }
    }

    /// Signs in as `name` (writes `HOME/account`).
    func setAccount(_ name: String) throws {
        try FileSystem.makeDirectory(home)
        try FileSystem.writeFile(home + "/account", name + "\n")
    }

    /// The signed-in account's identity, created (with fresh randomness) when `creating`.
    func identity(creating: Bool) throws -> Identity? {
        do {
            if let existing = try keyStore.load(account: accountName) { return existing }
            guard creating else { return nil }
            try FileSystem.makeDirectory(home)
            return try keyStore.create(account: accountName, seed: Sodium.randomBytes(Identity.seedByteCount))
        } catch let e as SecurityError {
            throw CLIError("identity \"\(accountName)\": \(e)", code: .notPermitted)
        }
    }

    /// Why mutations and sync are stopped (attentionRequired), or nil when they may go on.
    func attentionReason(_ replica: Replica) throws -> String? {
        try attentionReason(replica, identity: try identity(creating: false))
    }

    /// ``attentionReason(_:)`` for an identity already loaded (nil: none on this device).
    func attentionReason(_ replica: Replica, identity: Identity?) throws -> String? {
        guard try replica.household() != nil, try replica.members().contains(where: \.isOwner) else { return nil }
        guard let me = identity else {
            return "no identity for account \"\(accountName)\" on this laptop (see `kidledger account show`)"
        }
        if let joined = try replica.device.setting("memberKey"), joined != me.publicKey.hex {
            let joinedName = try replica.device.setting("memberAccount") ?? "the account it joined with"
            return "this laptop is signed in as \"\(accountName)\", not as \"\(joinedName)\", the member it joined with; queued changes are kept. Switch back with `kidledger account switch \(joinedName)`"
        }
        let members = try replica.members()
        if let mine = members.first(where: { $0.key == me.publicKey.bytes }) {
            if try mine.isRevoked || replica.isRevokedHere(mine.key) { return "this laptop's membership was revoked by the owner; its data is kept (reads and export work) but changes and sync are stopped and the ledger here is stale" }
            return nil
        }
        return "account \"\(accountName)\" is not a member of this household"
    }

    /// Opens the replica for a command that changes the ledger or syncs: refuses with exit 77
    /// when the replica is in attentionRequired.
    func openReplicaForChanges() throws -> Replica {
        let replica = try openReplica()
        let me = try identity(creating: false)
        if let reason = try attentionReason(replica, identity: me) {
            throw CLIError("attention required: \(reason)", code: .notPermitted)
        }
        if let me { configure(replica, identity: me) }
        return replica
    }

    /// Installs `identity` as the replica's signer (of its origin claims).
    func configure(_ replica: Replica, identity me: Identity) {
        replica.signer = me.signer
    }
}

/// `account show`, `account switch`, `account rename`, `members`, `revoke`.
enum AccountCommands {
    static let all: [CLI.Command] = [accountShow, accountList, accountSwitch, Names.accountRename, members, revoke]

    static let accountShow = CLI.Command(spec: CommandSpec(
        name: "account show", synopsis: "", summary: "show this device's signed-in identity", details: "")) { ctx, _ in
        let me = try ctx.identity(creating: false)
        var role = "no household here"
        var shownRole = role
        var attention: String?
        var household = false
        var memberAccount: String?
        if FileSystem.exists(ctx.storePath + "/data.mdb") {
            let replica = try ctx.openReplica()
            memberAccount = try replica.device.setting("memberAccount")
            if try replica.household() != nil {
                household = true
                let member = try replica.members().first { $0.key == me?.publicKey.bytes }
                role = member.map { $0.isOwner ? "owner" : ($0.isRevoked ? "revoked member" : "member \"\($0.name)\"") } ?? "not a member"
                shownRole = member.map { $0.isOwner || $0.isRevoked ? role : "member \"\(TextEscaping.terminal($0.name))\"" } ?? role
                attention = try ctx.attentionReason(replica)
            }
        }
        ctx.say("account \(ctx.accountName): key \(me?.publicKey.fingerprint ?? "(none yet)"); \(shownRole)")
        if let attention { ctx.say("attention required: \(TextEscaping.terminal(attention))") }
        ctx.emit(.object([("account", .string(ctx.accountName)), ("key", me.map { .string($0.publicKey.hex) } ?? .null),
                          ("role", .string(role)), ("attentionRequired", .bool(attention != nil)),
                          ("reason", attention.map(JSON.string) ?? .null), ("household", .bool(household)),
                          ("memberAccount", memberAccount.map(JSON.string) ?? .null)]))
    }

    static let accountSwitch = CLI.Command(spec: CommandSpec(
        name: "account switch", synopsis: "NAME [--create]", summary: "sign this device in as another account",
        details: """
        NAME must be an account this laptop has a key for (`kidledger account list`); a new account needs
        --create, which makes its key (so a typo does not sign you in as a stranger). If NAME is not the
        member this home joined the household with, the ledger enters attentionRequired: reads work, changes
        and sync stop, queued changes are kept; switching back resumes.
          --create   make the account (a new key) when this laptop has none of that name
        """,
        flagOptions: ["create"], arguments: 1...1)) { ctx, args in
        let name = Text.trimmed(args.positionals[0])
        do { try KeyStore.validate(account: name) } catch { throw CLIError.usage("\(error)") }
        let known = try ctx.accounts()
        if !known.contains(name) && !args.has("create") {
            let near = Suggestions.nearest(name, in: known).map { "did you mean \($0)? " } ?? ""
            let list = known.isEmpty ? "none yet" : known.joined(separator: ", ")
            throw CLIError("this laptop has no account \"\(name)\" (accounts: \(list)); \(near)pass --create to make a new account with a new key", code: .dataError)
        }
        try ctx.setAccount(name)
        let me = try ctx.identity(creating: true)
        var attention: String?
        if FileSystem.exists(ctx.storePath + "/data.mdb") {
            let replica = try ctx.openReplica()
            attention = try ctx.attentionReason(replica)
        }
        ctx.say("Signed in as \(name) (key \(me?.publicKey.fingerprint ?? "?")).")
        if let attention { ctx.say("attention required: \(TextEscaping.terminal(attention))") }
        ctx.emit(.object([("account", .string(name)), ("key", me.map { .string($0.publicKey.hex) } ?? .null),
                          ("attentionRequired", .bool(attention != nil))]))
    }

    static let accountList = CLI.Command(spec: CommandSpec(
        name: "account list", synopsis: "", summary: "list the accounts this laptop has a key for",
        details: "One line per account (a key file in HOME/identities): its name, its key's fingerprint, and `*`\nfor the signed-in one.")) { ctx, _ in
        let current = ctx.accountName
        let names = try ctx.accounts()
        let identities = try names.map { name -> (String, Identity?) in
            do { return (name, try ctx.keyStore.load(account: name)) } catch let e as SecurityError {
                throw CLIError("identity \"\(name)\": \(e)", code: .notPermitted)
            }
        }
        ctx.emit(.object([("current", .string(current)), ("accounts", .array(identities.map { name, me in
            .object([("name", .string(name)), ("fingerprint", me.map { .string($0.publicKey.fingerprint) } ?? .null),
                     ("key", me.map { .string($0.publicKey.hex) } ?? .null), ("current", .bool(name == current))])
        }))]))
        if identities.isEmpty { ctx.say("No accounts on this laptop yet (`kidledger init` or `kidledger join` makes one)."); return }
        ctx.say(Render.table(header: ["", "ACCOUNT", "KEY"], rightAligned: [], rows: identities.map { name, me in
            [name == current ? "*" : "", name, me?.publicKey.fingerprint ?? "?"]
        }))
        if !names.contains(current) { ctx.say("signed in as \(current), which has no key yet") }
    }

    static let members = CLI.Command(spec: CommandSpec(
        name: "members", synopsis: "", summary: "list the household's members: names, key fingerprints, devices, revocations",
        details: "NAME is the display name the member chose (`init`/`join` --name, `account rename`), else the one its\ninvitation gave it. KEY is the start of its key's fingerprint; `revoke` takes either.")) { ctx, _ in
        let replica = try ctx.openReplica()
        _ = try LedgerCommands.requireHousehold(replica)
        let list = try replica.members()
        ctx.emit(.object([("members", .array(list.map { m in
            .object([("name", .string(m.name)), ("chosenName", m.chosenName.map(JSON.string) ?? .null),
                     ("fingerprint", .string(Names.fingerprint(m.key))), ("key", .string(Hex.encode(m.key))), ("owner", .bool(m.isOwner)),
                     ("formerOwner", .bool(m.isFormerOwner)), ("revoked", .bool(m.isRevoked)), ("devices", .array(m.devices.map { .string($0.description) }))])
        }))]))
        if list.isEmpty { ctx.say("This household has no membership (it was created without an owner)."); return }
        ctx.say(Render.table(header: ["NAME", "KEY", "DEVICES", ""], rightAligned: [], rows: list.map { m in
            [m.name, Names.fingerprint(m.key), "\(m.devices.count)",
             m.isOwner ? "owner" : [m.isFormerOwner ? "former owner" : "", m.isRevoked ? "revoked" : ""].filter { !$0.isEmpty }.joined(separator: ", ")]
        }, truncated: [0: Render.nameWidthMax]))
    }

    static let revoke = CLI.Command(spec: CommandSpec(
        name: "revoke", synopsis: "MEMBER [--yes]", summary: "revoke a member (owner only; permanent)",
        details: """
        MEMBER is a member's full name as `members` shows it (ignoring case) or at least 4 hex digits of the
        start of its key fingerprint (dashes optional); it must name exactly one member. On a terminal it asks
        for confirmation; --yes skips the question (scripts must pass it: without a terminal and without --yes
        it refuses, exit 64). What the revoked member did that this laptop has seen stays; anything it does
        later is rejected on every device. Its own laptop keeps its data and shows the ledger as stale.
        """, flagOptions: ["yes"], arguments: 1...1)) { ctx, args in
        // The question is asked outside the change (no write transaction waits for an answer); the
        // change checks again what it revokes.
        func target(_ replica: Replica) throws -> (household: HouseholdSummary, me: Identity, member: MemberSummary, label: String) {
            let household = try LedgerCommands.requireHousehold(replica)
            guard let me = try ctx.identity(creating: false), let owner = try replica.members().first(where: \.isOwner),
                  owner.key == me.publicKey.bytes else {
                throw CLIError("only the household's owner can revoke members", code: .notPermitted)
            }
            let member = try Names.resolveMember(args.positionals[0], in: try replica.members())
            let label = Names.label(member.name, key: member.key)
            if member.isOwner { throw CLIError("\(label) is the household's owner, who cannot be revoked", code: .dataError) }
            if member.isRevoked { throw CLIError("\(label) is already revoked", code: .dataError) }
            return (household, me, member, label)
        }
        if !args.has("yes") {
            let (_, _, member, label) = try target(try ctx.openReplicaForChanges())
            guard try Names.confirm("Revoke \(label)? This is permanent.", ctx: ctx) else {
                ctx.say("Nothing revoked.")
                ctx.emit(.object([("revoked", .null), ("key", .string(Hex.encode(member.key)))]))
                return
            }
        }
        let (member, label) = try ctx.change(payingAllowances: false) { replica in
            let (household, me, member, label) = try target(replica)
            let revocation = me.revocation(of: member.key, seen: try replica.cut(of: member.key), household: household.id, atMillis: SystemClock().nowMillis())
            // While a relay is granted, the same change carries a new relay epoch without the member.
            var random = SystemRandomNumberGenerator()
            try replica.commitMembership([.revoke(revocation)], rotatingRelayEpochAs: me, using: &random)
            return (member, label)
        }
        ctx.say("Revoked \(label). What it did that this laptop has seen stays; its later changes are rejected everywhere.")
        ctx.emit(.object([("revoked", .string(member.name)), ("fingerprint", .string(Names.fingerprint(member.key))),
                          ("key", .string(Hex.encode(member.key)))]))
    }
}

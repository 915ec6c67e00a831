import Glibc
import KidLedgerDomain
import KidLedgerReplica
import KidLedgerRelay
import KidLedgerSecurity
import KidLedgerDaemon

/// Ownership recovery: the recovery secret `init` prints, and `recover`.
enum RecoveryCommands {
    static let all: [CLI.Command] = [recover]

    /// A fresh recovery key for `init`: its seed as the paper text, and its public key for the
    /// genesis. The seed is never stored.
    static func newRecoveryKey() -> (text: String, publicKey: [UInt8]) {
        let seed = Sodium.randomBytes(RecoverySecret.seedBytes)
        // A 32-byte seed is always a valid Ed25519 seed.
        let identity = try! Identity(seed: seed)
        return (RecoverySecret.text(seed: seed), identity.publicKey.bytes)
    }

    /// What `init` says about the recovery secret.
    static func paperNotice(_ text: String) -> String {
        """
        Recovery secret (shown only now; write it on paper and keep it away from this laptop):
          \(text)
        If this laptop is lost or stolen, run `kidledger recover` on another member's laptop and type this
        secret: that laptop becomes the owner, so it can revoke this one (docs/SECURITY.md, "A stolen laptop").
        """
    }

    /// One line from standard input: on a terminal after a prompt, with echo turned off meanwhile.
    static func readSecret(_ ctx: Context) throws -> String {
        let terminal = isatty(0) == 1
        var saved = termios()
        let quiet = terminal && tcgetattr(0, &saved) == 0
        if terminal { ctx.console.err("Recovery secret (not shown as you type): ") }
        if quiet {
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(0, TCSANOW, &silent)
        }
        defer {
            if quiet {
                _ = tcsetattr(0, TCSANOW, &saved)
                ctx.console.err("\n")
            }
        }
        guard let line = readLine(strippingNewline: true), !Text.trimmed(line).isEmpty else {
            throw CLIError.usage("no recovery secret: type it at the prompt, or pipe it on standard input")
        }
        return line
    }

    static let recover = CLI.Command(spec: CommandSpec(
        name: "recover", synopsis: "[SECRET]", summary: "take over as the household's owner with its recovery secret",
        details: """
        SECRET is the recovery secret `kidledger init` printed (14 groups of 4 characters; case, spaces and
        dashes do not matter). Run it on a laptop that holds the household (another member's, or a new one
        joined with an invite): this laptop's member key becomes the owner on every laptop once they sync,
        and the former owner's key can no longer invite, revoke or transfer. What the former owner signed
        that this laptop holds stays valid. It works on a laptop whose membership the lost owner key revoked
        (the new owner can't be revoked). Then revoke the lost laptop (`kidledger revoke MEMBER`; it is
        listed as "former owner" in `kidledger members`) and run `kidledger sync`.
        Without SECRET it reads the secret from standard input (on a terminal: at a prompt, not echoed), so it
        stays out of the shell's history and the process list; given as an argument it is accepted, with a warning.
        """, arguments: 0...1)) { ctx, args in
        let text: String
        if let given = args.positionals.first {
            ctx.console.err("warning: a secret given as an argument lands in the shell's history and the process list; next time run `kidledger recover` and type it at the prompt\n")
            text = given
        } else {
            text = try readSecret(ctx)
        }
        guard let seed = RecoverySecret.seed(text: text) else {
            throw CLIError("that is not a recovery secret: it has 14 groups of 4 characters and a checksum; check each character", code: .dataError)
        }
        let replica = try ctx.openReplica()
        let household = try LedgerCommands.requireHousehold(replica)
        guard let me = try ctx.identity(creating: false) else {
            throw CLIError("this laptop has no member key; join the household first (`kidledger join CODE`)", code: .notPermitted)
        }
        // A revoked laptop may recover: a thief with the owner key may have revoked every other
        // member first. Becoming the owner voids the revocation of its key (the owner can't be
        // revoked); the recovery key, not membership, is what permits it.
        let revoked = try replica.members().first { $0.key == me.publicKey.bytes }?.isRevoked ?? false
        if !revoked, let reason = try ctx.attentionReason(replica, identity: me) {
            throw CLIError("attention required: \(reason)", code: .notPermitted)
        }
        ctx.configure(replica, identity: me)
        guard let before = try replica.ownership() else {
            throw CLIError("this household was created without membership; it has no owner to recover", code: .dataError)
        }
        let recovery = try Identity(seed: seed)
        // While a relay is granted, the same change carries the new owner's new relay epoch.
        var random = SystemRandomNumberGenerator()
        let transfer = try replica.transferOwnership(to: me, recoveryKey: recovery.publicKey.bytes,
                                                     atMillis: SystemClock().nowMillis(), sign: recovery.sign, using: &random)
        // Each granted relay pinned the former owner's key: a statement signed now, while the
        // recovery secret is at hand (it is never kept), re-pins it at this laptop's next relay sync.
        let relays = try replica.relays()
        for relay in relays {
            guard let key = PublicKey(bytes: relay.key) else { continue }
            let statement = RelayOwnerStatement.sign(relay: key, newOwner: me.publicKey, term: transfer.epoch, recovery: recovery)
            try RelayRecord.keepStatement(statement, in: replica, relay: relay.key)
        }
        let previous = PublicKey(bytes: before.owner)?.fingerprint ?? Hex.encode(before.owner)
        ctx.say("""
            This laptop (key \(me.publicKey.fingerprint)) now owns "\(TextEscaping.terminal(household.name))" (owner transfer \(transfer.epoch)).
            The previous owner key \(previous) can no longer invite, revoke or transfer.
            If its laptop was lost or stolen, revoke it now: `kidledger revoke \(String(Hex.encode(before.owner).prefix(16)))`, then `kidledger sync`.
            """)
        if !relays.isEmpty { ctx.say("The relay takes this laptop as the owner at its next relay sync (`kidledger relay sync`, or the daemon's).") }
        ctx.emit(.object([("owner", .string(me.publicKey.hex)), ("previousOwner", .string(Hex.encode(before.owner))),
                          ("epoch", .int(Int64(transfer.epoch)))]))
    }
}

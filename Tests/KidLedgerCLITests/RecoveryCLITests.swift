import Foundation
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
import KidLedgerDomain

/// Issue 20, point 7: ownership survives a lost laptop. The recovery secret `init` prints, and the
/// stolen-laptop story of docs/SECURITY.md with real `kidledger` processes on 127.0.0.1.
@Suite("Ownership recovery between real processes")
struct RecoveryCLITests {
    static func text(_ o: ProcessOutcome) -> String { o.stdout + o.stderr }

    static func members(_ ledger: TestLedger) throws -> [[String: Any]] {
        try json(ledger, "members")["members"] as? [[String: Any]] ?? []
    }

    static func ownerKey(_ ledger: TestLedger) throws -> String? {
        try members(ledger).first { $0["owner"] as? Bool == true }?["key"] as? String
    }

    @Test func initPrintsARecoverySecretThatRecoverChecks() throws {
        let a = TestLedger()
        defer { a.remove() }
        let created = try json(a, "init", "Smiths", "--account", "mom")
        let secret = try #require(created["recoverySecret"] as? String, "\(created)")
        #expect(RecoverySecret.seed(text: secret) != nil)
        // Not stored anywhere in the home.
        let files = FileManager.default.enumerator(atPath: a.home)?.allObjects as? [String] ?? []
        for file in files {
            let data = FileManager.default.contents(atPath: a.home + "/" + file) ?? Data()
            #expect(data.range(of: Data(secret.utf8)) == nil, "\(file) holds the secret")
        }
        // A typo, another household's secret, and the owner recovering to itself are refused.
        var typo = Array(secret)
        typo[0] = typo[0] == "A" ? "B" : "A"
        let mistyped = try runKidledger(a, ["recover", String(typo)])
        #expect(mistyped.code == 65 && Self.text(mistyped).contains("not a recovery secret"), "\(mistyped)")
        let other = RecoverySecret.text(seed: Array(repeating: 7, count: 32))
        let foreign = try runKidledger(a, ["recover", other])
        #expect(foreign.code == 65 && Self.text(foreign).contains("not this household's"), "\(foreign)")
        let same = try runKidledger(a, ["recover", secret])
        #expect(same.code == 65 && Self.text(same).contains("already owns"), "\(same)")
        #expect(same.stderr.contains("warning: a secret given as an argument"), "\(same)")
        let empty = try runKidledger(a, ["recover"], input: "")
        #expect(empty.code == 64 && Self.text(empty).contains("no recovery secret"), "\(empty)")
        try expectVerified(a, "A")
    }

    /// Mom's laptop (the owner) is stolen. Dad recovers with the paper secret, revokes the stolen
    /// laptop, invites Mom's new laptop, which recovers ownership in turn; the thief's changes
    /// never count, and the stolen laptop learns its revocation when it tries to sync.
    @Test func stolenLaptopStory() throws {
        let mom = TestLedger(), dad = TestLedger(), newLaptop = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove(); newLaptop.remove() }
        let secret = try #require(try json(mom, "init", "Smiths", "--account", "mom")["recoverySecret"] as? String)
        try ok(mom, "child", "add", "Ava")
        try ok(mom, "give", "Ava", "5.00")
        let momKey = try #require(try Self.ownerKey(mom))
        let momDaemon = try #require(try DaemonProcess.start(mom, in: group))
        try ok(dad, "join", try inviteCode(mom))
        try ok(dad, "give", "Ava", "1.00")
        try ok(dad, "sync")
        _ = momDaemon.stop()

        // The thief uses Mom's laptop offline.
        try ok(mom, "give", "Ava", "50.00", "--note", "thief")

        // Dad recovers and revokes the stolen laptop.
        // The secret on standard input (as typed at the prompt), not in the arguments.
        let typed = try runKidledger(dad, ["--json", "recover"], input: secret + "\n")
        #expect(typed.code == 0 && !typed.stderr.contains("warning"), "\(typed)")
        let recovered = try #require(try JSONSerialization.jsonObject(with: Data(typed.stdout.utf8)) as? [String: Any])
        #expect(recovered["previousOwner"] as? String == momKey, "\(recovered)")
        #expect(recovered["epoch"] as? Int == 1)
        let dadKey = try #require(recovered["owner"] as? String)
        #expect(try Self.ownerKey(dad) == dadKey)
        #expect(try Self.members(dad).contains { $0["key"] as? String == momKey && $0["formerOwner"] as? Bool == true })
        try ok(dad, "revoke", String(momKey.prefix(12)), "--yes")
        #expect(try json(dad, "status")["ownerEpoch"] as? Int == 1)

        // Mom's new laptop joins through Dad's invite, then takes ownership back.
        let dadDaemon = try #require(try DaemonProcess.start(dad, in: group))
        try ok(newLaptop, "join", try inviteCode(dad))
        #expect(try Self.ownerKey(newLaptop) == dadKey)
        let again = try json(newLaptop, "recover", secret)
        #expect(again["epoch"] as? Int == 2, "\(again)")
        try ok(newLaptop, "sync")
        #expect(eventually(timeout: 10) { (try? Self.ownerKey(dad)) == again["owner"] as? String })

        // The stolen laptop tries to sync: refused, and it learns the revocation.
        let sync = try runKidledger(mom, ["sync", dadDaemon.address])
        #expect(sync.code == 77 || sync.code == 69, "\(sync)")
        #expect(Self.text(sync).contains("revoked"), "\(sync)")
        for ledger in [dad, newLaptop] {
            #expect(try childTable(ledger)["Ava"]?[0] == 600, "the thief's $50 never counts")
        }
        #expect(try digest(dad) == digest(newLaptop))
        try expectVerified(dad, "Dad")
        try expectVerified(newLaptop, "new laptop")
    }

    /// The thief's first move with the owner key: revoke the other parent. Its laptop learns the
    /// revocation (attentionRequired), and recovers anyway; the revocation of the new owner is void.
    @Test func aRevokedParentCanStillRecover() throws {
        let mom = TestLedger(), dad = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove() }
        let secret = try #require(try json(mom, "init", "Smiths", "--account", "mom")["recoverySecret"] as? String)
        try ok(mom, "child", "add", "Ava")
        _ = try #require(try DaemonProcess.start(mom, in: group))
        try ok(dad, "join", try inviteCode(mom))
        let dadKey = try #require(try Self.members(mom).first { $0["owner"] as? Bool == false }?["key"] as? String)
        try ok(mom, "revoke", String(dadKey.prefix(12)), "--yes")
        #expect(try runKidledger(dad, ["sync"]).code == 77)
        #expect(try runKidledger(dad, ["give", "Ava", "1.00"]).code == 77)

        let recovered = try json(dad, "recover", secret)
        #expect(recovered["owner"] as? String == dadKey, "\(recovered)")
        #expect(try json(dad, "status")["state"] as? String != "attentionRequired")
        #expect(try Self.members(dad).first { $0["key"] as? String == dadKey }?["revoked"] as? Bool == false)
        try ok(dad, "give", "Ava", "1.00")
        #expect(try childTable(dad)["Ava"]?[0] == 100)
        // The void revocation is counted as forged; the store verifies.
        let verify = try json(dad, "verify")
        #expect(verify["ok"] as? Bool == true && verify["forged"] as? Int == 1 && verify["recomputed"] as? Bool == true, "\(verify)")
    }

    /// Mom creates the Smiths with Ava and serves it; each of `joiners` joins. Returns the
    /// recovery secret and Mom's daemon, still running.
    static func smiths(_ mom: TestLedger, joinedBy joiners: [TestLedger], in group: ProcessGroup) throws -> (secret: String, daemon: DaemonProcess) {
        let secret = try #require(try json(mom, "init", "Smiths", "--account", "mom")["recoverySecret"] as? String)
        try ok(mom, "child", "add", "Ava")
        let daemon = try #require(try DaemonProcess.start(mom, in: group))
        for joiner in joiners { try ok(joiner, "join", try inviteCode(mom)) }
        return (secret, daemon)
    }

    /// The gap the simulator found (Simulations/17): right after Dad recovers, the thief revokes
    /// Dad with Mom's stale owner key, and Gran's laptop, which has not heard of the recovery,
    /// takes that revocation and refuses Dad. Dad's `sync` answers the refusal with the owner
    /// transfer that voids it; Gran's daemon records it, and the `sync`'s second try gets in.
    @Test func aStaleOwnerKeysRevocationOfTheNewOwnerIsAnsweredWithTheTransfer() throws {
        let mom = TestLedger(), dad = TestLedger(), gran = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove(); gran.remove() }
        let (secret, momDaemon) = try Self.smiths(mom, joinedBy: [dad, gran], in: group)
        try ok(dad, "sync")
        _ = momDaemon.stop()

        let dadKey = try #require(try json(dad, "recover", secret)["owner"] as? String)
        let momKey = try #require(try Self.members(dad).first { $0["formerOwner"] as? Bool == true }?["key"] as? String)
        try ok(dad, "revoke", String(momKey.prefix(12)), "--yes")
        try ok(dad, "give", "Ava", "1.00", "--note", "after the recovery")
        // The thief revokes Dad with the stale key, and Gran hears it first.
        try ok(mom, "revoke", String(dadKey.prefix(12)), "--yes")
        let thiefDaemon = try #require(try DaemonProcess.start(mom, in: group))
        try ok(gran, "sync", thiefDaemon.address)
        _ = thiefDaemon.stop()
        #expect(try Self.members(gran).first { $0["key"] as? String == dadKey }?["revoked"] as? Bool == true)

        let granDaemon = try #require(try DaemonProcess.start(gran, in: group))
        let sync = try runKidledger(dad, ["--json", "sync", granDaemon.address])
        #expect(sync.code == 0, "\(sync)")
        #expect(eventually(timeout: 10) { granDaemon.log.contains("answered with 1 owner transfer") }, "Gran's log: \(granDaemon.log)")
        #expect(try Self.ownerKey(gran) == dadKey)
        let granMembers = try Self.members(gran)
        #expect(granMembers.first { $0["key"] as? String == dadKey }?["revoked"] as? Bool == false, "\(granMembers)")
        #expect(granMembers.first { $0["key"] as? String == momKey }?["revoked"] as? Bool == true, "\(granMembers)")
        #expect(try childTable(gran)["Ava"]?[0] == 100)
        #expect(try digest(gran) == digest(dad))
        // The thief's revocation of Dad is in both logs, counted as forged (void) on both.
        for ledger in [gran, dad] {
            let verify = try json(ledger, "verify")
            #expect(verify["ok"] as? Bool == true && verify["forged"] as? Int == 1, "\(verify)")
        }
    }

    /// Membership seed 106 of the simulator: Mom, the owner, revokes Gran while Dad, who has not
    /// seen that, recovers ownership (the family thought Mom's laptop lost). Gran learns her
    /// revocation from Mom's refusal and stops; once Mom hears of the transfer, her revocation
    /// of Gran is void (signed after her term, as far as the household knows). Gran's `sync`
    /// still asks in, Mom lets her in, and the transfer it brings clears Gran's attention.
    @Test func aRevokedLaptopWhoseRevocationARecoveryVoidedGetsBackIn() throws {
        let mom = TestLedger(), dad = TestLedger(), gran = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove(); gran.remove() }
        let (secret, momDaemon) = try Self.smiths(mom, joinedBy: [dad, gran], in: group)
        try ok(gran, "give", "Ava", "0.50", "--note", "from Gran")
        try ok(gran, "sync")
        try ok(dad, "sync")  // Dad has seen Gran's grant
        _ = momDaemon.stop()
        let granKey = try #require(try json(gran, "account", "show")["key"] as? String)

        // At the same time: Mom revokes Gran, and Dad recovers ownership without hearing of it.
        try ok(mom, "revoke", String(granKey.prefix(12)), "--yes")
        _ = try #require(try json(dad, "recover", secret)["owner"] as? String)
        let refusing = try #require(try DaemonProcess.start(mom, in: group))
        let refused = try runKidledger(gran, ["sync", refusing.address])
        #expect(refused.code == 77 && Self.text(refused).contains("revoked"), "\(refused)")
        let again = try runKidledger(gran, ["sync", refusing.address])
        #expect(again.code == 77, "while Mom holds the revocation, Gran is refused: \(again)")
        let give = try runKidledger(gran, ["give", "Ava", "1.00"])
        #expect(give.code == 77, "\(give)")

        // Mom hears of the transfer: her revocation of Gran was signed after her term ended.
        try ok(dad, "sync", refusing.address)
        #expect(try Self.members(mom).first { $0["key"] as? String == granKey }?["revoked"] as? Bool == false)
        let back = try runKidledger(gran, ["--json", "sync", refusing.address])
        #expect(back.code == 0, "\(back)")
        #expect(try Self.members(gran).first { $0["key"] as? String == granKey }?["revoked"] as? Bool == false)
        try ok(gran, "give", "Ava", "1.00", "--note", "back in")
        try ok(gran, "sync", refusing.address)
        #expect(try digest(gran) == digest(mom))
        #expect(try childTable(mom)["Ava"]?[0] == 150)
        // Mom's revocation of Gran is in both logs twice (Mom's change, and the change Gran
        // recorded it in when refused), void (forged) on both.
        for ledger in [mom, gran] {
            let verify = try json(ledger, "verify")
            #expect(verify["ok"] as? Bool == true && verify["forged"] as? Int == 2, "\(verify)")
        }
    }
}

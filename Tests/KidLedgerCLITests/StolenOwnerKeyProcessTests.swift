import Foundation
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerDaemon

/// Issue 39, points 1 and 7: the stolen-laptop story where the thief acts first, with real
/// `kidledger` processes, real homes and daemons on 127.0.0.1. Holding Mom's laptop and its owner
/// key, the thief signs a second creation record of the household (an earlier creation time, a
/// recovery key of its own) and syncs it to Dad, then revokes Dad. On main the second genesis won
/// on Dad's laptop: the paper secret was refused there ("not this household's") and the thief's
/// worked. Now Dad's laptop forges it, says the owner key signed a second household record, and
/// recovers with the paper secret; the thief's key ends revoked and nothing of it counts.
@Suite("A thief with the owner's laptop acts first, between real processes")
struct StolenOwnerKeyProcessTests {
    static func text(_ o: ProcessOutcome) -> String { RecoveryCLITests.text(o) }
    static func members(_ ledger: TestLedger) throws -> [[String: Any]] { try RecoveryCLITests.members(ledger) }

    /// What the thief's modified client does on the stolen laptop: a second genesis of the
    /// household, naming `recovery`, signed with the owner key the laptop holds, in a change under
    /// the laptop's origin with the head that key signs (the way any change of its is authenticated).
    static func signSecondGenesis(on ledger: TestLedger, recovery: [UInt8]) throws {
        let replica = try Context(home: ledger.home, json: false, console: BufferConsole(), clock: SystemClock()).openReplicaForChanges()
        defer { (replica.store as? LMDBEnvironment)?.close() }
        let signer = try #require(replica.signer)
        var second = try #require(try replica.genesis())
        second.createdAtMillis -= 60_000
        second.recovery = recovery
        second.signature = signer.sign(Membership.genesisMessage(second))
        let origin = replica.replicaID
        let held = try #require(try replica.versionVector()[origin])
        let change = Change(origin: origin, sequence: held + 1, hlc: HLC(millis: SystemClock().nowMillis()),
                            operations: [.createHousehold(second)])
        let chain = Replica.chainLink(after: try #require(try replica.chain(origin, at: held)),
                                         onlyVersion: Array(SHA256.hash(RecordCodec.encode(change)).prefix(8)))
        let head = signer.head(household: second.id, origin: origin, sequence: held + 1, chain: chain)
        #expect(try replica.applyRemote([change], heads: [head]).applied == 1)
    }

    @Test func theThiefActsFirstAndTheFamilyRecoversAnyway() throws {
        let mom = TestLedger(), dad = TestLedger(), gran = TestLedger(), group = ProcessGroup()
        defer { group.stopAll(); mom.remove(); dad.remove(); gran.remove() }
        let secret = try #require(try json(mom, "init", "Smiths", "--account", "mom")["recoverySecret"] as? String)
        try ok(mom, "child", "add", "Ava")
        try ok(mom, "give", "Ava", "5.00", "--note", "before the theft")
        let momKey = try #require(try Self.members(mom).first { $0["owner"] as? Bool == true }?["key"] as? String)
        let momDaemon = try #require(try DaemonProcess.start(mom, in: group))
        try ok(dad, "join", try inviteCode(mom))
        let dadKey = try #require(try Self.members(mom).first { $0["owner"] as? Bool == false }?["key"] as? String)

        // The thief, on Mom's laptop: a second genesis naming its own recovery secret, synced to Dad.
        let thiefSecret = RecoveryCommands.newRecoveryKey()
        try Self.signSecondGenesis(on: mom, recovery: thiefSecret.publicKey)
        try ok(dad, "sync")
        let warning = "the owner's key signed a second household record: if that laptop was lost, run recover"
        let status = try json(dad, "status")
        #expect(status["secondGeneses"] as? Int == 1 && status["ownerKeyWarning"] as? String == warning, "\(status)")
        #expect(try ok(dad, "status").contains("warning: " + warning))
        let verify = try json(dad, "verify")
        #expect(verify["ok"] as? Bool == true && verify["ownerKeyWarning"] as? String == warning, "\(verify)")
        #expect(try runKidledger(dad, ["verify"]).stdout.contains("warning: " + warning))
        // The thief's own secret is not the household's, on its own laptop as on Dad's.
        let thiefRecover = try runKidledger(mom, ["recover", thiefSecret.text])
        #expect(thiefRecover.code == 65 && Self.text(thiefRecover).contains("not this household's"), "\(thiefRecover)")

        // Then it revokes Dad with the owner key; Dad's laptop learns it at its next sync.
        try ok(mom, "revoke", String(dadKey.prefix(12)), "--yes")
        #expect(try runKidledger(dad, ["sync"]).code == 77)
        _ = momDaemon.stop()

        // Dad recovers with the paper secret (refused on main: the thief's genesis had replaced
        // the recovery key) and revokes the stolen laptop's key.
        let recovered = try runKidledger(dad, ["--json", "recover"], input: secret + "\n")
        #expect(recovered.code == 0, "\(recovered)")
        let dadStatus = try json(dad, "status")
        #expect(dadStatus["state"] as? String != "attentionRequired" && dadStatus["ownerEpoch"] as? Int == 1, "\(dadStatus)")
        #expect(dadStatus["secondGeneses"] as? Int == 1)
        #expect((dadStatus["ownerKeyWarning"] as? String)?.hasPrefix("the former owner's key") == true, "\(dadStatus)")
        try ok(dad, "revoke", String(momKey.prefix(12)), "--yes")
        let dadMembers = try Self.members(dad)
        #expect(dadMembers.first { $0["key"] as? String == dadKey }?["owner"] as? Bool == true)
        #expect(dadMembers.first { $0["key"] as? String == dadKey }?["revoked"] as? Bool == false)
        #expect(dadMembers.first { $0["key"] as? String == momKey }?["revoked"] as? Bool == true)

        // The thief keeps writing, and tries to sync: refused; it learns it is revoked.
        try ok(mom, "give", "Ava", "50.00", "--note", "thief")
        let dadDaemon = try #require(try DaemonProcess.start(dad, in: group))
        let sync = try runKidledger(mom, ["sync", dadDaemon.address])
        #expect((sync.code == 77 || sync.code == 69) && Self.text(sync).contains("revoked"), "\(sync)")
        #expect(try childTable(dad)["Ava"]?[0] == 500, "the thief's $50 never counts")

        // A new laptop joins through Dad: it pins the family's genesis, and sees what Dad sees.
        try ok(gran, "join", try inviteCode(dad))
        #expect(try childTable(gran)["Ava"]?[0] == 500)
        let granStatus = try json(gran, "status")
        #expect(granStatus["secondGeneses"] as? Int == 1 && granStatus["ownerEpoch"] as? Int == 1, "\(granStatus)")
        #expect(try digest(gran) == digest(dad))
        for ledger in [dad, gran] {
            let report = try json(ledger, "verify")
            #expect(report["ok"] as? Bool == true && report["recomputed"] as? Bool == true, "\(report)")
        }
        // The stolen laptop's own recovery secret still is not the household's.
        #expect(try runKidledger(gran, ["recover", thiefSecret.text]).code == 65)
    }
}

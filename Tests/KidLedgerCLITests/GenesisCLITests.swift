import Foundation
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerCLITestSupport
import KidLedgerTestSupport
import Testing
@testable import KidLedgerCLI
@testable import KidLedgerDaemon

/// Issue 20, point 1, through the CLI: forged household records are refused and counted, and
/// `status` and `verify` say how many.
@Suite("Forged household records in status and verify")
struct GenesisCLITests {
    @Test func statusAndVerifyCountForgedHouseholdRecords() throws {
        let l = TestLedger()
        defer { l.remove() }
        _ = l.ok("init", "Smiths")
        _ = l.ok("child", "add", "Ava")
        // What a member's modified client could send: an unsigned record with the household's id.
        do {
            // Under the device's own origin, with its own signed head (as that client would
            // sign it): authenticated, so it is judged as a household record, and forged.
            let replica = try Context(home: l.home, json: false, console: BufferConsole(), clock: SystemClock()).openReplicaForChanges()
            defer { (replica.store as? LMDBEnvironment)?.close() }
            let household = try #require(try replica.household())
            let origin = replica.replicaID
            let held = try #require(try replica.versionVector()[origin])
            let forged = Change(origin: origin, sequence: held + 1, hlc: HLC(millis: 1),
                                operations: [.createHousehold(Household(id: household.id, createdAtMillis: 0))])
            let chain = Replica.chainLink(after: try #require(try replica.chain(origin, at: held)),
                                             onlyVersion: Array(SHA256.hash(RecordCodec.encode(forged)).prefix(8)))
            let head = try #require(replica.signer).head(household: household.id, origin: origin, sequence: held + 1, chain: chain)
            #expect(try replica.applyRemote([forged], heads: [head]).applied == 1)
        }
        let status = try #require(checkJSON(l, "status") as? [String: Any])
        #expect(status["forged"] as? Int == 1 && status["forgedHouseholds"] as? Int == 1, "\(status)")
        #expect(l.ok("status").contains("1 forged record refused, never applied (1 household record)"))
        let verify = try #require(checkJSON(l, "verify") as? [String: Any])
        #expect(verify["ok"] as? Bool == true && verify["forgedHouseholds"] as? Int == 1, "\(verify)")
        // The owner's own laptop still owns the household: it can invite.
        #expect(l.run("invite", "--address", "127.0.0.1:1").code == 0)
        #expect(l.ok("children").contains("Ava"))
    }
}

import Foundation
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTransport
#if canImport(Glibc)
import Glibc
#endif
import KidLedgerTestSupport

let loopback = PeerAddress(host: "127.0.0.1", port: 0)

/// A replica on a real LMDB environment in a fresh temporary directory.
final class LMDBReplica {
    let directory: TemporaryDirectory
    let environment: LMDBEnvironment
    let replica: Replica

    init(seed: UInt64) throws {
        directory = TemporaryDirectory(prefix: "kidledger-tcp")
        environment = try LMDBEnvironment(directory: directory.path, tables: Tables.all, mapSizeBytes: 8 << 20, durable: false)
        replica = try Replica(store: environment, clock: FixedClock(millis: 1_700_000_000_000 + Int64(seed)),
                              random: SplitMix64(seed: seed))
    }

    func remove() {
        environment.close()
        directory.remove()
    }
}

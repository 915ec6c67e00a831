import Foundation
import KidLedgerDomain
import KidLedgerLMDB
import KidLedgerReplica
import KidLedgerTransport
#if canImport(Glibc)
import Glibc
#endif

/// Milliseconds of CLOCK_MONOTONIC (the injected clock of the runner in tests).
func monotonicMillis() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

let loopback = PeerAddress(host: "127.0.0.1", port: 0)

/// Hands a non-Sendable value to exactly one other thread.
/// `@unchecked Sendable`: the creating thread doesn't touch the value until that thread is joined.
struct Handoff<T>: @unchecked Sendable {
    let value: T
}

/// The result of work on a dedicated thread, awaited with a timeout.
/// `@unchecked Sendable`: `result` is written once before `done.signal()` and read after `done.wait`.
final class Background<T>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: T?

    /// Starts `body` on a new thread (not the cooperative pool, since it blocks in poll).
    init(_ body: @escaping @Sendable () -> T) {
        let thread = Thread { [self] in
            result = body()
            done.signal()
        }
        thread.start()
    }

    /// The result, or nil when it didn't arrive within `timeoutMillis`.
    func wait(timeoutMillis: Int = 20_000) -> T? {
        guard done.wait(timeout: .now() + .milliseconds(timeoutMillis)) == .success else { return nil }
        return result
    }
}

/// A replica on a real LMDB environment in a fresh temporary directory.
final class LMDBReplica {
    let directory: String
    let environment: LMDBEnvironment
    let replica: Replica

    init(seed: UInt64) throws {
        var template = Array("/tmp/kidledger-tcp-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        directory = String(decoding: template.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        environment = try LMDBEnvironment(directory: directory, tables: Tables.all, mapSizeBytes: 8 << 20, durable: false)
        replica = try Replica(store: environment, clock: FixedClock(millis: 1_700_000_000_000 + Int64(seed)),
                              random: SplitMix64(seed: seed))
    }

    func remove() {
        environment.close()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A household with child "Ann" on `a`, copied to `b`.
    static func household(_ a: Replica, _ b: Replica) throws -> RecordID {
        let summary = try a.createHousehold(name: "Home")
        try a.addChild(name: "Ann")
        try b.applyRemote(try a.changes(notCoveredBy: [:]))
        return summary.id
    }

    static func give(_ r: Replica, _ count: Int, cents: Int64 = 100) throws {
        for i in 0..<count { try r.post("Ann", signedCents: cents + Int64(i), note: "n\(i)", source: "give") }
    }
}

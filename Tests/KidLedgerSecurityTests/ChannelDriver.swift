import KidLedgerTestSupport
import KidLedgerDomain
@testable import KidLedgerSecurity

/// Two secure channels wired back to back in memory. Bytes travel as frames; a tamper hook may
/// change the n-th frame put on the wire (counted over both directions), and deliveries are chopped
/// into random chunks drawn from a seeded generator.
final class ChannelPair {
    let a: SecureChannel
    let b: SecureChannel
    private(set) var actionsA: [ChannelAction] = []
    private(set) var actionsB: [ChannelAction] = []
    /// Every frame put on the wire, in order, as (from A?, bytes) — after tampering.
    private(set) var wire: [(fromA: Bool, bytes: [UInt8])] = []
    var tamper: ((Int, inout [UInt8]) -> Void)?
    private var toA: [UInt8] = []
    private var toB: [UInt8] = []
    private var g: SplitMix64
    private let maxChunk: Int

    static let household = RecordID(high: 0x1111_2222_3333_4444, low: 0x8555_6666_7777_8888)

    init(a: SecureChannel, b: SecureChannel, seed: UInt64 = 1, maxChunk: Int = 0) {
        self.a = a
        self.b = b
        self.g = SplitMix64(seed: seed)
        self.maxChunk = maxChunk
    }

    /// A standard pair: A initiates, B responds, both in `household` unless told otherwise.
    static func make(seed: UInt64 = 1, maxChunk: Int = 0,
                     householdA: RecordID = household, householdB: RecordID = household,
                     authorizeA: @escaping SecureChannel.Authorize = { _, _, _, _ in nil },
                     authorizeB: @escaping SecureChannel.Authorize = { _, _, _, _ in nil },
                     seedA: UInt64 = 100, seedB: UInt64 = 200) -> ChannelPair {
        let a = try! SecureChannel(role: .initiator, identity: Seeds.identity(1), household: householdA,
                                   seed: Seeds.bytes(64, seed: seedA), authorize: authorizeA)
        let b = try! SecureChannel(role: .responder, identity: Seeds.identity(2), household: householdB,
                                   seed: Seeds.bytes(64, seed: seedB), authorize: authorizeB)
        return ChannelPair(a: a, b: b, seed: seed, maxChunk: maxChunk)
    }

    var establishedA: Bool { actionsA.contains { if case .established = $0 { true } else { false } } }
    var establishedB: Bool { actionsB.contains { if case .established = $0 { true } else { false } } }
    var failureA: SecurityError? { Self.failure(actionsA) }
    var failureB: SecurityError? { Self.failure(actionsB) }
    var plaintextA: [UInt8] { Self.plaintext(actionsA) }
    var plaintextB: [UInt8] { Self.plaintext(actionsB) }

    static func failure(_ actions: [ChannelAction]) -> SecurityError? {
        for case .failed(let e) in actions { return e }
        return nil
    }

    static func plaintext(_ actions: [ChannelAction]) -> [UInt8] {
        var out: [UInt8] = []
        for case .plaintext(let p) in actions { out += p }
        return out
    }

    /// Whether `needle` occurs in `haystack`.
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool { occurs(in: haystack, needle) }

    func start() {
        absorb(a.start(), fromA: true)
        absorb(b.start(), fromA: false)
        run()
    }

    /// Seals `plaintext` on one side and puts it on the wire (nothing if that side cannot seal).
    @discardableResult
    func send(_ plaintext: [UInt8], fromA: Bool) -> Bool {
        guard let bytes = try? (fromA ? a : b).seal(plaintext) else { return false }
        put(bytes, fromA: fromA)
        return true
    }

    /// Delivers everything in flight, in random chunks, until both directions are empty.
    func run() {
        var steps = 0
        while !toA.isEmpty || !toB.isEmpty {
            steps += 1
            precondition(steps < 10_000_000, "runaway")
            if !toB.isEmpty { deliver(toB: true) }
            if !toA.isEmpty { deliver(toB: false) }
        }
    }

    /// Tells both sides the connection ended.
    func hangUp() {
        actionsA += a.connectionClosed()
        actionsB += b.connectionClosed()
    }

    private func deliver(toB: Bool) {
        let pending = toB ? self.toB : toA
        let n = maxChunk <= 0 ? pending.count : min(pending.count, 1 + Int(g.next() % UInt64(maxChunk)))
        let chunk = Array(pending[0..<n])
        if toB {
            self.toB.removeFirst(n)
            absorb(b.receive(chunk), fromA: false)
        } else {
            toA.removeFirst(n)
            absorb(a.receive(chunk), fromA: true)
        }
    }

    private func absorb(_ actions: [ChannelAction], fromA: Bool) {
        for action in actions {
            if case .send(let bytes) = action { put(bytes, fromA: fromA) }
        }
        if fromA { actionsA += actions } else { actionsB += actions }
    }

    /// Splits `bytes` (well-formed frames from a channel) into frames, tampers, and queues them.
    private func put(_ bytes: [UInt8], fromA: Bool) {
        var offset = 0
        while offset < bytes.count {
            let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            var frame = Array(bytes[offset..<offset + 4 + length])
            offset += 4 + length
            tamper?(wire.count, &frame)
            wire.append((fromA, frame))
            if fromA { toB += frame } else { toA += frame }
        }
    }
}

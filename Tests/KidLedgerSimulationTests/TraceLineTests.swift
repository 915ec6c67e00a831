import KidLedgerDomain
import Testing
@testable import KidLedgerSimulation

/// The trace line's time is written digit by digit, as `String` writes it (the trace hash of
/// every seed depends on those bytes).
@Suite("Trace line")
struct TraceLineTests {
    @Test("appendDecimal writes what String(value) writes")
    func decimalDigitsMatchString() {
        var rng = SplitMix64(seed: 11)
        var values: [Int64] = [0, 1, -1, 9, 10, -10, 99, 100, 1_000_000, Int64.max, Int64.min, Int64.min + 1]
        for _ in 0..<200 { values.append(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64)) }
        for value in values {
            var bytes: [UInt8] = [UInt8(ascii: "t"), UInt8(ascii: "=")]
            Simulator.appendDecimal(value, to: &bytes)
            #expect(bytes == Array("t=\(value)".utf8), "\(value)")
        }
    }
}

import KidLedgerDomain

extension Simulator {
    /// Hashes the trace line `t=MILLIS LINE` and a newline (and keeps it, when asked). The line's
    /// bytes are gathered in one reused buffer: no string is built unless it is kept.
    func log(_ line: String) {
        let millis = time.millis - startMillis
        logBytes.removeAll(keepingCapacity: true)
        logBytes.append(UInt8(ascii: "t"))
        logBytes.append(UInt8(ascii: "="))
        Self.appendDecimal(millis, to: &logBytes)
        logBytes.append(UInt8(ascii: " "))
        logBytes.append(contentsOf: line.utf8)
        logBytes.append(UInt8(ascii: "\n"))
        traceHasher.update(logBytes)
        guard keepTrace || scenario != nil else { return }
        let text = "t=\(millis) \(line)"
        if keepTrace { trace.append(text) }
        scenario?.engineLine(text)
    }

    /// Appends `value`'s decimal digits, as `String(value)` writes them, to `bytes` (without
    /// building a string: ``log(_:)`` writes one number per trace line).
    static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var unit: UInt64 = 1  // the place value of the first digit (at most 10^19: no overflow)
        while magnitude / unit >= 10 { unit *= 10 }
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude / unit))
            magnitude %= unit
            unit /= 10
        } while unit > 0
    }
}

enum Digest256Hex {
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }
}

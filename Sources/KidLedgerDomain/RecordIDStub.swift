// TEMPORARY stub until the real RecordID lands (branch money). Delete on merge.
public struct RecordID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var high: UInt64; public var low: UInt64
    public init(high: UInt64, low: UInt64) { self.high = high; self.low = low }
    public static func < (a: RecordID, b: RecordID) -> Bool { (a.high, a.low) < (b.high, b.low) }
    public var bytes: [UInt8] { var w = ByteWriter(); w.write(id: self); return w.bytes }
    public var description: String { String(high, radix: 16) + "-" + String(low, radix: 16) }
    public var hex: String { description }
    public init?(string: String) { return nil }
    public static func random<G: RandomNumberGenerator>(using g: inout G) -> RecordID { RecordID(high: g.next(), low: g.next()) }
    public static func v5(namespace: RecordID, name: String) -> RecordID {
        var h: UInt64 = 1469598103934665603
        for b in name.utf8 { h = (h ^ UInt64(b)) &* 1099511628211 }
        return RecordID(high: h, low: h &* 31)
    }
    public static let namespaceKidLedger = RecordID(high: 1, low: 1)
    public static let zero = RecordID(high: 0, low: 0)
}
public enum Money {
    public static func format(cents: Int128) -> String { "$\(cents)" }
    public static func format(cents: Int64) -> String { "$\(cents)" }
    public static func parseAmount(_ text: String) throws(MoneyError) -> Int64 { guard let v = Int64(text) else { throw .malformed(text) }; return v }
}
public enum MoneyError: Error, Equatable, Sendable, CustomStringConvertible {
    case empty, zero, negative, fractionOfCent, overflow, malformed(String)
    public var description: String { "bad amount" }
}
public enum SHA256 { public static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] { var h = [UInt8](repeating: 0, count: 32); for (i, b) in bytes.enumerated() { h[i % 32] = h[i % 32] &* 31 &+ b }; return h } }

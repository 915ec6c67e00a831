/// Money is Int64 cents; no floating point anywhere.
///
/// Parsing accepts, after trimming surrounding whitespace:
/// - decimal dollars: `5`, `5.`, `.5`, `0.50`, `1.25`, `007` (leading zeros are fine), with an optional
///   leading `$` (`$1.25`); extra decimal places are accepted only when they are zeros (`1.250` is 125 cents);
/// - thousands separators, only when correctly grouped: `1,000.00`, `$12,345,678` (not `1,00`, `0,001`, `1000,000`);
/// - coin names, case-insensitive, singular or plural, optionally preceded by a count and whitespace:
///   `penny`/`pennies` = 1, `cent`/`cents` = 1, `nickel` = 5, `dime` = 10, `quarter` = 25,
///   `half`/`halves`/`half-dollar`/`half dollar` = 50, `dollar` = 100; e.g. `3 quarters`, `2 DIMES`, `1 dollar`.
///
/// Errors are reported by the first rule that fails, in this order: `empty`, `malformed` (syntax),
/// `negative` (a leading `-`, as in `-1`, `-$1` or `$-1`, on a non-zero amount), `zero`, `fractionOfCent`, `overflow`.
/// Only ASCII digits are digits; exponents, hex, `nan`, `inf`, a leading `+`, or inner spaces in a number are malformed.
///
/// Formatting never uses thousands separators (`$1234.56`, `-$0.25`) so output stays machine-friendly
/// and can be fed back to `parseAmount` after dropping the sign.
public enum Money {
    /// Parses a user-typed positive amount into cents, or throws the reason it is not one.
    public static func parseAmount(_ text: String) throws(MoneyError) -> Int64 {
        let trimmed = trimmingWhitespace(text)
        if trimmed.isEmpty { throw .empty }
        var rest = Array(trimmed.utf8)[...]
        var negative = false
        var dollarSign = false
        if rest.first == UInt8(ascii: "-") { negative = true; rest = rest.dropFirst() }
        if rest.first == UInt8(ascii: "$") { dollarSign = true; rest = rest.dropFirst() }
        if !negative, dollarSign, rest.first == UInt8(ascii: "-") { negative = true; rest = rest.dropFirst() }

        let digits: ArraySlice<UInt8>
        let fraction: ArraySlice<UInt8>
        let unit: Int64
        if let decimal = splitDecimal(rest) {
            (digits, fraction, unit) = (decimal.integer, decimal.fraction, 100)
        } else if !dollarSign, let coins = splitCoins(rest) {
            (digits, fraction, unit) = (coins.count, [], coins.cents)
        } else {
            throw .malformed(trimmed)
        }

        let isZero = digits.allSatisfy { $0 == 0 } && fraction.allSatisfy { $0 == 0 }
        if negative && !isZero { throw .negative }
        if isZero { throw .zero }
        if fraction.dropFirst(2).contains(where: { $0 != 0 }) { throw .fractionOfCent }

        var value: Int64 = 0
        for digit in digits {
            let (shifted, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = shifted.addingReportingOverflow(Int64(digit))
            if o1 || o2 { throw .overflow }
            value = next
        }
        let (scaled, o3) = value.multipliedReportingOverflow(by: unit)
        if o3 { throw .overflow }
        let tenths = Int64(fraction.first ?? 0), hundredths = Int64(fraction.dropFirst().first ?? 0)
        let (cents, o4) = scaled.addingReportingOverflow(tenths * 10 + hundredths)
        if o4 { throw .overflow }
        return cents
    }

    /// Formats cents as `$1.25`, `-$0.25`, `$0.00`, `$1234.56` (no thousands separators); exact for all Int64 values.
    public static func format(cents: Int64) -> String {
        formatted(negative: cents < 0, magnitude: cents.magnitude)
    }

    /// Formats a wide balance (a sum of many Int64 amounts can exceed Int64) the same way as `format(cents:)`.
    public static func format(cents: Int128) -> String {
        formatted(negative: cents < 0, magnitude: cents.magnitude)
    }

    // MARK: - Private helpers

    private static func formatted<T: UnsignedInteger>(negative: Bool, magnitude: T) -> String {
        let (dollars, remainder) = magnitude.quotientAndRemainder(dividingBy: 100)
        let cents = Int(remainder)
        return (negative ? "-$" : "$") + String(dollars) + "." + String(cents / 10) + String(cents % 10)
    }

    private static func trimmingWhitespace(_ text: String) -> String {
        guard let first = text.firstIndex(where: { !$0.isWhitespace }),
              let last = text.lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(text[first...last])
    }

    /// Splits `[int][.frac]` into digit values (0...9), removing correctly grouped thousands separators.
    private static func splitDecimal(
        _ bytes: ArraySlice<UInt8>
    ) -> (integer: ArraySlice<UInt8>, fraction: ArraySlice<UInt8>)? {
        let dot = bytes.firstIndex(of: UInt8(ascii: "."))
        let integerPart = bytes[..<(dot ?? bytes.endIndex)]
        let fractionPart = dot.map { bytes[($0 + 1)...] } ?? []
        guard integerPart.count + fractionPart.count > 0,
              let fraction = digitValues(fractionPart) else { return nil }
        let groups = integerPart.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        if groups.count > 1 {
            guard let head = groups.first, (1...3).contains(head.count), head.first != UInt8(ascii: "0"),
                  groups.dropFirst().allSatisfy({ $0.count == 3 }) else { return nil }
        }
        var integer: [UInt8] = []
        integer.reserveCapacity(integerPart.count)
        for group in groups {
            guard let values = digitValues(group) else { return nil }
            integer.append(contentsOf: values)
        }
        return (integer[...], fraction)
    }

    /// Splits `[count <whitespace>] coin-name` into count digit values and the coin's value in cents.
    private static func splitCoins(_ bytes: ArraySlice<UInt8>) -> (count: ArraySlice<UInt8>, cents: Int64)? {
        let lowered = bytes.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 + 32 : $0 }
        let words = lowered.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") })
        guard let firstWord = words.first else { return nil }
        var count: ArraySlice<UInt8> = [1]
        var nameWords = words[...]
        if words.count > 1, let values = digitValues(firstWord) {
            count = values
            nameWords = words.dropFirst()
        }
        let name = String(decoding: Array(nameWords.joined(separator: [UInt8(ascii: " ")])), as: UTF8.self)
        guard let cents = coinValues[name] else { return nil }
        return (count, cents)
    }

    /// Maps ASCII digits to their values, or returns nil if any byte is not an ASCII digit.
    private static func digitValues(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        var values: [UInt8] = []
        values.reserveCapacity(bytes.count)
        for byte in bytes {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            values.append(byte - UInt8(ascii: "0"))
        }
        return values[...]
    }

    private static let coinValues: [String: Int64] = [
        "penny": 1, "pennies": 1, "cent": 1, "cents": 1,
        "nickel": 5, "nickels": 5,
        "dime": 10, "dimes": 10,
        "quarter": 25, "quarters": 25,
        "half": 50, "halves": 50, "half-dollar": 50, "half-dollars": 50, "half dollar": 50, "half dollars": 50,
        "dollar": 100, "dollars": 100,
    ]
}

/// Why a typed amount was rejected by `Money.parseAmount`.
public enum MoneyError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Nothing (or only whitespace) was typed.
    case empty
    /// The amount is zero, e.g. `0` or `$0.00`.
    case zero
    /// The amount has a minus sign, e.g. `-1` or `-$1`.
    case negative
    /// The amount has non-zero digits beyond cents, e.g. `1.001`.
    case fractionOfCent
    /// The amount is above Int64.max cents ($92233720368547758.07).
    case overflow
    /// The text is not an amount at all; carries the (trimmed) text that was typed.
    case malformed(String)

    /// A clear, user-facing sentence explaining the problem.
    public var description: String {
        switch self {
        case .empty:
            return "amount is empty: use dollars like 1.25 or $0.10, or a coin name (penny, nickel, dime, quarter, half, dollar)"
        case .zero:
            return "amount must be greater than zero"
        case .negative:
            return "amount must not be negative: type it without a minus sign"
        case .fractionOfCent:
            return "amount has a fraction of a cent: use at most 2 decimal places"
        case .overflow:
            return "amount is too large (at most \(Money.format(cents: Int64.max)))"
        case .malformed(let text):
            return "\"\(text)\" is not an amount: use dollars like 1.25 or $0.10, or a coin name (penny, nickel, dime, quarter, half, dollar)"
        }
    }
}

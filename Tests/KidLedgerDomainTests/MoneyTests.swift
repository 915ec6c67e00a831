import KidLedgerDomain
import Testing


struct AcceptedAmount: Sendable, CustomTestStringConvertible {
    let text: String
    let cents: Int64
    var testDescription: String { "\(text.debugDescription) -> \(cents)" }
}

struct RejectedAmount: Sendable, CustomTestStringConvertible {
    let text: String
    let error: MoneyError
    var testDescription: String { "\(text.debugDescription) -> \(error)" }
}

let acceptedPairs: [(String, Int64)] = [
    ("1.25", 125), ("$0.10", 10), ("5", 500), ("5.", 500), (".5", 50), (".50", 50), ("0.5", 50),
    ("0.05", 5), ("0.01", 1), ("$1", 100), ("  $2.50\t", 250), ("\n7\n", 700), ("007", 700),
    ("1.250", 125), ("1.2500000000000000000000", 125), ("1,000.00", 100_000), ("$1,000", 100_000),
    ("12,345,678.90", 1_234_567_890), ("999,999", 99_999_900), ("1000000", 100_000_000),
    ("00000000000000000000000000001", 100),
    ("92233720368547758.07", Int64.max), ("$92,233,720,368,547,758.07", Int64.max),
    ("92233720368547758", 9_223_372_036_854_775_800),
    ("penny", 1), ("Pennies", 1), ("nickel", 5), ("DIME", 10), ("quarter", 25), ("half", 50),
    ("half-dollar", 50), ("half dollar", 50), ("Half  Dollars", 50), ("dollar", 100), ("dollars", 100),
    ("3 quarters", 75), ("2 dimes", 20), ("1 penny", 1), ("10 pennies", 10), ("4 nickels", 20),
    ("2 halves", 100), ("5 dollars", 500), ("2\thalf-dollars", 100), (" 3 Quarters ", 75),
    ("1 cent", 1), ("25 cents", 25), ("92233720368547758 dollars", 9_223_372_036_854_775_800),
]
let acceptedAmounts = acceptedPairs.map { AcceptedAmount(text: $0.0, cents: $0.1) }

let rejectedPairs: [(String, MoneyError)] = [
    ("", .empty), ("   ", .empty), ("\t\n", .empty),
    ("0", .zero), ("$0.00", .zero), ("0.000", .zero), (".0", .zero), ("0 quarters", .zero), ("-0", .zero),
    ("-1", .negative), ("-$1", .negative), ("$-1", .negative), ("-0.01", .negative), ("-1.001", .negative),
    ("-quarter", .negative),
    ("1.001", .fractionOfCent), ("0.005", .fractionOfCent), ("1.255", .fractionOfCent),
    ("0.0000000000000000000000001", .fractionOfCent),
    ("92233720368547758.08", .overflow), ("92233720368547759", .overflow),
    ("99999999999999999999999999999999999999", .overflow), ("92233720368547759 dollars", .overflow),
    ("abc", .malformed("abc")), ("1.2.3", .malformed("1.2.3")), ("$", .malformed("$")), ("-", .malformed("-")),
    (".", .malformed(".")), ("1e3", .malformed("1e3")), ("nan", .malformed("nan")), ("inf", .malformed("inf")),
    ("0x10", .malformed("0x10")), ("++1", .malformed("++1")), ("+1", .malformed("+1")), ("--1", .malformed("--1")),
    ("1 000", .malformed("1 000")), ("$$1", .malformed("$$1")), ("1$", .malformed("1$")), ("$ 1", .malformed("$ 1")),
    ("١٢", .malformed("١٢")), ("１２", .malformed("１２")), ("1,00", .malformed("1,00")), (",100", .malformed(",100")),
    ("1000,000", .malformed("1000,000")), ("1,,000", .malformed("1,,000")), ("0,001", .malformed("0,001")),
    ("1,000,", .malformed("1,000,")), ("1.000,00", .malformed("1.000,00")), ("3quarters", .malformed("3quarters")),
    ("$quarter", .malformed("$quarter")), ("quarter 3", .malformed("quarter 3")), ("two dimes", .malformed("two dimes")),
    ("1.5 quarters", .malformed("1.5 quarters")), ("  abc  ", .malformed("abc")), ("1.-5", .malformed("1.-5")),
]
let rejectedAmounts = rejectedPairs.map { RejectedAmount(text: $0.0, error: $0.1) }

@Test(arguments: acceptedAmounts)
func parsesAcceptedAmount(_ amount: AcceptedAmount) throws {
    #expect(try Money.parseAmount(amount.text) == amount.cents)
}

@Test(arguments: rejectedAmounts)
func rejectsAmount(_ amount: RejectedAmount) {
    #expect(throws: amount.error) { try Money.parseAmount(amount.text) }
}

@Test func tablesAreLargeEnough() {
    #expect(acceptedAmounts.count >= 30)
    #expect(rejectedAmounts.count >= 25)
}

@Test(arguments: [
    (0, "$0.00"), (1, "$0.01"), (-1, "-$0.01"), (5, "$0.05"), (10, "$0.10"), (125, "$1.25"), (-25, "-$0.25"),
    (100, "$1.00"), (-100, "-$1.00"), (123_456, "$1234.56"), (1_000_000, "$10000.00"),
    (Int64.max, "$92233720368547758.07"), (Int64.min, "-$92233720368547758.08"), (Int64.min + 1, "-$92233720368547758.07"),
] as [(Int64, String)])
func formatsInt64(_ cents: Int64, _ expected: String) {
    #expect(Money.format(cents: cents) == expected)
    #expect(Money.format(cents: Int128(cents)) == expected)
}

@Test(arguments: [
    (Int128(Int64.max) + 1, "$92233720368547758.08"),
    (Int128(Int64.min) - 1, "-$92233720368547758.09"),
    (Int128(Int64.max) * 1000, "$92233720368547758070.00"),
    (Int128.max, "$1701411834604692317316873037158841057.27"),
    (Int128.min, "-$1701411834604692317316873037158841057.28"),
] as [(Int128, String)])
func formatsInt128(_ cents: Int128, _ expected: String) {
    #expect(Money.format(cents: cents) == expected)
}

@Test func formatThenParseRoundTrips() throws {
    var rng = SplitMix64(seed: 0x6B1D_3C2E)
    for i in 0..<5000 {
        // Mix full-range values with small ones so both long and short strings are covered.
        let raw = rng.next()
        let cents = Int64(truncatingIfNeeded: i % 2 == 0 ? raw >> 1 : raw % 100_000)
        guard cents > 0 else { continue }
        let text = Money.format(cents: cents)
        #expect(text.hasPrefix("$"))
        #expect(try Money.parseAmount(text) == cents)
        #expect(try Money.parseAmount(String(text.dropFirst())) == cents)
    }
}

@Test func errorDescriptionsAreSentences() {
    #expect(MoneyError.zero.description == "amount must be greater than zero")
    #expect(MoneyError.overflow.description == "amount is too large (at most $92233720368547758.07)")
    #expect(MoneyError.malformed("abc").description
        == "\"abc\" is not an amount: use dollars like 1.25 or $0.10, or a coin name (penny, nickel, dime, quarter, half, dollar)")
    #expect(MoneyError.fractionOfCent.description.contains("fraction of a cent"))
    #expect(MoneyError.negative.description.contains("negative"))
    #expect(MoneyError.empty.description.contains("empty"))
}

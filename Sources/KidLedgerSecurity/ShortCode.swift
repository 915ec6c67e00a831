import KidLedgerDomain

/// The short invitation code a parent reads aloud or types (issue 22, point 4): 12 Crockford
/// base32 symbols shown `XXXX-XXXX-XXXX`, 60 bits:
///
/// ```
/// slot 4 bits | secret 46 bits | check 10 bits (two symbols)
/// ```
///
/// The slot names which of the inviting device's (at most 16) open short invitations the code is
/// for; it is sent in clear in the handshake's `hello` and says nothing about the household. The
/// secret is the password of a CPace exchange (``CPace``), so a guess can only be tried online,
/// against the inviting daemon, which counts and limits the tries. The two check symbols are those
/// of a Reed-Solomon-style code over GF(32) (x⁵ + x² + 1): with data symbols d₀…d₉,
/// c₀ = Σ dᵢ·α^(i+1) and c₁ = Σ dᵢ·α^(2(i+1)); every column of the check matrix differs from
/// its neighbour's and none is zero, so every single-symbol error and every transposition of two
/// adjacent symbols is caught (tested exhaustively), and a random error slips through 1 time in 1024.
///
/// Parsing forgives case, spaces and dashes, and Crockford's look-alikes: O is 0, I and L are 1.
public struct ShortCode: Equatable, Sendable {
    /// Which open short invitation of the inviter (0...15).
    public let slot: UInt8
    /// The 46-bit secret.
    public let secret: UInt64

    /// The number of slots (one per open invitation, `DeviceState.openInvitesMax`).
    public static let slots = 16
    /// The bits of the secret.
    public static let secretBits = 46
    /// The symbols of a code (without dashes).
    public static let symbolCount = 12
    static let dataSymbols = 10
    /// Crockford's base32 alphabet (no I, L, O, U).
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    /// A code for `slot` (0...15) with the low 46 bits of `secret`.
    public init(slot: UInt8, secret: UInt64) {
        precondition(Int(slot) < Self.slots, "a short code's slot is 0...15")
        self.slot = slot
        self.secret = secret & ((1 << UInt64(Self.secretBits)) - 1)
    }

    /// A code for `slot` whose secret comes from `random`.
    public init<R: RandomNumberGenerator>(slot: UInt8, using random: inout R) {
        self.init(slot: slot, secret: UInt64.random(in: 0...UInt64.max, using: &random))
    }

    /// Why a text is not a short code.
    public enum ParseError: Error, Equatable, Sendable {
        /// Not shaped like a short code at all (far too short or long).
        case notAShortCode
        /// Shaped like one, but a character, the length or the check symbols are wrong: a typo.
        case mistyped(String)
    }

    /// The 12 symbols as `XXXX-XXXX-XXXX`.
    public var text: String {
        let s = symbols.map { Character(UnicodeScalar(Self.alphabet[Int($0)])) }
        return String(s[0..<4]) + "-" + String(s[4..<8]) + "-" + String(s[8..<12])
    }

    /// The 12 symbol values (0...31): data, then the two check symbols.
    var symbols: [UInt8] {
        let data = Self.dataSymbols(slot: slot, secret: secret)
        return data + Self.check(data)
    }

    /// The password the CPace exchange of this code runs on (both ends derive it the same way; the
    /// inviter keeps it, not the code, while the invitation is open).
    public var password: [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 8)
        let value = UInt64(slot) << UInt64(Self.secretBits) | secret
        for i in 0..<8 { bytes[i] = UInt8(truncatingIfNeeded: value >> UInt64(56 - 8 * i)) }
        return Sodium.genericHash(Array("kidledger short code v1".utf8) + [0] + bytes, key: [], outputCount: 32)
    }

    /// Parses `raw`, forgiving case, spaces, dashes and O/I/L for 0/1/1.
    public static func parse(_ raw: String) -> Result<ShortCode, ParseError> {
        var values: [UInt8] = []
        var bad: Character?
        var count = 0
        for character in raw where !character.isWhitespace && character != "-" {
            count += 1
            let upper = character.uppercased()
            let mapped: String = switch upper { case "O": "0"; case "I", "L": "1"; default: upper }
            if mapped.utf8.count == 1, let v = alphabet.firstIndex(of: mapped.utf8.first!) {
                values.append(UInt8(v))
            } else if bad == nil {
                bad = character
            }
        }
        guard (symbolCount - 3...symbolCount + 3).contains(count) else { return .failure(.notAShortCode) }
        if let bad {
            return .failure(.mistyped("\"\(bad)\" is not one of a short code's characters (0-9 and A-Z without I, L, O, U)"))
        }
        guard values.count == symbolCount else {
            return .failure(.mistyped("a short code has \(symbolCount) characters (XXXX-XXXX-XXXX), this one \(values.count)"))
        }
        let data = Array(values[0..<dataSymbols])
        guard check(data) == Array(values[dataSymbols...]) else { return .failure(.mistyped("its check characters do not match")) }
        var value: UInt64 = 0
        for v in data { value = value << 5 | UInt64(v) }
        return .success(ShortCode(slot: UInt8(value >> UInt64(secretBits)), secret: value))
    }

    static func dataSymbols(slot: UInt8, secret: UInt64) -> [UInt8] {
        let value = UInt64(slot) << UInt64(secretBits) | secret
        return (0..<dataSymbols).map { i in UInt8(truncatingIfNeeded: value >> UInt64(5 * (dataSymbols - 1 - i))) & 31 }
    }

    /// The two check symbols of ten data symbols.
    static func check(_ data: [UInt8]) -> [UInt8] {
        var c0: UInt8 = 0, c1: UInt8 = 0
        for (i, d) in data.enumerated() {
            c0 ^= GF32.multiply(d, GF32.power(i + 1))
            c1 ^= GF32.multiply(d, GF32.power(2 * (i + 1)))
        }
        return [c0, c1]
    }
}

/// Arithmetic in GF(32) with the primitive polynomial x⁵ + x² + 1.
enum GF32 {
    static let exp: [UInt8] = {
        var table = [UInt8](repeating: 0, count: 31)
        var x: UInt8 = 1
        for i in 0..<31 {
            table[i] = x
            x <<= 1
            if x & 32 != 0 { x ^= 0b100101 }
        }
        return table
    }()
    static let log: [Int] = {
        var table = [Int](repeating: 0, count: 32)
        for i in 0..<31 { table[Int(exp[i])] = i }
        return table
    }()

    /// α^n.
    static func power(_ n: Int) -> UInt8 { exp[n % 31] }

    static func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
        a == 0 || b == 0 ? 0 : exp[(log[Int(a)] + log[Int(b)]) % 31]
    }
}

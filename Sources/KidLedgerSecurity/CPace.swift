import CSodium
import KidLedgerDomain

/// CPace over ristretto255 (after draft-irtf-cfrg-cpace; its structure, not its test vectors:
/// the hashes are BLAKE2b): a balanced PAKE. Both ends hold the same low-entropy password (a
/// short code's, ``ShortCode/password``); each sends one group element; both get the same key
/// only when both used the same password, and an eavesdropper, or an active attacker playing one
/// end, learns nothing that lets it test password guesses offline: one session tests one guess.
///
/// ```
/// g   = ristretto255_from_hash(BLAKE2b-512("kidledger cpace v1 generator" | 0x00 | password 32 | sid))
/// y   = scalar_reduce(BLAKE2b-512(key: seed 32, "kidledger cpace v1 scalar"))   (injected randomness)
/// Y   = y·g                                                 (the element sent)
/// K   = y·Y_peer   (refused when the peer's element is not a canonical point, or K is the identity)
/// isk = BLAKE2b-256("kidledger cpace v1 isk" | 0x00 | sid | K | Y_initiator | Y_responder)
/// ```
///
/// Pure: no system randomness (the scalar comes from the seed passed in).
public enum CPace {
    /// Bytes of an element (a ristretto255 encoding) and of a key.
    public static let elementBytes = 32

    /// The generator of `password` for session `sid`.
    public static func generator(password: [UInt8], sid: [UInt8]) -> [UInt8] {
        _ = Sodium.ready
        let hash = Sodium.genericHash(Array("kidledger cpace v1 generator".utf8) + [0] + password + sid, key: [], outputCount: 64)
        var point = [UInt8](repeating: 0, count: 32)
        crypto_core_ristretto255_from_hash(&point, hash)
        return point
    }

    /// The secret scalar from 32 bytes of injected randomness.
    public static func scalar(seed: [UInt8]) -> [UInt8] {
        _ = Sodium.ready
        let wide = Sodium.genericHash(Array("kidledger cpace v1 scalar".utf8), key: seed, outputCount: 64)
        var scalar = [UInt8](repeating: 0, count: 32)
        crypto_core_ristretto255_scalar_reduce(&scalar, wide)
        return scalar
    }

    /// `scalar`·`point`, or nil when `point` is not a canonical element or the product is the identity.
    public static func multiply(_ scalar: [UInt8], _ point: [UInt8]) -> [UInt8]? {
        _ = Sodium.ready
        guard point.count == elementBytes, crypto_core_ristretto255_is_valid_point(point) == 1 else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        guard crypto_scalarmult_ristretto255(&out, scalar, point) == 0 else { return nil }
        return out
    }

    /// The element to send: `scalar`·generator(`password`, `sid`).
    public static func element(scalar: [UInt8], password: [UInt8], sid: [UInt8]) -> [UInt8] {
        multiply(scalar, generator(password: password, sid: sid))!
    }

    /// The intermediate session key, or nil when the peer's element is unacceptable.
    public static func sessionKey(scalar: [UInt8], peerElement: [UInt8], sid: [UInt8],
                                  initiatorElement: [UInt8], responderElement: [UInt8]) -> [UInt8]? {
        guard let k = multiply(scalar, peerElement) else { return nil }
        return Sodium.genericHash(Array("kidledger cpace v1 isk".utf8) + [0] + sid + k + initiatorElement + responderElement,
                                  key: [], outputCount: 32)
    }
}

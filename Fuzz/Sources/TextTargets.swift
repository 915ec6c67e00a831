// Targets for text typed or handed over by people: CSV files (and the import behind them),
// invitation codes and amounts.
import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerReplica
import KidLedgerSecurity
import KidLedgerInMemory

// MARK: - CSV and import

/// A fresh in-memory replica with a household and two children (Ava, Ben), at a fixed time.
func freshReplica() -> Replica {
    do {
        let replica = try Replica(store: MemoryStore(), clock: FixedClock(millis: 1_795_000_000_000), random: SplitMix64(seed: 11))
        _ = try replica.createHousehold(name: "Fuzz")
        _ = try replica.addChild(name: "Ava")
        _ = try replica.addChild(name: "Ben")
        _ = try replica.post("Ava", signedCents: 100, note: "", source: "give")
        return replica
    } catch {
        violated("cannot set up a replica: \(error)")
    }
}

/// The ledger exported as `export --csv` does.
private func export(_ replica: Replica) throws -> String {
    let names = Dictionary(uniqueKeysWithValues: try replica.children(includeArchived: true).map { ($0.id, $0.name) })
    return LedgerCSV.export(try replica.allTransactions(), childNames: names)
}

/// `csv`: the input is a file's text. Properties: the parser either names a line within the file or
/// returns records whose re-encoding parses to the same fields; when the file is a valid ledger CSV,
/// importing it is all or nothing (a refused import changes nothing), importing it again adds
/// nothing, exporting and re-importing adds nothing, and `verify` finds the replica intact.
@Sendable func fuzzCSV(_ data: [UInt8]) {
    let text = String(decoding: data, as: UTF8.self)
    let lines = text.utf8.reduce(1) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
    let records: [CSVRecord]
    do {
        records = try CSV.parse(text)
    } catch {
        check(error.line >= 1 && error.line <= lines, "error at line \(error.line) of a \(lines)-line file: \(error)")
        return
    }
    check(zip(records, records.dropFirst()).allSatisfy { $0.line < $1.line }, "record lines not increasing")
    check(records.allSatisfy { $0.line >= 1 && $0.line <= lines }, "a record line outside the file")
    if let head = records.first {
        let encoded = CSV.encode(header: head.fields, rows: records.dropFirst().map(\.fields))
        let again = try? CSV.parse(encoded)
        check(again?.map(\.fields) == records.map(\.fields), "CSV parse→encode→parse changed the fields")
    }

    guard let rows = try? LedgerCSV.parse(text) else { return }
    let replica = freshReplica()
    do {
        let before = try replica.digest()
        let first: ImportResult
        do {
            first = try replica.importTransactions(rows)
        } catch is LedgerError {
            check(try replica.digest() == before, "a refused import changed the ledger")
            return
        }
        check(first.added + first.alreadyPresent == rows.count, "import accounted for \(first.added + first.alreadyPresent) of \(rows.count) rows")
        let afterFirst = try replica.digest()
        let second = try replica.importTransactions(rows)
        check(second.added == 0 && second.childrenCreated.isEmpty, "re-importing the same file added \(second.added)")
        check(try replica.digest() == afterFirst, "re-importing the same file changed the ledger")
        let exported = try export(replica)
        let third = try replica.importTransactions(try LedgerCSV.parse(exported))
        check(third.added == 0 && third.childrenCreated.isEmpty, "re-importing the export added \(third.added)")
        let report = try replica.verify()
        check(report.isIntact, "verify after import: \(report.problems)")
    } catch {
        violated("import failed unexpectedly: \(error)")
    }
}

@Sendable func csvSeeds() -> [[UInt8]] {
    let replica = freshReplica()
    let exported: String
    do {
        _ = try replica.post("Ben", signedCents: -25, note: "candy, \"sour\"\nwith a line break", source: "take")
        _ = try replica.undo()
        exported = try export(replica)
    } catch {
        violated("cannot build the CSV seeds: \(error)")
    }
    return [
        exported,
        "createdAt,child,amountCents\n2026-11-18T11:00:00.000Z,Ava,100\n2026-11-18T11:00:01.000Z,Zoe,-5\n",
        "\u{FEFF}child,amount,createdAt,note\r\nAva,$1.25,2026-11-18T11:00:00+02:00,\"a, b\"\r\nben,3 quarters,@1795000000000,\r\n",
        "childId,amountCents,createdAt\n00000000-0000-4000-8000-000000000001,7,2026-11-18T11:00:00Z\n",
        "createdAt,child,amountCents\n2026-11-18T11:00:00.000Z,Ava,9223372036854775807\n",
        "a,\"b\nc\",d\n\"\"\n\n\"unterminated\n",
    ].map { Array($0.utf8) }
}

// MARK: - Invitation codes

/// `invite`: input byte 0 chooses whether the rest is the code's text, or the binary body that
/// `KL1-` + base64url would carry. Properties: a parsed code prints as exactly the text it came from
/// (less whitespace) and parses back to itself; base64url decoding and encoding are inverse.
@Sendable func fuzzInvite(_ data: [UInt8]) {
    guard let first = data.first else { return }
    let rest = Array(data.dropFirst())
    let text: String
    if first & 1 == 0 {
        text = String(decoding: rest, as: UTF8.self)
    } else {
        let encoded = Base64URL.encode(rest)
        check(Base64URL.decode(encoded) == rest, "base64url encode→decode is not the identity")
        text = "KL1-" + encoded
    }
    if let body = text.hasPrefix("KL1-") ? Base64URL.decode(String(text.dropFirst(4))) : nil {
        check(Base64URL.encode(body) == String(text.dropFirst(4)), "base64url decode→encode is not the identity")
    }
    guard let code = InviteCode(text: text) else { return }
    check(code.owner.count == 32 && code.secret.count == 16, "key or secret of the wrong length")
    check((1...InviteCode.addressesMax).contains(code.addresses.count) && code.addresses.allSatisfy { !$0.isEmpty },
          "address list out of bounds")
    if let relay = code.relay {
        check(relay.key.count == 32 && relay.streamKey.count == 32 && relay.ownerRelayKey.count == 32, "relay key of the wrong length")
        check((1...InviteCode.relayAddressesMax).contains(relay.addresses.count) && relay.addresses.allSatisfy { !$0.isEmpty },
              "relay address list out of bounds")
    }
    check(code.text == String(text.filter { !$0.isWhitespace }), "parse→text is not the identity")
    check(InviteCode(text: code.text) == code, "text→parse changed the code")
}

@Sendable func inviteSeeds() -> [[UInt8]] {
    let code = InviteCode(household: sampleHousehold.id, owner: Array(repeating: 0x0C, count: 32), genesis: Array(repeating: 0x5A, count: 32), secret: Array(repeating: 0x77, count: 16),
                          expiresAtMillis: 1_795_000_600_000, addresses: ["192.168.1.20:4717", "[::1]:4717"])
    let body = Array(Base64URL.decode(String(code.text.dropFirst(4)))!)
    var relayed = code
    relayed.relay = InviteCode.Relay(key: Array(repeating: 0x11, count: 32), streamKey: Array(repeating: 0x22, count: 32),
                                     ownerRelayKey: Array(repeating: 0x33, count: 32), addresses: ["relay.example:4719"])
    let version3 = Array(Base64URL.decode(String(relayed.text.dropFirst(4)))!)
    return [
        [0] + Array(code.text.utf8),
        [0] + Array(" KL1-\n".utf8) + Array(code.text.dropFirst(4).utf8) + [0x0A],
        [1] + body,
        [1] + body.dropLast(3),
        [0] + Array(relayed.text.utf8),
        [1] + version3,
        [1] + version3.dropLast(5),
    ]
}

// MARK: - Amounts

/// `amount`: the input is typed text, and its first 8 bytes (when there are 8) also a cents value.
/// Properties: an accepted amount is positive, and formats to text that parses back to it; any Int64
/// formats to text that parses back to its magnitude (negative values are refused as negative);
/// the wide formatter agrees with the narrow one.
@Sendable func fuzzAmount(_ data: [UInt8]) {
    let text = String(decoding: data, as: UTF8.self)
    do {
        let cents = try Money.parseAmount(text)
        check(cents > 0, "accepted a non-positive amount \(cents) from \(text.debugDescription)")
        check((try? Money.parseAmount(Money.format(cents: cents))) == cents, "parse→format→parse changed \(text.debugDescription)")
    } catch {
        check(!error.description.isEmpty, "an empty error message")
    }
    guard data.count >= 8 else { return }
    let value = Int64(bitPattern: data.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
    let formatted = Money.format(cents: value)
    check(formatted == Money.format(cents: Int128(value)), "Int64 and Int128 formatting disagree for \(value)")
    let parsed = Result { () throws(MoneyError) -> Int64 in try Money.parseAmount(formatted) }
    switch value {
    case 0: check(parsed == .failure(.zero), "\(formatted) is not refused as zero")
    case 1...: check(parsed == .success(value), "format→parse changed \(value) into \(parsed)")
    default:
        check(parsed == .failure(.negative), "\(formatted) is not refused as negative: \(parsed)")
        if value != .min {
            check((try? Money.parseAmount(String(formatted.dropFirst()))) == -value, "\(formatted) without its sign")
        }
    }
}

@Sendable func amountSeeds() -> [[UInt8]] {
    ["1.25", "$0.10", "5", " 5. ", ".5", "1,000.00", "$12,345,678", "3 quarters", "2 DIMES", "half dollar", "penny",
     "-1", "0", "1.001", "1.250", "abc", "99999999999999999999", "$92233720368547758.07", "92233720368547758.08",
     "\u{7F}\u{FF}\u{FF}\u{FF}\u{FF}\u{FF}\u{FF}\u{FF}"].map { Array($0.utf8) }
}

// MARK: - LAN announcements

/// The announcing member and the receiving one of `announcement` (fixed identities of one household).
private let fuzzSender = try! Identity(seed: Array(repeating: 0x0C, count: 32))
private let fuzzReceiver = try! Identity(seed: Array(repeating: 0x0D, count: 32))
private let fuzzHousehold = RecordID(bytes: Array(repeating: 0x5A, count: 16))
/// The receiver's keys with the sender: what it opens datagrams with.
private let fuzzReceiverKeys = [AnnouncementKeys(identity: fuzzReceiver, member: fuzzSender.publicKey.bytes, household: fuzzHousehold)!]

/// `announcement`: the input is one received UDP datagram (a stranger's, a revoked member's, a
/// member's modified client's). Properties: nothing but an exact-size datagram with the magic
/// opens; one that opens names the sender and a port above 0, and sealing its announcement again
/// with the datagram's own nonce gives one of the datagram's slots back byte for byte.
@Sendable func fuzzAnnouncement(_ data: [UInt8]) {
    guard let announcement = Announcement.open(data, from: fuzzReceiverKeys) else { return }
    check(data.count == Announcement.packetBytes && Array(data.prefix(4)) == Announcement.magic, "a datagram of the wrong shape opened")
    check(announcement.member == fuzzSender.publicKey.bytes && announcement.port > 0, "an announcement of another sender or port 0")
    let nonce = Array(data[4..<(4 + Announcement.nonceBytes)])
    let box = announcement.box(key: fuzzReceiverKeys[0].receive, nonce: nonce)
    let base = 4 + Announcement.nonceBytes
    let slots = (0..<Announcement.recipientsMax).map { Array(data[(base + $0 * Announcement.boxBytes)..<(base + ($0 + 1) * Announcement.boxBytes)]) }
    check(slots.contains(box), "open→seal does not give the slot back")
}

@Sendable func announcementSeeds() -> [[UInt8]] {
    let senderKeys = [AnnouncementKeys(identity: fuzzSender, member: fuzzReceiver.publicKey.bytes, household: fuzzHousehold)!]
    let random = (0..<Announcement.randomBytes).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
    let sealed = Announcement(member: fuzzSender.publicKey.bytes, port: 4717, sentAtMillis: 1_795_000_600_000).sealed(to: senderKeys, random: random)
    return [sealed, Array(sealed.prefix(40)), Announcement.magic + Array(repeating: 0, count: Announcement.packetBytes - 4)]
}

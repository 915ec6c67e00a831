import KidLedgerTransport
import Testing

@Suite struct AddressTests {
    @Test(arguments: [
        ("127.0.0.1:4000", "127.0.0.1", UInt16(4000)),
        ("localhost:1", "localhost", UInt16(1)),
        ("kid-tablet.local:65535", "kid-tablet.local", UInt16(65535)),
        ("[::1]:4000", "::1", UInt16(4000)),
        ("[fe80::1%eth0]:22", "fe80::1%eth0", UInt16(22)),
        ("  10.0.0.2:80 ", "10.0.0.2", UInt16(80)),
    ])
    func parsesValidAddresses(text: String, host: String, port: UInt16) throws {
        let address = try PeerAddress(parsing: text)
        #expect(address == PeerAddress(host: host, port: port))
        #expect(try PeerAddress(parsing: address.description) == address)
    }

    @Test(arguments: [
        ("", "empty"),
        ("127.0.0.1", "no port"),
        ("127.0.0.1:", "empty port"),
        (":4000", "empty host"),
        ("127.0.0.1:0", "out of range"),
        ("127.0.0.1:65536", "out of range"),
        ("127.0.0.1:99999", "out of range"),
        ("127.0.0.1:123456", "not a number"),
        ("127.0.0.1:-1", "not a number"),
        ("127.0.0.1:http", "not a number"),
        ("::1:4000", "brackets"),
        ("[::1]", "no port"),
        ("[::1:4000", "closing"),
        ("[]:4000", "empty host"),
    ])
    func rejectsInvalidAddresses(text: String, reason: String) {
        #expect {
            try PeerAddress(parsing: text)
        } throws: { error in
            guard let error = error as? TransportError, case .badAddress(let why) = error else { return false }
            return why.contains(reason) && error.description.hasPrefix("bad address: ")
        }
    }

    @Test func descriptionsRead() {
        #expect(PeerAddress(host: "::1", port: 9).description == "[::1]:9")
        #expect(TransportError.refused(PeerAddress(host: "127.0.0.1", port: 4000)).description
            == "could not connect to 127.0.0.1:4000: connection refused (is `kidledger serve` running there?)")
        #expect(TransportError.io("recv", 104).description.contains("(errno 104)"))
    }
}

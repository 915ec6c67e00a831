#if canImport(Glibc)
import Glibc
#endif
import CQRencode
import KidLedgerDomain
import KidLedgerProtocol
import KidLedgerTransport
import KidLedgerSecurity
import KidLedgerSystem
import KidLedgerDaemon

/// Joining with a short code (issue 22, point 4): find the inviting daemon by its invitation
/// announcement on the LAN (or at `--address`), prove the code to it in a CPace handshake
/// (``SecureChannel/Mode/shortCode(slot:password:)``), receive the invitation's long code over
/// that channel, then join with the long code as always (docs/PROTOCOL.md, "Joining with a short code").
enum ShortCodeJoin {
    /// How long `join` listens for the invitation's announcement by default.
    static let waitDefaultSeconds = 30
    /// What a well-formed code that no open invitation matches is told.
    static let noMatch = "no open invitation on this network matches that code: check it, or ask for a new one"

    /// What one dial of a daemon with the short code came to.
    enum Outcome {
        case invitation(InviteCode, address: String)
        /// The daemon holds no open invitation this code matches (its try is counted there).
        case mismatch(String)
        case failed(String)
    }

    /// The long code the short one stands for, found by discovery (or at `address`).
    static func resolve(_ code: ShortCode, address: String?, discoveryPort: UInt16, waitSeconds: Int,
                        identity: Identity, console: Console, interactive: Bool) throws -> (InviteCode, address: String) {
        if let address {
            switch fetch(code, at: address, identity: identity) {
            case .invitation(let invite, let at): return (invite, at)
            case .mismatch(let why): throw CLIError("\(noMatch) (\(address): \(why))", code: .notPermitted)
            case .failed(let why):
                throw CLIError("could not reach the inviting device (\(address)): \(why); nothing was changed here", code: .unavailable)
            }
        }
        let sockets = try listeningSockets(port: discoveryPort)
        defer { for socket in sockets { socket.close() } }
        let deadline = Monotonic.millis() + Int64(waitSeconds) * 1_000
        var dialed = Set<String>()
        var problems: [String] = []
        var shown: Int64 = -1
        defer { if shown >= 0 { console.err("\n") } }
        while true {
            let left = deadline - Monotonic.millis()
            guard left > 0 else { break }
            if interactive && (left + 999) / 1_000 != shown {
                shown = (left + 999) / 1_000
                console.err("\rlooking for the inviting laptop on this network (\(shown) s left)…   ")
            }
            var received: (bytes: [UInt8], from: PeerAddress)?
            do {
                // Both families in turn, a short wait on each.
                for socket in sockets where received == nil {
                    received = try socket.receive(timeoutMillis: Int(min(left, 250)) / sockets.count)
                }
            } catch {
                problems.append("listening on UDP port \(discoveryPort) failed: \(error)")
                break
            }
            guard let datagram = received, let announcement = InvitationAnnouncement.parse(datagram.bytes), announcement.matches(code) else { continue }
            let address = PeerAddress(host: datagram.from.host, port: announcement.port).description
            guard dialed.insert(address).inserted, dialed.count <= 8 else { continue }
            switch fetch(code, at: address, identity: identity) {
            case .invitation(let invite, let at): return (invite, at)
            case .mismatch(let why), .failed(let why): problems.append("\(address): \(why)")
            }
        }
        let heard = problems.isEmpty ? "no daemon on this network announced it within \(waitSeconds) s (UDP port \(discoveryPort)); is `kidledger serve` running on the inviting laptop? From another network use the long code (KL1-…)"
            : problems.joined(separator: "; ")
        throw CLIError("\(noMatch) (\(heard))", code: problems.isEmpty ? .unavailable : .notPermitted)
    }

    /// The sockets `join` hears invitation announcements on: IPv4 (broadcasts) and, where this
    /// host has IPv6, IPv6 joined to the announcement group on every interface with IPv6
    /// (a daemon that listens on IPv6 multicasts them there too). Only the IPv4 socket is required.
    static func listeningSockets(port: UInt16) throws -> [UDPSocket] {
        let v4: UDPSocket
        do { v4 = try UDPSocket(binding: PeerAddress(host: "0.0.0.0", port: port)) } catch {
            throw CLIError("cannot listen for the invitation on UDP port \(port) (\(error)); pass --address HOST:PORT of the inviting laptop's daemon", code: .unavailable)
        }
        guard let v6 = try? UDPSocket(binding: PeerAddress(host: "::", port: port)) else { return [v4] }
        var joined = false
        for interface in LocalInterface.all() where interface.isUsable && interface.multicast && !interface.ipv6.isEmpty {
            joined = v6.join(group: Discovery.group, interface: interface.index) || joined
        }
        guard joined else {
            v6.close()
            return [v4]
        }
        return [v4, v6]
    }

    /// One short-code handshake with the daemon at `address`, and the invitation it hands over.
    static func fetch(_ code: ShortCode, at address: String, identity: Identity) -> Outcome {
        let connection: TCPConnection
        do { connection = try TCPConnection.connect(to: try PeerAddress(parsing: address), timeoutMillis: SyncDriver.connectTimeoutMillis) } catch {
            return .failed("\(error)")
        }
        defer { connection.close() }
        do {
            // The household is not known yet: the short-code keys are bound to none. The daemon
            // proves the code; it is the owner if the invitation it hands over names its key.
            let channel = try SecureChannel(role: .initiator, identity: identity, household: .zero,
                                            seed: Sodium.randomBytes(SecureChannel.seedByteCount),
                                            mode: .shortCode(slot: code.slot, password: code.password), authorize: { _, _, _, _ in nil })
            let stream = try SecureStream.establish(channel, over: connection, timeoutMillis: SyncDriver.handshakeTimeoutMillis, now: Monotonic.millis)
            var bytes: [UInt8] = []
            while bytes.count <= 4 << 10 {
                let chunk = try stream.read(maxBytes: 4 << 10, timeoutMillis: SyncDriver.handshakeTimeoutMillis)
                if chunk.isEmpty { break }
                bytes += chunk
            }
            guard let invite = InviteCode(text: String(decoding: bytes, as: UTF8.self)) else {
                return .failed("it proved the code but handed over no invitation (the code may have just been used)")
            }
            guard invite.owner == stream.peerKey.bytes else { return .failed("it handed over an invitation of another device (not its own key)") }
            return .invitation(invite, address: address)
        } catch TransportError.refusedByPeer(let why) where why.contains(SecureChannel.codeMismatch) {
            return .mismatch("it refused the code; its tries are counted")
        } catch {
            return .failed("\(error)")
        }
    }

    /// `text` as a QR code (the same libqrencode matrix as ``qr(_:)``) in SVG, dark modules on
    /// white with a quiet zone of 4 modules, for the page (`invite --json`'s `qrSvg`); nil when it
    /// can't be encoded.
    static func qrSVG(_ text: String) -> String? {
        guard let code = QRcode_encodeString8bit(text, 0, QR_ECLEVEL_L) else { return nil }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width), quiet = 4, size = width + 2 * quiet
        var path = ""
        for y in 0..<width {
            for x in 0..<width where code.pointee.data[y * width + x] & 1 == 1 {
                path += "M\(x + quiet) \(y + quiet)h1v1h-1z"
            }
        }
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(size) \(size)\" shape-rendering=\"crispEdges\">"
            + "<rect width=\"\(size)\" height=\"\(size)\" fill=\"#fff\"/><path fill=\"#000\" d=\"\(path)\"/></svg>"
    }

    /// `text` as a QR code (libqrencode, error correction L) drawn with Unicode half blocks, dark
    /// on light with a quiet zone of 2 modules; nil when it can't be encoded.
    static func qr(_ text: String) -> String? {
        guard let code = QRcode_encodeString8bit(text, 0, QR_ECLEVEL_L) else { return nil }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width), quiet = 2, size = width + 2 * quiet
        func dark(_ x: Int, _ y: Int) -> Bool {
            let (mx, my) = (x - quiet, y - quiet)
            guard mx >= 0, my >= 0, mx < width, my < width else { return false }
            return code.pointee.data[my * width + mx] & 1 == 1
        }
        var out = ""
        for y in stride(from: 0, to: size, by: 2) {
            for x in 0..<size {
                // For a terminal's usual light text on a dark background: the light modules (and
                // the quiet zone) are the blocks, the dark ones the background.
                let top = !dark(x, y), bottom = y + 1 < size ? !dark(x, y + 1) : false
                out += top && bottom ? "█" : top ? "▀" : bottom ? "▄" : " "
            }
            out += "\n"
        }
        return out
    }
}

import Foundation
import Synchronization
import KidLedgerTestSupport
import Testing
import KidLedgerSecurity
import KidLedgerSystem

// Helpers for the membership tests: a tiny TCP relay on 127.0.0.1 that records (and may tamper
// with) the bytes of one session between a `kidledger sync` and a daemon, raw sockets to replay
// recorded bytes, and a parser of the secure channel's frames ([u32 BE length][u8 type][payload]).

/// The identity (Ed25519 key) of `ledger`'s default account, as its `kidledger` runs use it.
public func accountIdentity(_ ledger: TestLedger) throws -> Identity {
    try #require(try KeyStore(directory: ledger.home + "/identities").load(account: "default"), "no identity in \(ledger.home)")
}

/// Channel frame types (see SecureChannel's doc comment).
public enum ChannelFrame {
    public static let hello: UInt8 = 0xF5, reply: UInt8 = 0xF6, confirm: UInt8 = 0xF7, accept: UInt8 = 0xF8, finish: UInt8 = 0xF9
    public static let data: UInt8 = 0xF4, sealed: UInt8 = 0xFA, refused: UInt8 = 0xFE

    /// The complete frames of `bytes` as (type, payload); a trailing partial frame is ignored.
    public static func split(_ bytes: [UInt8]) -> [(type: UInt8, payload: [UInt8])] {
        var out: [(UInt8, [UInt8])] = []
        var i = 0
        while bytes.count - i >= 5 {
            let length = bytes[i..<(i + 4)].reduce(0) { ($0 << 8) | Int($1) }
            guard length >= 1, bytes.count - i >= 4 + length else { break }
            out.append((bytes[i + 4], Array(bytes[(i + 5)..<(i + 4 + length)])))
            i += 4 + length
        }
        return out
    }
}

/// Cuts a byte stream into whole channel frames, so a frame can be changed before it is forwarded.
public struct FrameCutter: Sendable {
    private var buffer: [UInt8] = []
    private var dataFrames = 0
    /// Flip one bit in the middle of the payload of this data frame (1 = the first), if set.
    public var tamperDataFrame: Int?
    public private(set) var tampered = false

    public init() {}

    /// Appends `bytes` and returns the whole frames now available (tampered as asked).
    public mutating func push(_ bytes: [UInt8]) -> [UInt8] {
        buffer += bytes
        var out: [UInt8] = []
        while buffer.count >= 4 {
            let length = buffer[0..<4].reduce(0) { ($0 << 8) | Int($1) }
            guard buffer.count >= 4 + length else { break }
            var frame = Array(buffer[0..<(4 + length)])
            buffer.removeFirst(4 + length)
            if length >= 1, frame[4] == ChannelFrame.data {
                dataFrames += 1
                if dataFrames == tamperDataFrame {
                    let middle = 5 + (length - 1) / 2
                    frame[middle] ^= 0x10
                    tampered = true
                }
            }
            out += frame
        }
        return out
    }

    /// Whatever is left (a partial frame at the end of the stream).
    public mutating func rest() -> [UInt8] {
        defer { buffer = [] }
        return buffer
    }
}

/// A listening TCP socket on 127.0.0.1 with a system-chosen port.
public func listeningSocket() throws -> (fd: Int32, port: Int) {
    try loopbackSocket(listening: true)
}

/// A blocking TCP connection to 127.0.0.1:port, or -1. With `localPort`, the socket is first bound
/// to 127.0.0.1:localPort (-1 when that port is taken). With `source` (another loopback address,
/// e.g. 127.0.0.2: all of 127/8 is this machine), the connection comes from there.
public func connectLocal(_ port: Int, from localPort: Int? = nil, source: String? = nil) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return -1 }
    func call(_ port: Int, host: String = "127.0.0.1", _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        addr.sin_addr.s_addr = inet_addr(host)
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
    if localPort != nil || source != nil, call(localPort ?? 0, host: source ?? "127.0.0.1", { bind(fd, $0, $1) }) != 0 { close(fd); return -1 }
    if call(port, { connect(fd, $0, $1) }) != 0 { close(fd); return -1 }
    return fd
}

/// Writes all of `bytes` (MSG_NOSIGNAL: a closed peer must not SIGPIPE the test runner); false on error.
@discardableResult
public func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var sent = 0
    while sent < bytes.count {
        let n = retryWhileInterrupted { bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
        if n <= 0 { return false }
        sent += n
    }
    return true
}

/// Waits at most `millis` for `fd` to be readable and reads; nil on timeout, [] at the end or on error.
public func receiveSome(_ fd: Int32, millis: Int32) -> [UInt8]? {
    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let r = poll(&p, 1, millis)
    if r == 0 { return nil }
    if r < 0 { return errno == EINTR ? nil : [] }
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    return n > 0 ? Array(buffer[0..<n]) : []
}

/// Sends `bytes` to 127.0.0.1:port on a new connection and returns what comes back until the peer
/// closes or `timeout` s pass. `afterFirstFrame`: send only the first frame, wait for one whole frame
/// back, then send the rest (as a real initiator would); else everything at once.
public func rawExchange(port: Int, _ bytes: [UInt8], staged: Bool = true, timeout: TimeInterval = 15) -> [UInt8] {
    let fd = connectLocal(port)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    let frames = ChannelFrame.split(bytes)
    let firstLength = staged ? frames.first.map { 5 + $0.payload.count } ?? bytes.count : bytes.count
    var received: [UInt8] = []
    let deadline = Deadline(seconds: timeout)
    guard sendAll(fd, Array(bytes.prefix(firstLength))) else { return received }
    var restSent = false
    while !deadline.passed {
        if !restSent && !ChannelFrame.split(received).isEmpty {
            restSent = true
            if !sendAll(fd, Array(bytes.dropFirst(firstLength))) { break }
        }
        guard let chunk = receiveSome(fd, millis: 100) else { continue }
        if chunk.isEmpty { break }
        received += chunk
    }
    return received
}

/// A one-session TCP relay between a client (a `kidledger sync` given the relay's address) and a
/// daemon on 127.0.0.1:target. Records both directions; may flip a bit in one data frame of either
/// direction. Serves exactly one connection, on its own thread, bounded by `timeout`.
public final class Relay: Sendable {
    public let port: Int
    private let listener: Int32
    private let target: Int
    private let state = Mutex<(client: [UInt8], server: [UInt8], tampered: Bool, finished: Bool)>(([], [], false, false))

    /// Bytes the client sent (as received from it, before any tampering).
    public var clientBytes: [UInt8] { state.withLock { $0.client } }
    /// Bytes the daemon sent.
    public var serverBytes: [UInt8] { state.withLock { $0.server } }
    /// Whether the asked-for frame was seen and changed.
    public var tampered: Bool { state.withLock { $0.tampered } }
    public var finished: Bool { state.withLock { $0.finished } }

    public init(to target: Int, tamperClientDataFrame: Int? = nil, tamperServerDataFrame: Int? = nil, timeout: TimeInterval = 30) throws {
        let (fd, port) = try listeningSocket()
        self.listener = fd
        self.port = port
        self.target = target
        var cutterToServer = FrameCutter(), cutterToClient = FrameCutter()
        cutterToServer.tamperDataFrame = tamperClientDataFrame
        cutterToClient.tamperDataFrame = tamperServerDataFrame
        let toServer = cutterToServer, toClient = cutterToClient
        Thread.detachNewThread { [self] in
            relay(toServer: toServer, toClient: toClient, deadline: Deadline(seconds: timeout))
            state.withLock { $0.finished = true }
        }
    }

    public var address: String { "127.0.0.1:\(port)" }

    /// Waits (bounded) for the relayed session to end.
    @discardableResult
    public func waitFinished(timeout: TimeInterval = 30) -> Bool { eventually(timeout: timeout, interval: 0.02) { finished } }

    private func relay(toServer: FrameCutter, toClient: FrameCutter, deadline: Deadline) {
        var toServer = toServer, toClient = toClient
        defer { close(listener) }
        var p = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        var client: Int32 = -1
        while !deadline.passed && client < 0 {
            if poll(&p, 1, 100) > 0 { client = accept(listener, nil, nil) }
        }
        guard client >= 0 else { return }
        defer { close(client) }
        let server = connectLocal(target)
        guard server >= 0 else { return }
        defer { close(server) }
        var clientOpen = true, serverOpen = true
        while !deadline.passed && (clientOpen || serverOpen) {
            var fds = [pollfd(fd: clientOpen ? client : -1, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: serverOpen ? server : -1, events: Int16(POLLIN), revents: 0)]
            let r = poll(&fds, 2, 100)
            if r <= 0 { continue }
            if clientOpen && fds[0].revents != 0 {
                forward(client, to: server, through: &toServer, fromOpen: &clientOpen, toOpen: &serverOpen, fromClient: true)
            }
            if serverOpen && fds[1].revents != 0 {
                forward(server, to: client, through: &toClient, fromOpen: &serverOpen, toOpen: &clientOpen, fromClient: false)
            }
        }
    }

    /// Records what `from` has to read and passes it on to `to` through `cutter`; at `from`'s end,
    /// passes on the rest and ends `to`'s direction. An open flag is cleared when its side ends.
    private func forward(_ from: Int32, to: Int32, through cutter: inout FrameCutter, fromOpen: inout Bool, toOpen: inout Bool,
                         fromClient: Bool) {
        let chunk = receiveSome(from, millis: 0) ?? []
        if chunk.isEmpty {
            fromOpen = false
            sendAll(to, cutter.rest())
            shutdown(to, Int32(SHUT_WR))
        } else {
            state.withLock { if fromClient { $0.client += chunk } else { $0.server += chunk } }
            if !sendAll(to, cutter.push(chunk)) { toOpen = false; shutdown(from, Int32(SHUT_WR)) }
            if cutter.tampered { state.withLock { $0.tampered = true } }
        }
    }
}

import Synchronization

/// A thread-safe count of the connections a server has in service, refusing those past its limits:
/// the whole, the share not yet admitted (still in the handshake or before their sync `hello` was
/// accepted), and the share of one remote address.
///
/// A server calls ``tryAcquire(address:)`` for each accepted connection and serves it only when it
/// gets a ``Slot``; calls ``admit(_:)`` once the peer is admitted (its slot then no longer counts
/// against ``Limits/unadmittedMax``); and calls ``release(_:)`` exactly once when done with it.
/// So strangers, who are never admitted, hold at most ``Limits/unadmittedMax`` slots in all and
/// ``Limits/perAddressMax`` from one address, and admitted members keep the rest.
public final class ConnectionLimiter: Sendable {
    /// The limits (each at least 1; ``unadmittedMax`` and ``perAddressMax`` at most ``connectionsMax``).
    public struct Limits: Equatable, Sendable {
        /// The most connections in service at once.
        public var connectionsMax: Int
        /// The most connections in service at once whose peer is not admitted yet.
        public var unadmittedMax: Int
        /// The most connections in service at once from one remote address (admitted or not).
        public var perAddressMax: Int

        /// Limits; values out of range are clamped.
        public init(connectionsMax: Int, unadmittedMax: Int, perAddressMax: Int) {
            self.connectionsMax = max(connectionsMax, 1)
            self.unadmittedMax = min(max(unadmittedMax, 1), self.connectionsMax)
            self.perAddressMax = min(max(perAddressMax, 1), self.connectionsMax)
        }
    }

    /// Why a connection was refused.
    public enum Refusal: Error, Equatable, Sendable {
        /// ``Limits/connectionsMax`` connections are in service.
        case full(Int)
        /// ``Limits/unadmittedMax`` connections are not admitted yet.
        case unadmittedFull(Int)
        /// ``Limits/perAddressMax`` connections from this address are in service.
        case address(String, Int)

        /// The reason sent to the peer and logged, starting with `busy:`.
        public var reason: String {
            switch self {
            case .full(let n): "busy: already serving \(n) sessions; try again later"
            case .unadmittedFull(let n): "busy: \(n) connections are not admitted yet; try again later"
            case .address(let address, let n): "busy: too many connections from \(address) (\(n) at most); try again later"
            }
        }
    }

    /// One connection's place in the count.
    public struct Slot: Hashable, Sendable {
        /// The remote address it counts against.
        public let address: String
        let number: Int
    }

    private struct State {
        var next = 0
        var unadmitted: Set<Int> = []
        var total = 0
        var perAddress: [String: Int] = [:]
    }

    private let state = Mutex(State())
    /// The limits this limiter enforces.
    public let limits: Limits

    /// Creates a limiter enforcing `limits`.
    public init(_ limits: Limits) {
        self.limits = limits
    }

    /// Takes a slot, not yet admitted, for a connection from `address` (a host, without the port),
    /// or says why not (taking nothing).
    public func tryAcquire(address: String) -> Result<Slot, Refusal> {
        state.withLock { s in
            guard s.total < limits.connectionsMax else { return .failure(.full(limits.connectionsMax)) }
            guard s.unadmitted.count < limits.unadmittedMax else { return .failure(.unadmittedFull(limits.unadmittedMax)) }
            let fromAddress = s.perAddress[address] ?? 0
            guard fromAddress < limits.perAddressMax else { return .failure(.address(address, limits.perAddressMax)) }
            s.next += 1
            s.total += 1
            s.perAddress[address] = fromAddress + 1
            s.unadmitted.insert(s.next)
            return .success(Slot(address: address, number: s.next))
        }
    }

    /// Marks the slot's peer admitted. Idempotent; ignored for a released slot.
    public func admit(_ slot: Slot) {
        _ = state.withLock { $0.unadmitted.remove(slot.number) }
    }

    /// Returns a slot taken by ``tryAcquire(address:)``. Call it exactly once per slot.
    public func release(_ slot: Slot) {
        state.withLock { s in
            s.unadmitted.remove(slot.number)
            precondition(s.total > 0, "a connection slot released more often than taken")
            s.total -= 1
            let left = (s.perAddress[slot.address] ?? 1) - 1
            s.perAddress[slot.address] = left > 0 ? left : nil
        }
    }

    /// The slots taken now.
    public var active: Int {
        state.withLock { $0.total }
    }

    /// The slots taken now whose peer is not admitted yet.
    public var unadmitted: Int {
        state.withLock { $0.unadmitted.count }
    }
}

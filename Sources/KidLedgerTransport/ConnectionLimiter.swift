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
///
/// When the not-admitted share (or the whole) is full, a new connection does not wait behind the
/// strangers holding it: it takes the place of one of them, if their connections can be closed
/// (a slot taken with an `evict` action). The one evicted is from the address holding the most
/// not-admitted slots (counting the new one), the oldest of those: strangers from many addresses
/// must keep opening connections faster than a member's handshake takes to keep it out, and
/// strangers from a few displace themselves first.
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
        /// The slots not admitted yet, with the action that closes each one's connection (nil: it
        /// cannot be evicted).
        var unadmitted: [Int: (address: String, evict: (@Sendable () -> Void)?)] = [:]
        /// Evicted slots: no longer counted, released later by their holder.
        var evicted: Set<Int> = []
        var total = 0
        var perAddress: [String: Int] = [:]

        /// Takes a slot from `address` out of the counts.
        mutating func uncount(from address: String) {
            precondition(total > 0, "a connection slot released more often than taken")
            total -= 1
            let left = (perAddress[address] ?? 1) - 1
            perAddress[address] = left > 0 ? left : nil
        }
    }

    private let state = Mutex(State())
    /// The limits this limiter enforces.
    public let limits: Limits

    /// Creates a limiter enforcing `limits`.
    public init(_ limits: Limits) {
        self.limits = limits
    }

    /// Takes a slot, not yet admitted, for a connection from `address` (a host, without the port),
    /// or says why not (taking nothing). With `evict`, the action that closes this connection, the
    /// slot may later be given to a newer connection while it is not admitted (the action is then
    /// called, once, on the thread of that newer ``tryAcquire(address:evict:)``); ``release(_:)``
    /// is still called for it by its holder.
    public func tryAcquire(address: String, evict: (@Sendable () -> Void)? = nil) -> Result<Slot, Refusal> {
        let (result, victim): (Result<Slot, Refusal>, (@Sendable () -> Void)?) = state.withLock { s in
            let fromAddress = s.perAddress[address] ?? 0
            guard fromAddress < limits.perAddressMax else { return (.failure(.address(address, limits.perAddressMax)), nil) }
            var victim: (@Sendable () -> Void)?
            if s.total >= limits.connectionsMax || s.unadmitted.count >= limits.unadmittedMax {
                guard let evicted = Self.evict(for: address, &s) else {
                    return (.failure(s.total >= limits.connectionsMax ? .full(limits.connectionsMax) : .unadmittedFull(limits.unadmittedMax)), nil)
                }
                victim = evicted
            }
            s.next += 1
            s.total += 1
            s.perAddress[address, default: 0] += 1
            s.unadmitted[s.next] = (address, evict)
            return (.success(Slot(address: address, number: s.next)), victim)
        }
        victim?()
        return result
    }

    /// Takes one evictable not-admitted slot out of the count for a new connection from `address`
    /// (see the type's comment); returns its action, or nil when none can be evicted.
    private static func evict(for address: String, _ s: inout State) -> (@Sendable () -> Void)? {
        var counts: [String: Int] = [address: 1]
        for entry in s.unadmitted.values { counts[entry.address, default: 0] += 1 }
        let candidates = s.unadmitted.filter { $0.value.evict != nil }
        guard let (number, entry) = candidates.min(by: { a, b in
            let (ca, cb) = (counts[a.value.address]!, counts[b.value.address]!)
            return ca != cb ? ca > cb : a.key < b.key
        }) else { return nil }
        s.unadmitted[number] = nil
        s.evicted.insert(number)
        s.uncount(from: entry.address)
        return entry.evict
    }

    /// Marks the slot's peer admitted. Idempotent; ignored for a released or evicted slot.
    public func admit(_ slot: Slot) {
        _ = state.withLock { $0.unadmitted.removeValue(forKey: slot.number) }
    }

    /// Whether the slot was given to a newer connection (its connection closed to make room).
    public func wasEvicted(_ slot: Slot) -> Bool {
        state.withLock { $0.evicted.contains(slot.number) }
    }

    /// Returns a slot taken by ``tryAcquire(address:evict:)``. Call it exactly once per slot.
    public func release(_ slot: Slot) {
        state.withLock { s in
            if s.evicted.remove(slot.number) != nil { return }  // out of the count already
            s.unadmitted[slot.number] = nil
            s.uncount(from: slot.address)
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

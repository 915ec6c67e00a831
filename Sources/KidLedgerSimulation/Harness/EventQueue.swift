/// A priority queue of events ordered by virtual time, then insertion order (like swift-nio's
/// EmbeddedEventLoop: events due at the same time run in the order they were scheduled).
///
/// The heap holds plain (time, order, slot) entries; each event waits in a slot of its own, so
/// sifting moves three integers instead of copying (retaining, releasing) events.
struct EventQueue<Event> {
    private var heap: [(time: Int64, order: UInt64, slot: Int)] = []
    private var slots: [Event?] = []
    private var freeSlots: [Int] = []
    private var nextOrder: UInt64 = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }

    mutating func schedule(at time: Int64, _ event: Event) {
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[free] = event
        } else {
            slot = slots.count
            slots.append(event)
        }
        let entry = (time: time, order: nextOrder, slot: slot)
        nextOrder += 1
        // Sift up with a hole: parents move down until the entry's place is found.
        heap.append(entry)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard Self.less(entry, heap[parent]) else { break }
            heap[i] = heap[parent]
            i = parent
        }
        heap[i] = entry
    }

    mutating func pop() -> (time: Int64, event: Event)? {
        guard let top = heap.first else { return nil }
        let last = heap.removeLast()
        if !heap.isEmpty {
            // Sift the last entry down from the root with a hole.
            var i = 0
            let n = heap.count
            while true {
                let l = 2 * i + 1, r = l + 1
                guard l < n else { break }
                let m = r < n && Self.less(heap[r], heap[l]) ? r : l
                guard Self.less(heap[m], last) else { break }
                heap[i] = heap[m]
                i = m
            }
            heap[i] = last
        }
        var event: Event? = nil
        swap(&event, &slots[top.slot])
        freeSlots.append(top.slot)
        return (top.time, event!)
    }

    private static func less(_ a: (time: Int64, order: UInt64, slot: Int), _ b: (time: Int64, order: UInt64, slot: Int)) -> Bool {
        (a.time, a.order) < (b.time, b.order)
    }

    /// The earliest time of a queued event for which `matches` holds, nil when none does (a scan
    /// of the whole queue: for rare decisions, such as skipping idle time).
    func earliest(where matches: (Event) -> Bool) -> Int64? {
        var best: Int64?
        for entry in heap where matches(slots[entry.slot]!) { best = min(best ?? entry.time, entry.time) }
        return best
    }

    /// Moves every queued event to the time `transform` gives it, or drops it when it gives nil.
    /// Events keep their insertion order among equal times.
    mutating func retime(_ transform: (Int64, Event) -> Int64?) {
        var kept: [(time: Int64, order: UInt64, slot: Int)] = []
        kept.reserveCapacity(heap.count)
        for entry in heap {
            if let time = transform(entry.time, slots[entry.slot]!) {
                kept.append((time: time, order: entry.order, slot: entry.slot))
            } else {
                slots[entry.slot] = nil
                freeSlots.append(entry.slot)
            }
        }
        // A sorted array is a heap.
        kept.sort { Self.less($0, $1) }
        heap = kept
    }
}

/// A priority queue of events ordered by virtual time, then insertion order (like swift-nio's
/// EmbeddedEventLoop: events due at the same time run in the order they were scheduled).
struct EventQueue<Event> {
    private var heap: [(time: Int64, order: UInt64, event: Event)] = []
    private var nextOrder: UInt64 = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }

    mutating func schedule(at time: Int64, _ event: Event) {
        heap.append((time, nextOrder, event))
        nextOrder += 1
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard less(i, parent) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    mutating func pop() -> (time: Int64, event: Event)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count && less(l, m) { m = l }
            if r < heap.count && less(r, m) { m = r }
            if m == i { break }
            heap.swapAt(i, m)
            i = m
        }
        return (top.time, top.event)
    }

    private func less(_ a: Int, _ b: Int) -> Bool {
        (heap[a].time, heap[a].order) < (heap[b].time, heap[b].order)
    }
}

import KidLedgerDomain

/// What a run's space-time diagram draws, recorded as the run goes (times are virtual
/// milliseconds from the start of the run).
public struct DiagramLog: Sendable {
    /// A point event on one replica's lane.
    public enum Mark: String, Sendable {
        case crash, restart, staleRestart, accountSwitch, accountBack, revocation, operation
    }

    public struct Message: Sendable, Equatable {
        public var from: Int, to: Int
        public var sent: Int64, delivered: Int64
        /// The connection it belongs to (`c3` in the trace and timeline).
        public var session: Int
    }

    public struct Loss: Sendable, Equatable {
        public var from: Int, to: Int
        public var at: Int64
    }

    public struct Point: Sendable, Equatable {
        public var mark: Mark
        public var replica: Int
        public var at: Int64
        /// What happened, for the mark's tooltip (a user operation: the step and its outcome).
        public var label: String?
    }

    public struct Partition: Sendable, Equatable {
        public var start: Int64
        public var end: Int64?
        /// The replicas cut off from the others.
        public var group: [Int]
    }

    public var replicas: Int
    public var messages: [Message] = []
    public var losses: [Loss] = []
    public var points: [Point] = []
    public var partitions: [Partition] = []
    /// When the faults healed (end of a fuzz run's fault phase, or after a scenario's last step).
    public var healMillis: Int64?
    public var endMillis: Int64 = 0
    /// When the first check failed, and what it said.
    public var failureMillis: Int64?
    public var failure: String?

    public init(replicas: Int) { self.replicas = replicas }

    mutating func message(from: Int, to: Int, sent: Int64, delivered: Int64, session: Int) {
        messages.append(Message(from: from, to: to, sent: sent, delivered: delivered, session: session))
    }

    mutating func lost(from: Int, to: Int, at: Int64) { losses.append(Loss(from: from, to: to, at: at)) }

    mutating func mark(_ mark: Mark, _ replica: Int, at: Int64, label: String? = nil) {
        points.append(Point(mark: mark, replica: replica, at: at, label: label))
    }

    /// The partition is now `group` (empty: none).
    mutating func partition(_ group: Set<Int>, at: Int64) {
        if let last = partitions.indices.last, partitions[last].end == nil { partitions[last].end = at }
        if !group.isEmpty { partitions.append(Partition(start: at, end: nil, group: group.sorted())) }
    }
}

/// Draws a run as an SVG space-time diagram: one horizontal lane per replica, time to the right.
/// Pure string generation: the same log gives the same bytes.
public enum SpaceTimeDiagram {
    /// More deliveries than this are aggregated (per direction and time slice) into fewer arrows.
    public static let maxArrows = 600
    /// At most this many lost chunks and user operations are drawn each (evenly thinned beyond).
    public static let maxMarks = 1_500

    static let width = 1_200
    static let left = 70, right = 30, top = 70, laneGap = 56

    // long-function: one SVG document written top to bottom; its parts share the layout's coordinates.
    /// The diagram of `log`, titled `title`.
    public static func svg(_ log: DiagramLog, title: String) -> String {
        let n = max(1, log.replicas)
        let plotWidth = Double(width - left - right)
        let end = max(log.endMillis + log.endMillis / 40, 1)  // a margin after the last event
        let lanesBottom = top + (n - 1) * laneGap
        let axisY = lanesBottom + 34
        let legendTop = axisY + 36
        let legend = legendLines(log, end: end)
        let height = legendTop + 18 * legend.count + 16
        func xv(_ t: Int64) -> Double { Double(left) + plotWidth * Double(min(max(t, 0), end)) / Double(end) }
        func x(_ t: Int64) -> String { fmt(xv(t)) }
        func y(_ lane: Int) -> Int { top + lane * laneGap }

        var out: [String] = []
        out.append(##"<?xml version="1.0" encoding="UTF-8"?>"##)
        out.append(##"<svg xmlns="http://www.w3.org/2000/svg" width="\##(width)" height="\##(height)" viewBox="0 0 \##(width) \##(height)" font-family="DejaVu Sans, sans-serif" font-size="12">"##)
        out.append(##"<defs><marker id="arrow" viewBox="0 0 6 6" refX="6" refY="3" markerUnits="userSpaceOnUse" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="#3060c0"/></marker></defs>"##)
        out.append(##"<rect class="background" x="0" y="0" width="\##(width)" height="\##(height)" fill="white"/>"##)
        out.append(##"<text class="title" x="\##(left)" y="24" font-size="15" font-weight="bold">\##(escape(title))</text>"##)

        // Partitions: both sides of the cut, shaded in two colours (the replicas cut off orange,
        // the rest blue): each lane reaches only the lanes in its own colour.
        out.append(##"<g class="partitions">"##)
        for p in log.partitions {
            let stop = p.end ?? log.healMillis ?? end
            for lane in 0..<n {
                let cutOff = p.group.contains(lane)
                let (side, colour) = cutOff ? ("cut-off", "#f5a623") : ("rest", "#4a90e2")
                out.append(##"<rect class="partition" data-side="\##(side)" x="\##(x(p.start))" y="\##(y(lane) - 20)" width="\##(fmt(max(1, xv(stop) - xv(p.start))))" height="40" fill="\##(colour)" fill-opacity="\##(cutOff ? "0.28" : "0.18")"/>"##)
            }
        }
        out.append("</g>")

        // Down and switched-away stretches of each lane.
        out.append(##"<g class="stretches">"##)
        for lane in 0..<n {
            for (start, stop, kind) in stretches(log, lane: lane, end: end) {
                let colour = kind == "down" ? "#d0021b" : "#9013fe"
                out.append(##"<rect class="\##(kind)" x="\##(x(start))" y="\##(y(lane) - 5)" width="\##(fmt(max(1, xv(stop) - xv(start))))" height="10" fill="\##(colour)" fill-opacity="0.25"/>"##)
            }
        }
        out.append("</g>")

        // Lanes.
        out.append(##"<g class="lanes">"##)
        for lane in 0..<n {
            out.append(##"<line class="lane" data-replica="r\##(lane)" x1="\##(left)" y1="\##(y(lane))" x2="\##(width - right)" y2="\##(y(lane))" stroke="#222" stroke-width="1.2"/>"##)
            out.append(##"<text class="lane-label" x="\##(left - 12)" y="\##(y(lane) + 4)" text-anchor="end" font-weight="bold">r\##(lane)</text>"##)
        }
        out.append("</g>")

        // Deliveries: one arrow each, or aggregated per direction and time slice when there are many.
        out.append(##"<g class="messages" stroke="#3060c0" fill="none">"##)
        for arrow in arrows(log.messages, end: end).arrows {
            out.append(##"<line x1="\##(x(arrow.sent))" y1="\##(y(arrow.from))" x2="\##(x(arrow.delivered))" y2="\##(y(arrow.to))" stroke-width="\##(fmt(arrow.width))" stroke-opacity="0.55" marker-end="url(#arrow)"><title>\##(escape(arrowTitle(arrow)))</title></line>"##)
        }
        out.append("</g>")

        // Lost chunks: a red stub from the sender towards the receiver, ending in a cross.
        out.append(##"<g class="losses" stroke="#d0021b" stroke-width="1.2">"##)
        for loss in thinned(log.losses, maxMarks) where loss.from < n && loss.to < n {
            let x0 = xv(loss.at), y0 = Double(y(loss.from)), y1 = y0 + Double(y(loss.to) - y(loss.from)) / 3
            out.append(##"<path d="M\##(fmt(x0)),\##(fmt(y0)) L\##(fmt(x0 + 6)),\##(fmt(y1)) M\##(fmt(x0 + 3)),\##(fmt(y1 - 3)) l6,6 m0,-6 l-6,6"/>"##)
        }
        out.append("</g>")

        // Point events on the lanes.
        out.append(##"<g class="marks">"##)
        let operations = thinned(log.points.filter { $0.mark == .operation }, maxMarks)
        for p in operations + log.points.filter({ $0.mark != .operation }) where p.replica < n {
            let tooltip = "r\(p.replica) at \(duration(p.at)): " + (p.label ?? markName(p.mark))
            out.append(##"<g class="mark"><title>\##(escape(tooltip))</title>"## + symbol(p.mark, x: xv(p.at), y: Double(y(p.replica))) + "</g>")
        }
        out.append("</g>")

        // Session labels: each connection's name where its first delivery starts (one arrow per
        // delivery only; aggregated arrows carry no single session).
        if arrows(log.messages, end: end).sliceMillis == nil {
            out.append(##"<g class="sessions" font-size="9" fill="#3060c0">"##)
            var labelled = Set<Int>()
            for m in log.messages where m.from < n && m.to < n && labelled.insert(m.session).inserted {
                let above = m.to > m.from ? -4 : 11
                out.append(##"<text class="session-label" x="\##(fmt(xv(m.sent) + 2))" y="\##(y(m.from) + above)">c\##(m.session)</text>"##)
            }
            out.append("</g>")
        }

        // The faults heal.
        if let heal = log.healMillis {
            out.append(##"<line class="heal" x1="\##(x(heal))" y1="\##(top - 30)" x2="\##(x(heal))" y2="\##(lanesBottom + 24)" stroke="#4a4a4a" stroke-dasharray="5,4"/>"##)
            out.append(##"<text x="\##(x(heal))" y="\##(top - 34)" text-anchor="middle" fill="#4a4a4a">faults heal</text>"##)
        }

        // The failing check.
        if let at = log.failureMillis {
            let fx = xv(at)
            out.append(##"<g class="failure">"##)
            out.append(##"<rect x="\##(fmt(fx - 4))" y="\##(top - 30)" width="8" height="\##(lanesBottom - top + 54)" fill="#d0021b" fill-opacity="0.5"/>"##)
            let anchor = fx > Double(width) / 2 ? "end" : "start"
            let tx = anchor == "end" ? fx - 8 : fx + 8
            let text = "FAILED at t=\(duration(at)): " + truncated(log.failure ?? "a check failed", 120)
            out.append(##"<text x="\##(fmt(tx))" y="\##(lanesBottom + 22)" text-anchor="\##(anchor)" fill="#d0021b" font-weight="bold">\##(escape(text))</text>"##)
            out.append("</g>")
        }

        // Time axis.
        out.append(##"<g class="axis" fill="#444">"##)
        out.append(##"<line x1="\##(left)" y1="\##(axisY)" x2="\##(width - right)" y2="\##(axisY)" stroke="#444"/>"##)
        let step = tickStep(end)
        var t: Int64 = 0
        while t <= end {
            out.append(##"<line x1="\##(x(t))" y1="\##(axisY)" x2="\##(x(t))" y2="\##(axisY + 5)" stroke="#444"/><text x="\##(x(t))" y="\##(axisY + 18)" text-anchor="middle" font-size="11">\##(timeLabel(t, step))</text>"##)
            t += step
        }
        out.append("</g>")

        out.append(##"<g class="legend" font-size="11">"##)
        for (i, line) in legend.enumerated() {
            out.append(##"<text x="\##(left)" y="\##(legendTop + 18 * i)">\##(escape(line))</text>"##)
        }
        out.append("</g>")
        out.append("</svg>")
        return out.joined(separator: "\n") + "\n"
    }

    struct Arrow { var from: Int, to: Int, sent: Int64, delivered: Int64, width: Double, count: Int, session: Int? }

    /// An arrow's tooltip: its session and times, or how many deliveries it stands for.
    static func arrowTitle(_ a: Arrow) -> String {
        let span = "r\(a.from) → r\(a.to), sent at \(duration(a.sent)), delivered at \(duration(a.delivered))"
        if let session = a.session { return "c\(session) " + span }
        return "\(a.count) deliveries " + span + " (mean times)"
    }

    /// A mark's kind in words (the tooltip of a mark without a label).
    static func markName(_ mark: DiagramLog.Mark) -> String {
        switch mark {
        case .crash: return "crash"
        case .restart: return "restart"
        case .staleRestart: return "restart from a stale copy of its files"
        case .accountSwitch: return "switched to another account"
        case .accountBack: return "back on its account"
        case .revocation: return "its account revoked"
        case .operation: return "user operation"
        }
    }

    /// One arrow per delivery; beyond `maxArrows`, one per direction and time slice, with slices
    /// of 1/256 of the run, or 1/128, … (at coarsest 1/8) until at most `maxArrows` remain.
    /// Returns the arrows and the slice length (nil: not aggregated).
    static func arrows(_ messages: [DiagramLog.Message], end: Int64) -> (arrows: [Arrow], sliceMillis: Int64?) {
        if messages.count <= maxArrows {
            return (messages.map { Arrow(from: $0.from, to: $0.to, sent: $0.sent, delivered: $0.delivered, width: 0.9, count: 1, session: $0.session) }, nil)
        }
        var slices: Int64 = 256
        while true {
            let slice = max(1, end / slices)
            let aggregated = aggregate(messages, slice: slice)
            if aggregated.count <= maxArrows || slices <= 8 { return (aggregated, slice) }
            slices /= 2
        }
    }

    static func aggregate(_ messages: [DiagramLog.Message], slice: Int64) -> [Arrow] {
        var order: [String] = []
        var groups: [String: Arrow] = [:]
        for m in messages {
            let key = "\(m.from)>\(m.to)@\(m.sent / slice)"
            if var g = groups[key] {
                g.sent += m.sent; g.delivered += m.delivered; g.count += 1
                groups[key] = g
            } else {
                groups[key] = Arrow(from: m.from, to: m.to, sent: m.sent, delivered: m.delivered, width: 0, count: 1, session: nil)
                order.append(key)
            }
        }
        return order.map { key in
            var g = groups[key]!
            g.width = 0.7
            var c = g.count
            while c > 1 { g.width += 0.45; c /= 2 }
            (g.sent, g.delivered) = (g.sent / Int64(g.count), g.delivered / Int64(g.count))
            return g
        }
    }

    /// Every k-th element, so that at most `limit` remain.
    static func thinned<T>(_ items: [T], _ limit: Int) -> [T] {
        guard items.count > limit else { return items }
        let k = (items.count + limit - 1) / limit
        return items.enumerated().filter { $0.offset % k == 0 }.map(\.element)
    }

    /// The stretches a lane is down (crash → restart) or switched to another account.
    static func stretches(_ log: DiagramLog, lane: Int, end: Int64) -> [(Int64, Int64, String)] {
        var out: [(Int64, Int64, String)] = []
        var down: Int64?, away: Int64?
        for p in log.points where p.replica == lane {
            switch p.mark {
            case .crash: if down == nil { down = p.at }
            case .restart, .staleRestart: if let d = down { out.append((d, p.at, "down")); down = nil }
            case .accountSwitch: if away == nil { away = p.at }
            case .accountBack: if let a = away { out.append((a, p.at, "away")); away = nil }
            default: break
            }
        }
        if let d = down { out.append((d, end, "down")) }
        if let a = away { out.append((a, end, "away")) }
        return out
    }

    static func symbol(_ mark: DiagramLog.Mark, x: Double, y: Double) -> String {
        let (cx, cy) = (fmt(x), fmt(y))
        switch mark {
        case .operation:
            return ##"<circle class="operation" cx="\##(cx)" cy="\##(cy)" r="2.2" fill="#7a7a7a"/>"##
        case .crash:
            return ##"<path class="crash" d="M\##(fmt(x - 6)),\##(fmt(y - 6)) l12,12 m0,-12 l-12,12" stroke="#d0021b" stroke-width="3"/>"##
        case .restart, .staleRestart:
            let colour = mark == .restart ? "#2e8b57" : "#e67e00"
            let triangle = ##"<path class="\##(mark.rawValue)" d="M\##(fmt(x - 6)),\##(fmt(y + 7)) L\##(fmt(x)),\##(fmt(y - 7)) L\##(fmt(x + 6)),\##(fmt(y + 7)) z" fill="\##(colour)"/>"##
            return mark == .restart ? triangle : triangle + ##"<text x="\##(fmt(x + 8))" y="\##(fmt(y - 8))" fill="\##(colour)" font-weight="bold">stale</text>"##
        case .accountSwitch, .accountBack:
            return ##"<path class="\##(mark.rawValue)" d="M\##(cx),\##(fmt(y - 7)) l6,7 l-6,7 l-6,-7 z" fill="\##(mark == .accountSwitch ? "#9013fe" : "white")" stroke="#9013fe"/>"##
        case .revocation:
            return ##"<g class="revocation"><circle cx="\##(cx)" cy="\##(cy)" r="7" fill="black"/><text x="\##(cx)" y="\##(fmt(y + 4))" text-anchor="middle" fill="white" font-size="10" font-weight="bold">R</text></g>"##
        }
    }

    static func legendLines(_ log: DiagramLog, end: Int64) -> [String] {
        let (drawn, slice) = arrows(log.messages, end: end)
        var lines = ["Lanes: one per replica, time to the right (0 to \(duration(log.endMillis)) of virtual time). Hover a mark or arrow for what it is."]
        if let slice {
            lines.append("Blue arrows: \(log.messages.count) deliveries, aggregated into \(drawn.count) arrows: one per direction and \(duration(slice)) slice, from the mean send to the mean delivery time; thicker = more.")
        } else {
            lines.append("Blue arrows: \(log.messages.count) deliveries of a chunk of bytes, from send time (sender's lane) to delivery time (receiver's lane).")
        }
        let lossNote = log.losses.count > maxMarks ? " (one in \((log.losses.count + maxMarks - 1) / maxMarks) drawn)" : ""
        lines.append("Red stub with a cross: \(log.losses.count) chunks lost by the network\(lossNote). Orange and blue bands: the two sides of a partition.")
        let ops = log.points.filter { $0.mark == .operation }.count
        lines.append("Gray dot: \(ops) user operations\(ops > maxMarks ? " (thinned)" : ""). Red cross / red band: crash, replica down. Green triangle: restart; orange 'stale': restored from an old copy.")
        lines.append("Purple diamond / band: the device switched to another account (frozen), hollow diamond: back. Black R: its account revoked. Dashed line: faults heal.")
        lines.append(log.failureMillis == nil ? "No check failed." : "Thick red band: where the first check failed (its message is printed next to it).")
        return lines
    }

    static let second: Int64 = 1_000, minute: Int64 = 60_000, hour: Int64 = 3_600_000, day: Int64 = 86_400_000

    /// Tick steps in human units: 1, 2, 5 × 10^k ms below a second, then whole seconds, minutes,
    /// hours and days.
    static let tickSteps: [Int64] = [1, 2, 5, 10, 20, 50, 100, 200, 500]
        + [1, 2, 5, 10, 15, 30].map { $0 * second } + [1, 2, 5, 10, 15, 30].map { $0 * minute }
        + [1, 2, 3, 6, 12].map { $0 * hour } + [1, 2, 7, 14, 28].map { $0 * day }

    /// The smallest tick step giving at most about 12 ticks (beyond 28 days, multiples of 28 days).
    static func tickStep(_ end: Int64) -> Int64 {
        if let step = tickSteps.first(where: { end / $0 <= 12 }) { return step }
        return (end / (12 * 28 * day) + 1) * 28 * day
    }

    static func timeLabel(_ t: Int64, _ step: Int64) -> String { duration(t) }

    /// A virtual time in human units: `250 ms`, `1.5 s`, `2 min 30 s`, `2 h 5 min`, `3 d`, `1 d 4 h`
    /// (the two largest units; what is below them is left out).
    static func duration(_ millis: Int64) -> String {
        let t = millis.magnitude, sign = millis < 0 ? "-" : ""
        if t < UInt64(second) { return "\(sign)\(t) ms" }
        if t < UInt64(minute) {
            let tenths = t / 100
            return sign + (tenths % 10 == 0 ? "\(tenths / 10) s" : "\(tenths / 10).\(tenths % 10) s")
        }
        let units: [(UInt64, String)] = [(UInt64(day), "d"), (UInt64(hour), "h"), (UInt64(minute), "min"), (UInt64(second), "s")]
        guard let first = units.firstIndex(where: { t >= $0.0 }) else { return "\(sign)\(t) ms" }
        let (big, bigName) = units[first]
        var text = "\(sign)\(t / big) \(bigName)"
        if first + 1 < units.count {
            let (small, smallName) = units[first + 1]
            let rest = t % big / small
            if rest > 0 { text += " \(rest) \(smallName)" }
        }
        return text
    }

    /// Fixed-point text with one decimal, from a Double coordinate (coordinates only; no money).
    static func fmt(_ v: Double) -> String {
        let tenths = Int((v * 10).rounded())
        let sign = tenths < 0 ? "-" : ""
        let m = abs(tenths)
        return m % 10 == 0 ? "\(sign)\(m / 10)" : "\(sign)\(m / 10).\(m % 10)"
    }

    static func truncated(_ text: String, _ limit: Int) -> String {
        text.count <= limit ? text : String(text.prefix(limit - 1)) + "…"
    }

    /// XML character escaping for text and attribute values.
    static func escape(_ text: String) -> String { TextEscaping.xml(text) }
}

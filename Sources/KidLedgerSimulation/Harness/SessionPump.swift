import KidLedgerProtocol

extension Simulator {
    /// Runs two sessions against each other directly (no network, no faults) until neither has a
    /// message left; returns how each ended ("finished", "failed: …", or nil).
    static func pump(_ initiator: SyncSession, _ responder: SyncSession, maxMessages: Int = 1_000_000) -> [String?] {
        let sessions = [initiator, responder]
        var inbox: [[[UInt8]]] = [[], []]
        var ends: [String?] = [nil, nil]
        func take(_ actions: [SessionAction], _ side: Int) {
            for action in actions {
                switch action {
                case .send(let bytes): inbox[1 - side].append(bytes)
                case .finished: ends[side] = "finished"
                case .failed(let error): ends[side] = "failed: \(error)"
                }
            }
        }
        take(responder.start(), 1)
        take(initiator.start(), 0)
        var messages = 0
        while messages < maxMessages, let side = (0..<2).first(where: { !inbox[$0].isEmpty && ends[$0] == nil }) {
            take(sessions[side].receive(inbox[side].removeFirst()), side)
            messages += 1
        }
        return ends
    }
}

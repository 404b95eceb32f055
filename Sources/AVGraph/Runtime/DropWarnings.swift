/// Turns what a node's input queues dropped into warnings. `stats` counts drops, but a person
/// reading the log would otherwise never learn that a node fell behind and lost media: the first
/// drop is said at the next stats tick, later ones at most every `quietSeconds` per node, and
/// what is left unsaid when the run ends is said then.
struct DropWarnings {
    static let quietSeconds = 10.0

    private struct Said {
        var drops: [Int]
        var at: Double
    }
    private var said: [String: Said] = [:]

    /// The warnings due at wall time `now` (seconds), as (node, message); `final` says all that is left.
    mutating func due(_ runners: [PipelineRun.NodeRunner], now: Double, final: Bool = false) -> [(node: String, message: String)] {
        var out: [(node: String, message: String)] = []
        for r in runners {
            let figures = r.inbox.laneFigures
            let drops = figures.map(\.dropped)
            let before = said[r.name]
            let previous = before?.drops ?? drops.map { _ in 0 }
            guard drops != previous else { continue }
            if let before, !final, now - before.at < Self.quietSeconds { continue }
            var parts: [String] = []
            for (i, lane) in figures.enumerated() where lane.dropped > previous[i] {
                let policy = r.inbox.lanes[i].policy
                parts.append("\(lane.dropped - previous[i]) \(lane.kind) buffers on input \(i + 1) (queue of \(lane.capacity), \(policy.rawValue))")
            }
            let since = before.map { String(format: " in the last %.0f s", now - $0.at) } ?? ""
            out.append((r.name, "dropped " + parts.joined(separator: ", ") + since
                + ": the node does not keep up with its input"))
            said[r.name] = Said(drops: drops, at: now)
        }
        return out
    }
}

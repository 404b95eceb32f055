import Foundation
import Synchronization

/// What a running pipeline has counted, node by node and edge by edge, typed: `/metrics`,
/// `ctl NAME graph` and the status line read it.
public struct NodeCounters: Sendable {
    public struct Output: Sendable {
        public var pad: String
        public var buffers: Int
        public var bytes: Int
        /// Media time of the last buffer out, in seconds (nil before the first).
        public var mediaTime: Double?
    }

    public struct Input: Sendable {
        /// `node` or `node.pad` upstream.
        public var from: String
        public var pad: String
        public var kind: MediaKind
        public var depth: Int
        public var capacity: Int
        public var dropped: Int
    }

    public var name: String
    public var type: String
    public var outputs: [Output]
    public var inputs: [Input]
    /// Media the node dropped itself (a live sink over its buffer), by kind.
    public var ownDrops: [MediaKind: Int]
    /// Figures the node reports itself (`Outlet.report`).
    public var gauges: [String: Double]
}

extension PipelineRun {
    public func counters() -> [NodeCounters] {
        zip(runners, pipeline.nodes).map { r, n in
            let s = r.outlet.stats
            let lanes = r.inbox.laneFigures
            return NodeCounters(
                name: r.name, type: n.type.typeName,
                outputs: s.counts.indices.map { i in
                    NodeCounters.Output(pad: i < n.type.outputs.count ? n.type.outputs[i].name : "out\(i)", buffers: s.counts[i],
                                        bytes: s.bytes[i], mediaTime: s.times[i] >= 0 ? Double(s.times[i]) / 1e6 : nil)
                },
                inputs: n.inputs.indices.map { i in
                    let c = n.inputs[i]
                    let upstreamOutputs = pipeline.node(c.from)?.outputs.count ?? 1
                    return NodeCounters.Input(from: upstreamOutputs > 1 && !c.fromPad.isEmpty ? "\(c.from).\(c.fromPad)" : c.from,
                                              pad: c.pad, kind: lanes[i].kind, depth: lanes[i].depth, capacity: lanes[i].capacity,
                                              dropped: lanes[i].dropped)
                },
                ownDrops: r.outlet.droppedByNode, gauges: r.outlet.reported)
        }
    }

    /// The checked graph (`CheckedPipeline.graph`) with live figures on each edge: buffers a
    /// second over the last few stats intervals, queue depth and capacity, drops.
    public func graphSnapshot() -> PipelineGraph {
        var graph = pipeline.graph
        let counters = Dictionary(uniqueKeysWithValues: counters().map { ($0.name, $0) })
        let rate = rates.perSecond()
        graph.edges = zip(pipeline.edges, graph.edges).map { e, link in
            var link = link
            if let c = counters[e.to], e.lane < c.inputs.count {
                link.queue = c.inputs[e.lane].depth
                link.capacity = c.inputs[e.lane].capacity
                link.dropped = c.inputs[e.lane].dropped
            }
            if let r = rate[e.from], e.fromOutput < r.count { link.rate = (r[e.fromOutput] * 10).rounded() / 10 }
            return link
        }
        // A live option's value as the run has it now: after the changes `set` made.
        for i in graph.nodes.indices {
            guard let node = pipeline.node(graph.nodes[i].name), var live = graph.nodes[i].live else { continue }
            for j in live.indices {
                guard let spec = node.type.option(live[j].name), let v = currentOption(node: node.name, option: spec.name) else { continue }
                live[j].value = Redaction.text(v.shown(as: spec.type))
            }
            graph.nodes[i].live = live
        }
        graph.mediaTime = stats().mediaTime
        return graph
    }
}

/// Buffers a second per node output, from the counts of the last few stats intervals.
/// Sampled by the run's thread, read by whoever asks for the graph (control, the page).
final class EmissionRates: Sendable {
    private let samples = Mutex<[(wall: Double, counts: [String: [Int]])]>([])

    func sample(_ run: PipelineRun) {
        var counts: [String: [Int]] = [:]
        for r in run.runners { counts[r.name] = r.outlet.stats.counts }
        let now = run.clock
        samples.withLock { samples in
            samples.append((now, counts))
            // Three seconds' window: steady enough to read, recent enough to show a stall.
            while samples.count > 2, let first = samples.first, now - first.wall > 3 { samples.removeFirst() }
        }
    }

    func perSecond() -> [String: [Double]] {
        let samples = samples.withLock { $0 }
        guard let first = samples.first, let last = samples.last, last.wall > first.wall else { return [:] }
        var out: [String: [Double]] = [:]
        for (name, now) in last.counts {
            let then = first.counts[name] ?? now.map { _ in 0 }
            out[name] = zip(now, then).map { Double($0 - $1) / (last.wall - first.wall) }
        }
        return out
    }
}

extension ProcessMemory {
    /// RssAnon: the process's private resident memory (what a phone's budget counts), from /proc.
    public static var privateResidentBytes: Int { statusField("RssAnon:") }

    static func statusField(_ key: String) -> Int {
        guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in s.split(separator: "\n") where line.hasPrefix(key) {
            return (line.split(separator: " ").compactMap { Int($0) }.first ?? 0) * 1024
        }
        return 0
    }
}
